package planner

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/opsuite/suite/services/memgraph-operator/internal/memgraph"
)

func TestPlan(t *testing.T) {
	w32 := desired(3, 2, 0, 0)
	fresh := []memgraph.Instance{{Name: "coordinator_1", CoordinatorServer: "c-0.svc:12000", Health: "up", Role: "leader"}}
	cases := []struct {
		name    string
		want    Desired
		seen    Observed
		plan    []string
		waiting []string
	}{
		{
			name: "bootstrap 3+2 on a fresh coordinator: itself first, SET MAIN over the new instances",
			want: w32,
			seen: Observed{Leader: "coordinator_1", Instances: fresh},
			plan: []string{"AddCoordinator coordinator_1", "AddCoordinator coordinator_2", "AddCoordinator coordinator_3",
				"RegisterInstance d_0 (or ASYNC)", "RegisterInstance d_1 (or ASYNC)", "SetMain d_0,d_1"},
		},
		{
			name: "leader's own entry first when it is not the lowest id",
			want: w32,
			seen: Observed{Leader: "coordinator_2", Instances: []memgraph.Instance{{Name: "coordinator_2", Role: "leader", Health: "up"}}},
			plan: []string{"AddCoordinator coordinator_2", "AddCoordinator coordinator_1", "AddCoordinator coordinator_3",
				"RegisterInstance d_0 (or ASYNC)", "RegisterInstance d_1 (or ASYNC)", "SetMain d_0,d_1"},
		},
		{
			name: "converged: nothing to write",
			want: w32,
			seen: Observed{Leader: "coordinator_1", Instances: view(w32, 1, ids(1, 2, 3), "d_0=main", "d_1=replica")},
		},
		{
			name: "converged with a replica down: registration is not health",
			want: w32,
			seen: Observed{Leader: "coordinator_1", Instances: view(w32, 1, ids(1, 2, 3), "d_0=main", "d_1=unknown/down")},
		},
		{
			name: "re-registration after UNREGISTER by hand; the MAIN is left alone",
			want: w32,
			seen: Observed{Leader: "coordinator_2", Instances: view(w32, 2, ids(1, 2, 3), "d_0=main")},
			plan: []string{"RegisterInstance d_1 (or ASYNC)"},
		},
		{
			name: "re-add a lost coordinator",
			want: w32,
			seen: Observed{Leader: "coordinator_1", Instances: view(w32, 1, ids(1, 3), "d_0=main", "d_1=replica")},
			plan: []string{"AddCoordinator coordinator_2"},
		},
		{
			name: "no MAIN: the lowest up survivor first, a down one skipped",
			want: desired(3, 3, 0, 0),
			seen: Observed{Leader: "coordinator_1", Instances: view(w32, 1, ids(1, 2, 3), "d_0=unknown/down", "d_1=replica", "d_2=replica")},
			plan: []string{"SetMain d_1,d_2"},
		},
		{
			name: "no MAIN with unregistered members: SET MAIN over the listed survivor only, registrations after it",
			want: desired(3, 3, 0, 0),
			seen: Observed{Leader: "coordinator_1", Instances: view(w32, 1, ids(1, 2, 3), "d_0=replica")},
			plan: []string{"SetMain d_0", "RegisterInstance d_1 (or ASYNC)", "RegisterInstance d_2 (or ASYNC)"},
		},
		{
			name:    "no MAIN and nothing up: wait",
			want:    w32,
			seen:    Observed{Leader: "coordinator_1", Instances: view(w32, 1, ids(1, 2, 3), "d_0=unknown/down", "d_1=unknown/down")},
			waiting: []string{WaitNoMainCandidate},
		},
		{
			name: "scale up both roles",
			want: desired(5, 3, 0, 0),
			seen: Observed{Leader: "coordinator_1", Instances: view(w32, 1, ids(1, 2, 3), "d_0=main", "d_1=replica")},
			plan: []string{"AddCoordinator coordinator_4", "AddCoordinator coordinator_5", "RegisterInstance d_2 (or ASYNC)"},
		},
		{
			name: "data scale-down, MAIN on a survivor: unregister the retiring replica",
			want: desired(3, 3, 0, 1),
			seen: Observed{Leader: "coordinator_1", Instances: view(w32, 1, ids(1, 2, 3), "d_0=main", "d_1=replica", "d_2=replica")},
			plan: []string{"UnregisterInstance d_2"},
		},
		{
			name: "data scale-down, MAIN parked on the retiring instance: demote, caught-up survivors in order, demoted last, unregister",
			want: desired(3, 3, 0, 1),
			seen: Observed{Leader: "coordinator_1", Instances: view(w32, 1, ids(1, 2, 3), "d_0=replica", "d_1=replica", "d_2=main"),
				Lag: lagOf("d_0=0", "d_1=0")},
			plan: []string{"DemoteInstance d_2", "SetMain d_0,d_1 (fallback d_2)", "UnregisterInstance d_2"},
		},
		{
			name: "a survivor behind is no candidate",
			want: desired(3, 3, 0, 1),
			seen: Observed{Leader: "coordinator_1", Instances: view(w32, 1, ids(1, 2, 3), "d_0=replica", "d_1=replica", "d_2=main"),
				Lag: lagOf("d_0=4", "d_1=0")},
			plan: []string{"DemoteInstance d_2", "SetMain d_1 (fallback d_2)", "UnregisterInstance d_2"},
		},
		{
			name: "a down survivor is no candidate even when lag says caught up",
			want: desired(3, 3, 0, 1),
			seen: Observed{Leader: "coordinator_1", Instances: view(w32, 1, ids(1, 2, 3), "d_0=unknown/down", "d_1=replica", "d_2=main"),
				Lag: lagOf("d_0=0", "d_1=0")},
			plan: []string{"DemoteInstance d_2", "SetMain d_1 (fallback d_2)", "UnregisterInstance d_2"},
		},
		{
			name:    "no caught-up survivor: nothing demoted",
			want:    desired(3, 3, 0, 1),
			seen:    Observed{Leader: "coordinator_1", Instances: view(w32, 1, ids(1, 2, 3), "d_0=replica", "d_1=replica", "d_2=main"), Lag: lagOf("d_0=1", "d_1=2")},
			waiting: []string{"no surviving replica is up and proven caught up by SHOW REPLICATION LAG to take over MAIN from d_2"},
		},
		{
			name:    "no lag read: nothing demoted",
			want:    desired(3, 3, 0, 1),
			seen:    Observed{Leader: "coordinator_1", Instances: view(w32, 1, ids(1, 2, 3), "d_0=replica", "d_1=replica", "d_2=main")},
			waiting: []string{"no surviving replica is up and proven caught up by SHOW REPLICATION LAG to take over MAIN from d_2"},
		},
		{
			name:    "retiring MAIN down: left to the coordinators' failover",
			want:    desired(3, 3, 0, 1),
			seen:    Observed{Leader: "coordinator_1", Instances: view(w32, 1, ids(1, 2, 3), "d_0=replica", "d_1=replica", "d_2=main/down"), Lag: lagOf("d_0=0")},
			waiting: []string{"MAIN d_2 is to move but is down; waiting for the coordinators' failover"},
		},
		{
			name: "several retiring: replicas unregistered before the MAIN is demoted",
			want: desired(3, 4, 0, 2),
			seen: Observed{Leader: "coordinator_1", Instances: view(w32, 1, ids(1, 2, 3), "d_0=replica", "d_1=replica", "d_2=unknown/down", "d_3=main"),
				Lag: lagOf("d_0=0", "d_1=0", "d_2=9")},
			plan: []string{"UnregisterInstance d_2", "DemoteInstance d_3", "SetMain d_0,d_1 (fallback d_3)", "UnregisterInstance d_3"},
		},
		{
			name: "shrink to one data instance",
			want: desired(3, 2, 0, 1),
			seen: Observed{Leader: "coordinator_1", Instances: view(w32, 1, ids(1, 2, 3), "d_0=replica", "d_1=main"), Lag: lagOf("d_0=0")},
			plan: []string{"DemoteInstance d_1", "SetMain d_0 (fallback d_1)", "UnregisterInstance d_1"},
		},
		{
			name: "retiring member already unregistered: converged",
			want: desired(3, 3, 0, 1),
			seen: Observed{Leader: "coordinator_1", Instances: view(w32, 1, ids(1, 2, 3), "d_0=main", "d_1=replica")},
		},
		{
			name:    "MAIN-less with the demoted MAIN still registered (operator killed after DEMOTE): restore it",
			want:    desired(3, 3, 0, 1),
			seen:    Observed{Leader: "coordinator_1", Instances: view(w32, 1, ids(1, 2, 3), "d_0=replica", "d_1=replica", "d_2=replica")},
			plan:    []string{"SetMain d_2"},
			waiting: []string{"retiring instances are kept registered until the cluster has a MAIN again"},
		},
		{
			name:    "MAIN-less, the scale lowered again after the DEMOTE: the highest retiring is the demoted MAIN",
			want:    desired(3, 3, 0, 2),
			seen:    Observed{Leader: "coordinator_1", Instances: view(w32, 1, ids(1, 2, 3), "d_0=replica", "d_1=replica", "d_2=replica")},
			plan:    []string{"SetMain d_2"},
			waiting: []string{"retiring instances are kept registered until the cluster has a MAIN again"},
		},
		{
			name: "MAIN-less, the highest retiring down: wait even with a lower one up",
			want: desired(3, 3, 0, 2),
			seen: Observed{Leader: "coordinator_1", Instances: view(w32, 1, ids(1, 2, 3), "d_0=replica", "d_1=replica", "d_2=unknown/down")},
			waiting: []string{"the cluster has no MAIN and d_2, possibly the demoted MAIN, is down",
				"retiring instances are kept registered until the cluster has a MAIN again"},
		},
		{
			name:    "MAIN-less, a drained instance decides over retiring ones",
			want:    drain(desired(3, 3, 0, 1), []string{"d_0"}, nil),
			seen:    Observed{Leader: "coordinator_1", Instances: view(w32, 1, ids(1, 2, 3), "d_0=replica", "d_1=replica", "d_2=replica")},
			plan:    []string{"SetMain d_0"},
			waiting: []string{"retiring instances are kept registered until the cluster has a MAIN again"},
		},
		{
			name: "MAIN-less and the retiring instance down: wait for it",
			want: desired(3, 3, 0, 1),
			seen: Observed{Leader: "coordinator_1", Instances: view(w32, 1, ids(1, 2, 3), "d_0=replica", "d_1=replica", "d_2=unknown/down")},
			waiting: []string{"the cluster has no MAIN and d_2, possibly the demoted MAIN, is down",
				"retiring instances are kept registered until the cluster has a MAIN again"},
		},
		{
			name: "undeclared instance registered by hand is left alone",
			want: w32,
			seen: Observed{Leader: "coordinator_1", Instances: view(w32, 1, ids(1, 2, 3), "d_0=main", "d_1=replica", "manual=replica")},
		},
		{
			name: "drain the MAIN (rolling restart): handed over with proof, stays registered",
			want: drain(desired(3, 3, 0, 0), []string{"d_0"}, nil),
			seen: Observed{Leader: "coordinator_1", Instances: view(w32, 1, ids(1, 2, 3), "d_0=main", "d_1=replica", "d_2=replica"),
				Lag: lagOf("d_1=0", "d_2=0")},
			plan: []string{"DemoteInstance d_0", "SetMain d_1,d_2 (fallback d_0)"},
		},
		{
			name:    "drain the MAIN without a caught-up replica: wait",
			want:    drain(desired(3, 2, 0, 0), []string{"d_0"}, nil),
			seen:    Observed{Leader: "coordinator_1", Instances: view(w32, 1, ids(1, 2, 3), "d_0=main", "d_1=replica"), Lag: lagOf("d_1=3")},
			waiting: []string{"no surviving replica is up and proven caught up by SHOW REPLICATION LAG to take over MAIN from d_0"},
		},
		{
			name: "a draining replica is no handover candidate",
			want: drain(desired(3, 3, 0, 1), []string{"d_0"}, nil),
			seen: Observed{Leader: "coordinator_1", Instances: view(w32, 1, ids(1, 2, 3), "d_0=replica", "d_1=replica", "d_2=main"),
				Lag: lagOf("d_0=0", "d_1=0")},
			plan: []string{"DemoteInstance d_2", "SetMain d_1 (fallback d_2)", "UnregisterInstance d_2"},
		},
		{
			name: "drained MAIN already moved: converged, the drained one stays",
			want: drain(desired(3, 2, 0, 0), []string{"d_0"}, nil),
			seen: Observed{Leader: "coordinator_1", Instances: view(w32, 1, ids(1, 2, 3), "d_0=replica", "d_1=main")},
		},
		{
			name: "MAIN-less with a draining instance up (killed after DEMOTE): restore it",
			want: drain(desired(3, 2, 0, 0), []string{"d_0"}, nil),
			seen: Observed{Leader: "coordinator_1", Instances: view(w32, 1, ids(1, 2, 3), "d_0=replica", "d_1=replica")},
			plan: []string{"SetMain d_0"},
		},
		{
			name: "drain the leader: yield",
			want: drain(w32, nil, []int{1}),
			seen: Observed{Leader: "coordinator_1", Instances: view(w32, 1, ids(1, 2, 3), "d_0=main", "d_1=replica")},
			plan: []string{"YieldLeadership"},
		},
		{
			name: "drain a follower: nothing to do",
			want: drain(w32, nil, []int{2}),
			seen: Observed{Leader: "coordinator_1", Instances: view(w32, 1, ids(1, 2, 3), "d_0=main", "d_1=replica")},
		},
		{
			name: "retiring and draining leader: one yield",
			want: drain(desired(5, 2, 2, 0), nil, []int{5}),
			seen: Observed{Leader: "coordinator_5", Instances: view(desired(5, 2, 2, 0), 5, ids(1, 2, 3, 4, 5), "d_0=main", "d_1=replica")},
			plan: []string{"RemoveCoordinator coordinator_4", "YieldLeadership"},
		},
		{
			name: "coordinator scale-down, leader on a survivor: remove both",
			want: desired(5, 2, 2, 0),
			seen: Observed{Leader: "coordinator_2", Instances: view(desired(5, 2, 2, 0), 2, ids(1, 2, 3, 4, 5), "d_0=main", "d_1=replica")},
			plan: []string{"RemoveCoordinator coordinator_4", "RemoveCoordinator coordinator_5"},
		},
		{
			name: "coordinator scale-down, leader retiring: remove the other, yield last",
			want: desired(5, 2, 2, 0),
			seen: Observed{Leader: "coordinator_4", Instances: view(desired(5, 2, 2, 0), 4, ids(1, 2, 3, 4, 5), "d_0=main", "d_1=replica")},
			plan: []string{"RemoveCoordinator coordinator_5", "YieldLeadership"},
		},
		{
			name: "retiring leader with a registration missing: the registration waits for the next leader",
			want: desired(5, 2, 2, 0),
			seen: Observed{Leader: "coordinator_4", Instances: view(desired(5, 2, 2, 0), 4, ids(1, 2, 3, 4, 5), "d_0=main")},
			plan: []string{"RemoveCoordinator coordinator_5", "YieldLeadership"},
		},
		{
			name: "retiring leader alone: just yield",
			want: desired(5, 2, 2, 0),
			seen: Observed{Leader: "coordinator_5", Instances: view(desired(5, 2, 2, 0), 5, ids(1, 2, 3, 5), "d_0=main", "d_1=replica")},
			plan: []string{"YieldLeadership"},
		},
		{
			name: "already removed coordinators: converged",
			want: desired(5, 2, 2, 0),
			seen: Observed{Leader: "coordinator_1", Instances: view(desired(5, 2, 2, 0), 1, ids(1, 2, 3), "d_0=main", "d_1=replica")},
		},
		{
			name: "both roles retiring, leader retiring: data retirement first, yield last",
			want: desired(5, 3, 2, 1),
			seen: Observed{Leader: "coordinator_5", Instances: view(desired(5, 3, 2, 1), 5, ids(1, 2, 3, 4, 5), "d_0=replica", "d_1=replica", "d_2=main"),
				Lag: lagOf("d_0=0", "d_1=0")},
			plan: []string{"DemoteInstance d_2", "SetMain d_0,d_1 (fallback d_2)", "UnregisterInstance d_2",
				"RemoveCoordinator coordinator_4", "YieldLeadership"},
		},
		{
			name: "a retiring coordinator is never re-added",
			want: desired(5, 2, 2, 0),
			seen: Observed{Leader: "coordinator_1", Instances: view(desired(5, 2, 2, 0), 1, ids(1, 2, 3, 5), "d_0=main", "d_1=replica")},
			plan: []string{"RemoveCoordinator coordinator_5"},
		},
		{
			name: "grow data while shrinking coordinators",
			want: desired(5, 3, 2, 0),
			seen: Observed{Leader: "coordinator_1", Instances: view(desired(5, 3, 2, 0), 1, ids(1, 2, 3, 4, 5), "d_0=main", "d_1=replica")},
			plan: []string{"RemoveCoordinator coordinator_4", "RemoveCoordinator coordinator_5", "RegisterInstance d_2 (or ASYNC)"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := Plan(c.want, c.seen)
			if got := describe(r); !reflect.DeepEqual(got, c.plan) && (len(got) != 0 || len(c.plan) != 0) {
				t.Errorf("plan\n got %q\nwant %q", got, c.plan)
			}
			if !reflect.DeepEqual(r.Waiting, c.waiting) && (len(r.Waiting) != 0 || len(c.waiting) != 0) {
				t.Errorf("waiting\n got %q\nwant %q", r.Waiting, c.waiting)
			}
			if r.Converged() != (len(c.plan) == 0 && len(c.waiting) == 0) {
				t.Errorf("Converged() = %v", r.Converged())
			}
			assertSafe(t, c.want, c.seen, r)
		})
	}
}

// assertSafe checks the plan-level invariants on any plan.
func assertSafe(t *testing.T, want Desired, seen Observed, r Result) {
	t.Helper()
	main, hasMain := memgraph.MainOf(seen.Instances)
	mainNow := ""
	if hasMain {
		mainNow = main.Name
	}
	for i, c := range r.Commands {
		switch c.Kind {
		case SetMain:
			if mainNow != "" {
				t.Errorf("command %d: SetMain planned while %s is MAIN", i, mainNow)
			}
			mainNow = c.Candidates[0]
		case DemoteInstance:
			if c.Instance.Name != mainNow {
				t.Errorf("command %d: demotes %s, MAIN is %q", i, c.Instance.Name, mainNow)
			}
			mainNow = ""
		case UnregisterInstance:
			if c.Instance.Name == mainNow {
				t.Errorf("command %d: unregisters the MAIN %s", i, mainNow)
			}
			if !slices.Contains(want.RetiringData, c.Instance.Name) {
				t.Errorf("command %d: unregisters %s, which is not retiring", i, c.Instance.Name)
			}
		case RemoveCoordinator:
			if memgraph.CoordinatorName(c.Coordinator.ID) == seen.Leader {
				t.Errorf("command %d: removes the leader", i)
			}
		case YieldLeadership:
			if i != len(r.Commands)-1 {
				t.Errorf("YieldLeadership at %d of %d: not the last command", i, len(r.Commands))
			}
		}
	}
}

func TestNeedsLag(t *testing.T) {
	w := desired(3, 3, 0, 1)
	if !NeedsLag(w, view(w, 1, ids(1), "d_0=replica", "d_2=main")) {
		t.Error("retiring up MAIN: lag needed")
	}
	if NeedsLag(w, view(w, 1, ids(1), "d_0=main", "d_2=replica")) {
		t.Error("MAIN on a survivor: no lag needed")
	}
	if NeedsLag(w, view(w, 1, ids(1), "d_0=replica", "d_2=main/down")) {
		t.Error("retiring MAIN down: no lag needed (failover's job)")
	}
}

func TestCommandText(t *testing.T) {
	w := desired(3, 3, 0, 0)
	cases := []struct {
		cmd  Command
		want []string
	}{
		{Command{Kind: AddCoordinator, Coordinator: w.Coordinators[1]},
			[]string{`ADD COORDINATOR 2 WITH CONFIG {"bolt_server": "c-1.svc:7687", "coordinator_server": "c-1.svc:12000", "management_server": "c-1.svc:10000"}`}},
		{Command{Kind: RegisterInstance, Instance: w.Data[2]},
			[]string{`REGISTER INSTANCE d_2 WITH CONFIG {"bolt_server": "d-2.svc:7687", "management_server": "d-2.svc:10000", "replication_server": "d-2.svc:20000"}`}},
		{Command{Kind: SetMain, Candidates: []string{"d_0", "d_1"}, Fallback: "d_2"},
			[]string{"SET INSTANCE d_0 TO MAIN", "SET INSTANCE d_1 TO MAIN", "SET INSTANCE d_2 TO MAIN"}},
		{Command{Kind: DemoteInstance, Instance: DataInstance{Name: "d_2"}}, []string{"DEMOTE INSTANCE d_2"}},
		{Command{Kind: UnregisterInstance, Instance: DataInstance{Name: "d_2"}}, []string{"UNREGISTER INSTANCE d_2"}},
		{Command{Kind: RemoveCoordinator, Coordinator: Coordinator{ID: 4}}, []string{"REMOVE COORDINATOR 4"}},
		{Command{Kind: YieldLeadership}, []string{"YIELD LEADERSHIP"}},
	}
	for _, c := range cases {
		var got []string
		for _, a := range c.cmd.Attempts() {
			got = append(got, a.Cypher)
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: attempts\n got %q\nwant %q", c.cmd, got, c.want)
		}
		if c.cmd.Cypher() != c.want[0] {
			t.Errorf("%s: Cypher() = %q", c.cmd, c.cmd.Cypher())
		}
	}
	a := Command{Kind: SetMain, Candidates: []string{"d_0"}, Fallback: "d_2"}.Attempts()
	if a[0].Fallback || !a[1].Fallback || a[1].Target != "d_2" {
		t.Errorf("fallback not marked: %+v", a)
	}
	if s := (Command{Kind: RegisterInstance, Instance: w.Data[0]}).String(); strings.Contains(s, "svc") {
		t.Errorf("String() carries addresses: %q", s)
	}
}

func BenchmarkPlan(b *testing.B) {
	want := desired(7, 16, 2, 4)
	var data []string
	for i := 0; i < 16; i++ {
		role := "replica"
		if i == 15 {
			role = "main"
		}
		data = append(data, "d_"+strconv.Itoa(i)+"="+role)
	}
	var lag []string
	for i := 0; i < 15; i++ {
		lag = append(lag, "d_"+strconv.Itoa(i)+"=0")
	}
	seen := Observed{Leader: "coordinator_7", Instances: view(want, 7, ids(1, 2, 3, 4, 5, 6, 7), data...), Lag: lagOf(lag...)}
	b.ReportAllocs()
	for b.Loop() {
		r := Plan(want, seen)
		if len(r.Commands) == 0 {
			b.Fatal("empty plan")
		}
	}
}

// TestPlanUnreachableVersusDown: a member the operator cannot reach while the leader shows
// it up holds the whole plan (rule 0): the coordinators see it, the operator does not, and
// a handover, retirement or re-registration decided on that partial view could act against
// what they see. A member the leader shows down is the coordinators' to handle, and one it
// does not list is registered through it: the plan goes on for them as it would without
// the operator's failure to reach them.
func TestPlanUnreachableVersusDown(t *testing.T) {
	w32 := desired(3, 2, 0, 0)
	retireMain := desired(3, 3, 0, 1) // d_2 retires
	cases := []struct {
		name       string
		want       Desired
		seen       Observed
		plan       []string
		waiting    []string
		unanswered []string
	}{
		{
			name: "converged, the MAIN unreachable but up: nothing, and the plan says why",
			want: w32,
			seen: Observed{Leader: "coordinator_1", Instances: view(w32, 1, ids(1, 2, 3), "d_0=main", "d_1=replica"),
				Unreachable: map[string]string{"d_0": "no answer within 5s"}},
			unanswered: []string{"d_0"},
		},
		{
			name: "a retiring MAIN unreachable but up: no DEMOTE, no SET MAIN, no UNREGISTER",
			want: retireMain,
			seen: Observed{Leader: "coordinator_1", Instances: view(retireMain, 1, ids(1, 2, 3), "d_0=replica", "d_1=replica", "d_2=main"),
				Lag:         []memgraph.Lag{{Instance: "d_0"}, {Instance: "d_1"}},
				Unreachable: map[string]string{"d_2": "no answer within 5s"}},
			unanswered: []string{"d_2"},
		},
		{
			name: "a retiring MAIN the leader shows down: waits for the coordinators' failover, as without the probe",
			want: retireMain,
			seen: Observed{Leader: "coordinator_1", Instances: view(retireMain, 1, ids(1, 2, 3), "d_0=replica", "d_1=replica", "d_2=main/down"),
				Unreachable: map[string]string{"d_2": "connection refused"}},
			waiting: []string{fmt.Sprintf(waitRetiringMainDown, "d_2")},
		},
		{
			name: "a replica unreachable but up holds a retirement of another",
			want: retireMain,
			seen: Observed{Leader: "coordinator_1", Instances: view(retireMain, 1, ids(1, 2, 3), "d_0=main", "d_1=replica", "d_2=replica"),
				Unreachable: map[string]string{"d_1": "no answer within 5s"}},
			unanswered: []string{"d_1"},
		},
		{
			name: "the same replica down in the leader's view: the retirement goes on",
			want: retireMain,
			seen: Observed{Leader: "coordinator_1", Instances: view(retireMain, 1, ids(1, 2, 3), "d_0=main", "d_1=replica/down", "d_2=replica"),
				Unreachable: map[string]string{"d_1": "no answer within 5s"}},
			plan: []string{"UnregisterInstance d_2"},
		},
		{
			name: "no MAIN, the survivor down and unreachable: promotion as rule 3 says",
			want: w32,
			seen: Observed{Leader: "coordinator_1", Instances: view(w32, 1, ids(1, 2, 3), "d_0=unknown/down", "d_1=replica"),
				Unreachable: map[string]string{"d_0": "connection refused"}},
			plan: []string{"SetMain d_1"},
		},
		{
			name: "no MAIN, the candidate unreachable but up: no promotion",
			want: w32,
			seen: Observed{Leader: "coordinator_1", Instances: view(w32, 1, ids(1, 2, 3), "d_0=unknown/down", "d_1=replica"),
				Unreachable: map[string]string{"d_1": "no answer within 5s"}},
			unanswered: []string{"d_1"},
		},
		{
			name: "an instance the leader does not list is registered through it, reachable or not",
			want: desired(3, 3, 0, 0),
			seen: Observed{Leader: "coordinator_1", Instances: view(w32, 1, ids(1, 2, 3), "d_0=main", "d_1=replica"),
				Unreachable: map[string]string{"d_2": "connection failed"}},
			plan: []string{"RegisterInstance d_2 (or ASYNC)"},
		},
		{
			name: "a follower unreachable but up, and a data instance too: both named, sorted",
			want: desired(5, 2, 0, 0),
			seen: Observed{Leader: "coordinator_1", Instances: view(w32, 1, ids(1, 2, 3), "d_0=main", "d_1=replica"),
				Unreachable: map[string]string{"d_1": "no answer within 5s", "coordinator_2": "no answer within 5s"}},
			unanswered: []string{"coordinator_2", "d_1"},
		},
		{
			name: "a follower the leader shows down: the scale-up goes on",
			want: desired(5, 2, 0, 0),
			seen: Observed{Leader: "coordinator_1", Instances: func() []memgraph.Instance {
				rows := view(w32, 1, ids(1, 2, 3), "d_0=main", "d_1=replica")
				rows[1].Health = "down"
				return rows
			}(), Unreachable: map[string]string{"coordinator_2": "connection refused"}},
			plan: []string{"AddCoordinator coordinator_4", "AddCoordinator coordinator_5"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := Plan(c.want, c.seen)
			if got := describe(r); !slices.Equal(got, c.plan) {
				t.Errorf("plan\n got %q\nwant %q", got, c.plan)
			}
			if !slices.Equal(r.Unanswered, c.unanswered) {
				t.Errorf("Unanswered %q, want %q", r.Unanswered, c.unanswered)
			}
			if got := Unanswered(c.seen); !slices.Equal(got, c.unanswered) {
				t.Errorf("Unanswered(seen) %q, want %q", got, c.unanswered)
			}
			if c.waiting != nil && !slices.Equal(r.Waiting, c.waiting) {
				t.Errorf("waiting\n got %q\nwant %q", r.Waiting, c.waiting)
			}
			if len(c.unanswered) > 0 {
				if len(r.Waiting) != 1 || !strings.Contains(r.Waiting[0], strings.Join(c.unanswered, ", ")) || r.Converged() {
					t.Errorf("held plan: Waiting %q, Converged %v; want one sentence naming %q", r.Waiting, r.Converged(), c.unanswered)
				}
			}
			assertSafe(t, c.want, c.seen, r)
		})
	}
}
