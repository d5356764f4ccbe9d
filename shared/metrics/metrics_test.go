package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

var demo = Kind{
	Operator: "demo-operator",
	Kind:     "DemoCluster",
	Name:     "cluster",
	States:   []string{"Initializing", "Ready", "Degraded"},
	Gauges:   []Series{{Name: "shards_ready", Help: "Shards serving."}},
	Counters: []Series{{Name: "failovers", Help: "Failovers."}, {Name: "slot_moves", Help: "Slots moved."}},
}

const help = `# HELP demo_operator_cluster_state 1 for each DemoCluster's current status.state, 0 for its other states (Initializing, Ready, Degraded).
# TYPE demo_operator_cluster_state gauge
`

func compare(t *testing.T, reg *prometheus.Registry, want string, names ...string) {
	t.Helper()
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
}

// TestStateFollowsTheObject: every state has a series, 1 only for the current one; a new
// state moves the 1; counters exist at zero from the first state on.
func TestStateFollowsTheObject(t *testing.T) {
	reg := prometheus.NewRegistry()
	o, err := Register(reg, demo)
	if err != nil {
		t.Fatal(err)
	}
	o.SetState("ns", "a", "Initializing")
	compare(t, reg, help+`
demo_operator_cluster_state{name="a",namespace="ns",state="Degraded"} 0
demo_operator_cluster_state{name="a",namespace="ns",state="Initializing"} 1
demo_operator_cluster_state{name="a",namespace="ns",state="Ready"} 0
`, "demo_operator_cluster_state")
	if n := testutil.ToFloat64(o.counters["failovers"].WithLabelValues("ns", "a")); n != 0 {
		t.Errorf("failovers %v before any", n)
	}
	if n, err := testutil.GatherAndCount(reg, "demo_operator_failovers_total", "demo_operator_slot_moves_total"); err != nil || n != 2 {
		t.Errorf("counter series after the first state: %d, %v; want 2 at zero", n, err)
	}

	o.SetState("ns", "a", "Ready")
	o.Add("ns", "a", "failovers", 1)
	o.Add("ns", "a", "slot_moves", 0) // nothing moved: no change
	o.Add("ns", "a", "slot_moves", 40)
	o.Set("ns", "a", "shards_ready", 3)
	compare(t, reg, help+`
demo_operator_cluster_state{name="a",namespace="ns",state="Degraded"} 0
demo_operator_cluster_state{name="a",namespace="ns",state="Initializing"} 0
demo_operator_cluster_state{name="a",namespace="ns",state="Ready"} 1
# HELP demo_operator_failovers_total Failovers.
# TYPE demo_operator_failovers_total counter
demo_operator_failovers_total{name="a",namespace="ns"} 1
# HELP demo_operator_slot_moves_total Slots moved.
# TYPE demo_operator_slot_moves_total counter
demo_operator_slot_moves_total{name="a",namespace="ns"} 40
# HELP demo_operator_cluster_shards_ready Shards serving.
# TYPE demo_operator_cluster_shards_ready gauge
demo_operator_cluster_shards_ready{name="a",namespace="ns"} 3
`, "demo_operator_cluster_state", "demo_operator_failovers_total", "demo_operator_slot_moves_total", "demo_operator_cluster_shards_ready")

	// No state written yet: every state 0.
	o.SetState("ns", "b", "")
	if got, err := ObjectSeries(reg, "ns", "b"); err != nil || len(got) != 3+2 || got[`demo_operator_cluster_state{state="Initializing"}`] != 0 || got[`demo_operator_cluster_state{state="Ready"}`] != 0 || got[`demo_operator_cluster_state{state="Degraded"}`] != 0 {
		t.Errorf("series of an object without a state: %v, %v; want every state 0 and the counters", got, err)
	}
}

// TestForgetDeletesOnlyThatObject: a gone object leaves no series; another's stay.
func TestForgetDeletesOnlyThatObject(t *testing.T) {
	reg := prometheus.NewRegistry()
	o, err := Register(reg, demo)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a", "b"} {
		o.SetState("ns", n, "Ready")
		o.Set("ns", n, "shards_ready", 3)
		o.Add("ns", n, "failovers", 2)
	}
	o.SetState("ns", "a", "Resizing") // a state the list lacks
	got, err := ObjectSeries(reg, "ns", "a")
	if err != nil || len(got) != 4+1+2 || got[`demo_operator_cluster_state{state="Resizing"}`] != 1 || got["demo_operator_failovers_total"] != 2 || got["demo_operator_cluster_shards_ready"] != 3 {
		t.Errorf("series of a before Forget: %v, %v", got, err)
	}
	o.Forget("ns", "a")
	if got, err := ObjectSeries(reg, "ns", "a"); err != nil || len(got) != 0 {
		t.Errorf("series of a after Forget: %v, %v", got, err)
	}
	all := []string{"demo_operator_cluster_state", "demo_operator_cluster_shards_ready", "demo_operator_failovers_total", "demo_operator_slot_moves_total"}
	n, err := testutil.GatherAndCount(reg, all...)
	if err != nil || n != 3+1+1+1 {
		t.Errorf("series left after forgetting a: %d, %v; want b's 6", n, err)
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == LabelName && l.GetValue() != "b" {
					t.Errorf("%s has a series of %s", f.GetName(), l.GetValue())
				}
			}
		}
	}
}

// TestStateMissingFromTheList: a state the list lacks has its own series while current,
// and goes when the state changes.
func TestStateMissingFromTheList(t *testing.T) {
	reg := prometheus.NewRegistry()
	o, err := Register(reg, demo)
	if err != nil {
		t.Fatal(err)
	}
	o.SetState("ns", "a", "Resizing")
	compare(t, reg, help+`
demo_operator_cluster_state{name="a",namespace="ns",state="Degraded"} 0
demo_operator_cluster_state{name="a",namespace="ns",state="Initializing"} 0
demo_operator_cluster_state{name="a",namespace="ns",state="Ready"} 0
demo_operator_cluster_state{name="a",namespace="ns",state="Resizing"} 1
`, "demo_operator_cluster_state")
	o.SetState("ns", "a", "Ready")
	if n, _ := testutil.GatherAndCount(reg, "demo_operator_cluster_state"); n != 3 {
		t.Errorf("%d state series after leaving Resizing, want the 3 listed", n)
	}
}

// TestRegisterTwiceShares: a second manager in the same process shares the series; a
// different description under the same name is an error, not a panic.
func TestRegisterTwiceShares(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, err := Register(reg, demo)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Register(reg, demo)
	if err != nil {
		t.Fatal(err)
	}
	b.SetState("ns", "x", "Ready")
	if a.state != b.state {
		t.Error("the second registration has state series of its own")
	}
	if got, err := ObjectSeries(reg, "ns", "x"); err != nil || got[`demo_operator_cluster_state{state="Ready"}`] != 1 {
		t.Errorf("series after the second registration's state: %v, %v", got, err)
	}
	other := demo
	other.Gauges = []Series{{Name: "shards_ready", Help: "Something else."}}
	if _, err := Register(reg, other); err == nil {
		t.Error("a gauge registered again with another help text was accepted")
	}
	if _, err := Register(reg, Kind{Operator: "demo-operator", Name: "cluster"}); err == nil {
		t.Error("a kind without states was accepted")
	}
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "demo_operator_pass_seconds", Help: "x"})
	got, err := Collector(reg, h)
	if err != nil || got != h {
		t.Fatalf("Collector: %v, %v", got, err)
	}
	again, err := Collector(reg, prometheus.NewHistogram(prometheus.HistogramOpts{Name: "demo_operator_pass_seconds", Help: "x"}))
	if err != nil || again != h {
		t.Errorf("Collector registered again: %p, %v; want the first %p", again, err, h)
	}
}

func TestPanicsOnUnnamedSeries(t *testing.T) {
	o, err := Register(prometheus.NewRegistry(), demo)
	if err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]func(){
		"gauge":   func() { o.Set("ns", "a", "nope", 1) },
		"counter": func() { o.Add("ns", "a", "nope", 1) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("an unnamed %s did not panic", name)
				}
			}()
			f()
		}()
	}
}

func TestPrefix(t *testing.T) {
	if got := Prefix("valkey-operator"); got != "valkey_operator" {
		t.Errorf("Prefix = %s", got)
	}
}
