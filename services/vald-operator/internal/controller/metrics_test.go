package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	valdv1 "github.com/opsuite/suite/api/vald/v1"
	shmetrics "github.com/opsuite/suite/shared/metrics"
	"github.com/opsuite/suite/shared/testenv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

func TestMetricsRegistered(t *testing.T) {
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, f := range families {
		have[f.GetName()] = true
	}
	// Vectors show up once they have a child; touch them.
	h := start(t, nil)
	h.create(h.release("vor", "a=1"))
	h.waitStatus("vor", statusCompleted)
	families, err = metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		have[f.GetName()] = true
	}
	for _, name := range []string{
		"vald_operator_reconcile_total", "vald_operator_reconcile_duration_seconds",
		"vald_operator_phase_duration_seconds", "vald_operator_phase_evaluation_seconds",
		"vald_operator_phase_transitions_total", "vald_operator_valdrelease_writes_total",
	} {
		if !have[name] {
			t.Errorf("metric %s not on controller-runtime's registry", name)
		}
	}
	// The series registered by the manager above, shared with a second registration.
	cm, err := newControllerMetrics()
	if err != nil {
		t.Fatal(err)
	}
	if n := testutil.ToFloat64(cm.phaseTransitions.WithLabelValues("Completed", "Succeeded")); n < 1 {
		t.Errorf("Completed/Succeeded transitions %v", n)
	}
	// A phase reached and done in one pass is timed too.
	var m dto.Metric
	if err := cm.phaseSeconds.WithLabelValues("WaitingCreateVrs").(prometheus.Histogram).Write(&m); err != nil || m.GetHistogram().GetSampleCount() < 1 {
		t.Errorf("WaitingCreateVrs durations observed: %d, %v", m.GetHistogram().GetSampleCount(), err)
	}
}

// TestReleaseStateSeries: a release has one vald_operator_release_state series per
// state, 1 for its status.state, following it; none once the release is deleted.
func TestReleaseStateSeries(t *testing.T) {
	h := start(t, nil)
	state := func(s string) string { return fmt.Sprintf("vald_operator_release_state{state=%q}", s) }
	wantSeries := func(what string, want map[string]float64) {
		t.Helper()
		testenv.Eventually(t, 10*time.Second, what, func() (bool, string) {
			got, err := shmetrics.ObjectSeries(metrics.Registry, h.ns, "vor")
			if err != nil {
				return false, err.Error()
			}
			if len(got) != len(want) {
				return false, fmt.Sprint(got)
			}
			for k, v := range want {
				if g, ok := got[k]; !ok || g != v {
					return false, fmt.Sprint(got)
				}
			}
			return true, ""
		})
	}
	// A cluster without an id: Pending until an external system sets one.
	h.create(h.release("vor", "a=1", "b="))
	h.waitStatus("vor", "WaitingClusterCreate 0/3 Pending | WaitingClusterCreate=Unknown/Pending")
	wantSeries("Pending", map[string]float64{state("Ready"): 0, state("Reconciling"): 0, state("Pending"): 1, state("Failed"): 0})

	var vor valdv1.ValdOperatorRelease
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: h.ns, Name: "vor"}, &vor); err != nil {
		t.Fatal(err)
	}
	vor.Spec.Infrastructure[0].Clusters[1].ID = "2"
	if err := env.Client.Update(t.Context(), &vor); err != nil {
		t.Fatal(err)
	}
	h.waitStatus("vor", statusCompleted)
	wantSeries("Ready", map[string]float64{state("Ready"): 1, state("Reconciling"): 0, state("Pending"): 0, state("Failed"): 0})

	if err := env.Client.Delete(t.Context(), &vor); err != nil {
		t.Fatal(err)
	}
	wantSeries("no series after the delete", map[string]float64{})
}

// TestPrinterColumns reads the table kubectl prints: STATUS is the summary state, not the
// first condition.
func TestPrinterColumns(t *testing.T) {
	h := start(t, nil)
	h.create(h.release("vor", "a=1", "b="))
	h.waitStatus("vor", "WaitingClusterCreate 0/3 Pending | WaitingClusterCreate=Unknown/Pending")
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := cs.CoreV1().RESTClient().Get().
		AbsPath("/apis/vald.vdaas.org/v1/namespaces", h.ns, "valdoperatorreleases").
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").
		DoRaw(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var table struct {
		Columns []struct{ Name string } `json:"columnDefinitions"`
		Rows    []struct{ Cells []any } `json:"rows"`
	}
	if err := json.Unmarshal(raw, &table); err != nil {
		t.Fatal(err)
	}
	var cols []string
	for _, c := range table.Columns {
		cols = append(cols, c.Name)
	}
	if len(table.Rows) != 1 {
		t.Fatalf("rows %v", table.Rows)
	}
	got := map[string]any{}
	for i, c := range cols {
		got[c] = table.Rows[0].Cells[i]
	}
	if got["Phase"] != "WaitingClusterCreate" || got["Progress"] != "0/3" || got["Status"] != "Pending" || got["Age"] == nil {
		t.Errorf("columns %v, row %v", cols, got)
	}
}
