package executor

import (
	"errors"
	"slices"
	"testing"

	"github.com/opsuite/suite/services/memgraph-operator/internal/memgraph"
	"github.com/opsuite/suite/services/memgraph-operator/internal/planner"
)

func TestPickLeader(t *testing.T) {
	coord := func(id int) planner.Coordinator {
		return planner.Coordinator{ID: id, Name: memgraph.CoordinatorName(id), BoltServer: "c:" + memgraph.CoordinatorName(id)}
	}
	row := func(id int, role string) memgraph.Instance {
		return memgraph.Instance{Name: memgraph.CoordinatorName(id), BoltServer: "c:" + memgraph.CoordinatorName(id), CoordinatorServer: "x", Role: role}
	}
	// cluster is a full view with leader l among ids.
	cluster := func(l int, ids ...int) []memgraph.Instance {
		var rows []memgraph.Instance
		for _, id := range ids {
			role := memgraph.RoleFollower
			if id == l {
				role = memgraph.RoleLeader
			}
			rows = append(rows, row(id, role))
		}
		return append(rows, memgraph.Instance{Name: "d_0", Role: memgraph.RoleMain})
	}
	alone := func(id int, role string) []memgraph.Instance {
		return []memgraph.Instance{{Name: memgraph.CoordinatorName(id), CoordinatorServer: "x", Role: role}}
	}
	down := errors.New("connection refused")
	view := func(id int, rows []memgraph.Instance) View { return View{Coordinator: coord(id), Rows: rows} }
	unreachable := func(id int) View { return View{Coordinator: coord(id), Err: down} }

	cases := []struct {
		name   string
		views  []View
		index  int
		leader string
		reason string
	}{
		{"all agree", []View{view(1, cluster(2, 1, 2, 3)), view(2, cluster(2, 1, 2, 3)), view(3, cluster(2, 1, 2, 3))}, 1, "coordinator_2", ""},
		{"a follower naming no leader is skipped",
			[]View{view(1, cluster(0, 1, 2, 3)), view(2, cluster(2, 1, 2, 3)), view(3, cluster(2, 1, 2, 3))}, 1, "coordinator_2", ""},
		{"none names a leader", []View{view(1, cluster(0, 1, 2, 3)), view(2, cluster(0, 1, 2, 3)), unreachable(3)}, -1, "", ReasonNoCoordinatorLeader},
		{"none answers", []View{unreachable(1), unreachable(2), unreachable(3)}, -1, "", ReasonCoordinatorUnreachable},
		{"bootstrap: all fresh, the lowest id leading", []View{view(1, alone(1, "leader")), view(2, alone(2, "follower")), view(3, alone(3, "follower"))}, 0, "coordinator_1", ""},
		{"bootstrap, Memgraph style: every fresh coordinator leads itself", []View{view(1, alone(1, "leader")), view(2, alone(2, "leader")), view(3, alone(3, "leader"))}, 0, "coordinator_1", ""},
		{"bootstrap waits for a fresh leader", []View{view(1, alone(1, "follower")), view(2, alone(2, "follower")), view(3, alone(3, "follower"))}, -1, "", ReasonNoCoordinatorLeader},
		{"never bootstrap with a coordinator missing", []View{view(1, alone(1, "leader")), view(2, alone(2, "follower")), unreachable(3)}, -1, "", ReasonCoordinatorUnreachable},
		{"a wiped coordinator_1 leading itself is not the cluster's leader",
			[]View{view(1, alone(1, "leader")), view(2, cluster(3, 1, 2, 3)), view(3, cluster(3, 1, 2, 3))}, 2, "coordinator_3", ""},
		{"stale votes for a wiped coordinator_1: wait",
			[]View{view(1, alone(1, "leader")), view(2, cluster(1, 1, 2, 3)), view(3, cluster(1, 1, 2, 3))}, -1, "", ReasonNoCoordinatorLeader},
		{"new coordinators of a scale-up do not vote", []View{view(1, cluster(2, 1, 2, 3)), view(2, cluster(2, 1, 2, 3)), view(3, cluster(2, 1, 2, 3)),
			view(4, alone(4, "leader")), view(5, alone(5, "leader")), view(6, alone(6, "leader")), view(7, alone(7, "leader"))}, 1, "coordinator_2", ""},
		{"plurality wins", []View{view(1, cluster(1, 1, 2, 3)), view(2, cluster(2, 1, 2, 3)), view(3, cluster(2, 1, 2, 3))}, 1, "coordinator_2", ""},
		{"a tie goes to the first voter's leader", []View{view(1, cluster(1, 1, 2, 3)), view(2, cluster(2, 1, 2, 3)), unreachable(3)}, 0, "coordinator_1", ""},
		{"the named leader is unreachable", []View{unreachable(1), view(2, cluster(1, 1, 2, 3)), view(3, cluster(1, 1, 2, 3))}, -1, "", ReasonCoordinatorUnreachable},
		{"a leader outside the declared set is reached by its bolt server", []View{view(1, cluster(9, 1, 2, 9)), view(2, cluster(9, 1, 2, 9))}, -1, "coordinator_9", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ch := PickLeader(c.views)
			if ch.Index != c.index || ch.Leader != c.leader || ch.Reason != c.reason {
				t.Fatalf("PickLeader = %+v, want index %d leader %q reason %q", ch, c.index, c.leader, c.reason)
			}
			if (ch.Reason == "") == (ch.Message != "") {
				t.Errorf("reason %q with message %q", ch.Reason, ch.Message)
			}
			if c.leader == "coordinator_9" && ch.BoltServer != "c:coordinator_9" {
				t.Errorf("BoltServer %q", ch.BoltServer)
			}
		})
	}
}

// TestBehind: a follower is behind when it does not answer or its own view lists other
// members, another leader or another MAIN; health and last response do not count.
func TestBehind(t *testing.T) {
	coord := func(id int) planner.Coordinator {
		return planner.Coordinator{ID: id, Name: memgraph.CoordinatorName(id)}
	}
	rows := func(leader int, main string, data ...string) []memgraph.Instance {
		var out []memgraph.Instance
		for id := 1; id <= 3; id++ {
			role := memgraph.RoleFollower
			if id == leader {
				role = memgraph.RoleLeader
			}
			out = append(out, memgraph.Instance{Name: memgraph.CoordinatorName(id), CoordinatorServer: "x", Role: role, Health: "up"})
		}
		for _, d := range data {
			role := memgraph.RoleReplica
			if d == main {
				role = memgraph.RoleMain
			}
			out = append(out, memgraph.Instance{Name: d, Role: role, Health: "up"})
		}
		return out
	}
	leader := rows(1, "d_0", "d_0", "d_1")
	stale := rows(1, "d_0", "d_0", "d_1")
	stale[3].Health, stale[3].LastResponseMS = "down", 9000 // a reader's own health view
	for _, tc := range []struct {
		name  string
		views []View
		want  []string
	}{
		{"all agree", []View{{Coordinator: coord(1), Rows: leader}, {Coordinator: coord(2), Rows: leader}, {Coordinator: coord(3), Rows: stale}}, nil},
		{"one does not answer", []View{{Coordinator: coord(1), Rows: leader}, {Coordinator: coord(2), Err: errors.New("refused")}, {Coordinator: coord(3), Rows: leader}}, []string{"coordinator_2"}},
		{"one misses a member", []View{{Coordinator: coord(1), Rows: leader}, {Coordinator: coord(2), Rows: rows(1, "d_0", "d_0")}, {Coordinator: coord(3), Rows: leader}}, []string{"coordinator_2"}},
		{"one names an old MAIN", []View{{Coordinator: coord(1), Rows: leader}, {Coordinator: coord(2), Rows: leader}, {Coordinator: coord(3), Rows: rows(1, "d_1", "d_0", "d_1")}}, []string{"coordinator_3"}},
		{"one names another leader", []View{{Coordinator: coord(1), Rows: leader}, {Coordinator: coord(2), Rows: rows(2, "d_0", "d_0", "d_1")}, {Coordinator: coord(3), Rows: leader}}, []string{"coordinator_2"}},
		{"the leader's own view is not compared", []View{{Coordinator: coord(1), Err: errors.New("x")}, {Coordinator: coord(2), Rows: leader}}, nil},
	} {
		if got := Behind(tc.views, "coordinator_1", leader); !slices.Equal(got, tc.want) {
			t.Errorf("%s: Behind %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestDownMembers: declared members the leader shows down, retiring and undeclared ones
// aside.
func TestDownMembers(t *testing.T) {
	want := Desired{
		Coordinators:         []planner.Coordinator{{ID: 1}, {ID: 2}, {ID: 3}},
		Data:                 []planner.DataInstance{{Name: "d_0"}, {Name: "d_1"}, {Name: "d_2"}},
		RetiringCoordinators: []int{3},
		RetiringData:         []string{"d_2"},
	}
	row := func(name, health string, coordinator bool) memgraph.Instance {
		r := memgraph.Instance{Name: name, Health: health, Role: memgraph.RoleReplica}
		if coordinator {
			r.Role, r.CoordinatorServer = memgraph.RoleFollower, "x"
		}
		return r
	}
	rows := []memgraph.Instance{
		row("coordinator_1", memgraph.HealthUp, true), row("coordinator_2", memgraph.HealthDown, true),
		row("coordinator_3", memgraph.HealthDown, true), row("coordinator_9", memgraph.HealthDown, true),
		row("d_0", memgraph.HealthUp, false), row("d_1", memgraph.HealthDown, false),
		row("d_2", memgraph.HealthDown, false), row("stray", memgraph.HealthDown, false),
	}
	if got := downMembers(want, rows); !slices.Equal(got, []string{"coordinator_2", "d_1"}) {
		t.Errorf("downMembers %v, want coordinator_2 and d_1", got)
	}
	if got := downMembers(want, rows[:1]); got != nil {
		t.Errorf("all up: %v", got)
	}
}
