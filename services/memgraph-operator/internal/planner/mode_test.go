package planner

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/opsuite/suite/services/memgraph-operator/internal/memgraph"
)

// withModes gives d_i mode modes[i] ("" keeps SYNC).
func withModes(w Desired, modes ...string) Desired {
	w.Data = slices.Clone(w.Data)
	for i, m := range modes {
		w.Data[i].Mode = m
	}
	return w
}

func TestPlanSettings(t *testing.T) {
	w := desired(3, 2, 0, 0)
	w.Settings = []Setting{{"instance_down_timeout_sec", "7"}, {"instance_health_check_frequency_sec", "1"}, {"sync_failover_only", "false"}}
	rows := view(w, 1, ids(1, 2, 3), "d_0=main", "d_1=replica")
	replicas := []memgraph.Replica{{Name: "d_1", Mode: memgraph.ModeSync}}
	cases := []struct {
		name     string
		settings map[string]string
		want     []string
	}{
		{"defaults differ", map[string]string{"instance_down_timeout_sec": "5", "instance_health_check_frequency_sec": "1", "sync_failover_only": "true", "global_read_only": "false"},
			[]string{"SetCoordinatorSetting instance_down_timeout_sec=7", "SetCoordinatorSetting sync_failover_only=false"}},
		{"all equal", map[string]string{"instance_down_timeout_sec": "7", "instance_health_check_frequency_sec": "1", "sync_failover_only": "false"}, nil},
		// An older Memgraph without the setting would refuse it on every pass.
		{"not listed", map[string]string{"sync_failover_only": "false"}, nil},
		{"not read", nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Plan(w, Observed{Leader: "coordinator_1", Instances: rows, Settings: tc.settings, Replicas: replicas})
			if !slices.Equal(describe(got), tc.want) {
				t.Errorf("plan %q, want %q", describe(got), tc.want)
			}
			if (len(tc.want) == 0) != got.Converged() {
				t.Errorf("converged %v with %d commands", got.Converged(), len(tc.want))
			}
		})
	}
	for _, c := range Plan(w, Observed{Leader: "coordinator_1", Instances: rows, Settings: cases[0].settings}).Commands {
		if want := `SET COORDINATOR SETTING "instance_down_timeout_sec" TO "7"`; c.Setting.Name == "instance_down_timeout_sec" && c.Cypher() != want {
			t.Errorf("query %q, want %q", c.Cypher(), want)
		}
	}
}

func TestPlanRegistrationModes(t *testing.T) {
	const sync, async, strict = memgraph.ModeSync, memgraph.ModeAsync, memgraph.ModeStrictSync
	cases := []struct {
		name     string
		want     Desired
		rows     []string
		replicas []memgraph.Replica
		plan     []string
	}{
		{"bootstrap strict sync with one async", withModes(desired(3, 3, 0, 0), strict, strict, async), nil, nil,
			[]string{"RegisterInstance d_0 AS STRICT_SYNC (or ASYNC)", "RegisterInstance d_1 AS STRICT_SYNC (or ASYNC)", "RegisterInstance d_2 AS ASYNC", "SetMain d_0,d_1,d_2"}},
		{"scale up next to a SYNC replica: ASYNC first", withModes(desired(3, 3, 0, 0), strict, strict, strict),
			[]string{"d_0=main", "d_1=replica"}, []memgraph.Replica{{Name: "d_1", Mode: sync}},
			[]string{"RegisterInstance d_2 AS ASYNC"}},
		{"scale up next to a STRICT_SYNC replica", withModes(desired(3, 3, 0, 0), strict, strict, strict),
			[]string{"d_0=main", "d_1=replica"}, []memgraph.Replica{{Name: "d_1", Mode: strict}},
			[]string{"RegisterInstance d_2 AS STRICT_SYNC (or ASYNC)"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			coords := ids(1, 2, 3)
			if tc.rows == nil {
				coords = ids(1)
			}
			got := Plan(tc.want, Observed{Leader: "coordinator_1", Instances: view(tc.want, 1, coords, tc.rows...), Replicas: tc.replicas})
			var plan []string
			for _, s := range describe(got) {
				if !slices.Contains([]string{"AddCoordinator coordinator_1", "AddCoordinator coordinator_2", "AddCoordinator coordinator_3"}, s) {
					plan = append(plan, s)
				}
			}
			if !slices.Equal(plan, tc.plan) {
				t.Errorf("plan %q, want %q", plan, tc.plan)
			}
		})
	}
}

// modeCluster is the part of a Memgraph HA cluster a mode change touches: registered
// instances with their modes (the MAIN's included, which SHOW REPLICAS does not show),
// the MAIN, and Memgraph's refusals.
type modeCluster struct {
	modes map[string]string
	main  string
	// mixes counts the moments SYNC and STRICT_SYNC were registered together (Memgraph
	// refuses that, so any is a bug of this model).
	mixes     int
	mainless  int // commands run while no MAIN was recorded
	demotions int
}

func (m *modeCluster) rows(want Desired) []memgraph.Instance {
	var data []string
	for _, d := range want.Data {
		if _, ok := m.modes[d.Name]; !ok {
			continue
		}
		role := "replica"
		if d.Name == m.main {
			role = "main"
		}
		data = append(data, d.Name+"="+role)
	}
	return view(want, 1, ids(1, 2, 3), data...)
}

func (m *modeCluster) replicas() []memgraph.Replica {
	var out []memgraph.Replica
	for _, n := range slices.Sorted(maps.Keys(m.modes)) {
		if n != m.main {
			out = append(out, memgraph.Replica{Name: n, Mode: m.modes[n]})
		}
	}
	return out
}

func (m *modeCluster) lag() []memgraph.Lag {
	var out []memgraph.Lag
	for _, r := range m.replicas() {
		out = append(out, lagOf(r.Name+"=0")...)
	}
	return out
}

func (m *modeCluster) run(c Command, a Attempt) error {
	if m.main == "" {
		m.mainless++
	}
	switch c.Kind {
	case UnregisterInstance:
		if a.Target == m.main {
			return refuse("Alive main instance can't be unregistered! Shut it down to trigger failover and then unregister it!")
		}
		delete(m.modes, a.Target)
	case RegisterInstance:
		mode := memgraph.ModeSync
		switch {
		case a.ModeFallback:
			mode = c.FallbackMode
		case c.Instance.Mode != "":
			mode = c.Instance.Mode
		}
		for _, other := range m.modes {
			if memgraph.ModeConflicts(other, mode) {
				return refuse("Cluster cannot consists of both STRICT_SYNC and SYNC replicas. The valid cluster consists of either STRICT_SYNC and ASYNC or SYNC and ASYNC replicas.")
			}
		}
		m.modes[a.Target] = mode
	case DemoteInstance:
		m.main = ""
		m.demotions++
	case SetMain:
		if m.main != "" {
			return refuse("Couldn't set instance to main since there is already a main instance in cluster!")
		}
		m.main = a.Target
	default:
		return fmt.Errorf("unexpected %v", c)
	}
	has := map[string]bool{}
	for _, md := range m.modes {
		has[md] = true
	}
	if has[memgraph.ModeSync] && has[memgraph.ModeStrictSync] {
		m.mixes++
	}
	return nil
}

// pass is one executor pass: plan, run, and after a mode refusal that names the MAIN,
// plan again with MainBlocksMode, as executor.Reconcile does.
func (m *modeCluster) pass(want Desired) (ran int) {
	seen := Observed{Leader: "coordinator_1", Instances: m.rows(want), Replicas: m.replicas(), Lag: m.lag()}
	rep := Execute(Plan(want, seen).Commands, m.run)
	ran = len(rep.Executed)
	if rep.ModeBlocked {
		seen = Observed{Leader: "coordinator_1", Instances: m.rows(want), Replicas: m.replicas(), Lag: m.lag(), MainBlocksMode: true}
		ran += len(Execute(Plan(want, seen).Commands, m.run).Executed)
	}
	return ran
}

// TestModeChangesConverge: from every cluster mode to every other, with 2 and 3 data
// instances and the MAIN anywhere, the passes converge on the declared modes of every
// replica, never mix SYNC and STRICT_SYNC, and never run a command without a MAIN except
// the promotion that follows a handover's DEMOTE.
func TestModeChangesConverge(t *testing.T) {
	modes := []string{memgraph.ModeSync, memgraph.ModeAsync, memgraph.ModeStrictSync}
	for _, n := range []int{2, 3} {
		for _, from := range modes {
			for _, to := range modes {
				for mainAt := range n {
					name := fmt.Sprintf("%d instances %s to %s main d_%d", n, from, to, mainAt)
					t.Run(name, func(t *testing.T) {
						want := desired(3, n, 0, 0)
						cl := &modeCluster{modes: map[string]string{}, main: fmt.Sprintf("d_%d", mainAt)}
						for _, d := range want.Data {
							cl.modes[d.Name] = from
						}
						all := make([]string, n)
						for i := range all {
							all[i] = to
						}
						want = withModes(want, all...)
						passes := 0
						for ; passes < 20 && cl.pass(want) > 0; passes++ {
						}
						if passes == 20 {
							t.Fatalf("no convergence in 20 passes: %v main %s", cl.modes, cl.main)
						}
						for n, md := range cl.modes {
							if n != cl.main && md != to {
								t.Errorf("replica %s is %s, want %s", n, md, to)
							}
						}
						if len(cl.modes) != n || cl.main == "" {
							t.Errorf("membership %v main %q", cl.modes, cl.main)
						}
						if cl.mixes > 0 {
							t.Errorf("SYNC and STRICT_SYNC registered together %d times", cl.mixes)
						}
						if cl.mainless > cl.demotions {
							t.Errorf("%d commands ran without a MAIN after %d handovers", cl.mainless, cl.demotions)
						}
						if from == to && passes > 0 {
							t.Errorf("%d passes on a converged cluster", passes)
						}
						t.Logf("%d passes, %d handovers", passes, cl.demotions)
					})
				}
			}
		}
	}
}
