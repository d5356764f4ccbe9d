package executor

import (
	"context"
	"testing"

	"github.com/opsuite/suite/services/memgraph-operator/internal/memgraph"
	"github.com/opsuite/suite/services/memgraph-operator/internal/planner"
)

// noDial fails the test if Reconcile dials at all.
type noDial struct{ t *testing.T }

func (d noDial) Dial(context.Context, string) (memgraph.Session, error) {
	d.t.Fatal("Reconcile dialled with a malformed Desired")
	return nil, nil
}

func TestReconcileRefusesMalformedDesired(t *testing.T) {
	c := func(id int, bolt string) planner.Coordinator { return planner.Coordinator{ID: id, BoltServer: bolt} }
	for name, want := range map[string]Desired{
		"no coordinators":          {},
		"duplicate coordinator":    {Coordinators: []planner.Coordinator{c(1, "a:1"), c(1, "b:1")}},
		"coordinator id 0":         {Coordinators: []planner.Coordinator{c(0, "a:1")}},
		"coordinator without bolt": {Coordinators: []planner.Coordinator{c(1, "")}},
		"unnamed data instance":    {Coordinators: []planner.Coordinator{c(1, "a:1")}, Data: []planner.DataInstance{{}}},
		"duplicate data instance": {Coordinators: []planner.Coordinator{c(1, "a:1")},
			Data: []planner.DataInstance{{Name: "d"}, {Name: "d"}}},
	} {
		if _, err := Reconcile(context.Background(), noDial{t}, want); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestRetired(t *testing.T) {
	want := Desired{RetiringCoordinators: []int{5, 4, 5}, RetiringData: []string{"d_2", "d_3"}}
	rows := []memgraph.Instance{
		{Name: "coordinator_1", Role: memgraph.RoleLeader}, {Name: "coordinator_5", Role: memgraph.RoleFollower},
		{Name: "d_0", Role: memgraph.RoleMain}, {Name: "d_3", Role: memgraph.RoleReplica},
	}
	rc, rd := retired(want, rows)
	if len(rc) != 1 || rc[0] != 4 || len(rd) != 1 || rd[0] != "d_2" {
		t.Errorf("retired = %v %v, want [4] [d_2]", rc, rd)
	}
	if got := retiringMembers(want, rows); len(got) != 2 || got[0] != "coordinator_5" || got[1] != "d_3" {
		t.Errorf("retiringMembers = %v", got)
	}
}
