package veltrixsim

import (
	"errors"
	"fmt"
	"testing"
)

func viewOf(rf int, members ...string) View {
	v := View{Epoch: 4, PartitionCount: 64, ReplicationFactor: rf}
	for _, m := range members {
		id, state := m, StateActive
		if len(m) > 2 && m[len(m)-2] == ':' {
			id, state = m[:len(m)-2], map[byte]string{'j': StateJoining, 'l': StateLeaving}[m[len(m)-1]]
		}
		v = v.withMember(Member{ID: id, Addr: id + ".svc:9000", State: state})
	}
	return v
}

func TestPlanOp(t *testing.T) {
	for _, c := range []struct {
		name    string
		cur     View
		kind    string
		args    []string
		changed bool
		want    string // member states after, or the error code and message
	}{
		{"join adds a joining member", viewOf(2, "a", "b"), opJoin, []string{"c", "c.svc:9000"}, true, "a=active,b=active,c=joining"},
		{"join again is a no-op", viewOf(2, "a", "b"), opJoin, []string{"b", "b.svc:9000"}, false, "a=active,b=active"},
		{"join of a leaving member", viewOf(2, "a", "b", "c:l"), opJoin, []string{"c", "c.svc:9000"}, false, "409 member c is leaving; it can join again once it is gone"},
		{"remove marks leaving", viewOf(2, "a", "b", "c"), opRemove, []string{"c"}, true, "a=active,b=active,c=leaving"},
		{"remove of a leaving member is a no-op", viewOf(2, "a", "b", "c:l"), opRemove, []string{"c"}, false, "a=active,b=active,c=leaving"},
		{"remove below RF", viewOf(3, "a", "b", "c"), opRemove, []string{"c"}, false, "409 removing c would leave 2 members, fewer than the replication factor 3"},
		{"remove unknown", viewOf(1, "a"), opRemove, []string{"z"}, false, "404 member z is not in the cluster"},
		{"forced remove", viewOf(3, "a", "b", "c"), opRemove, []string{"c", "force"}, true, "a=active,b=active"},
		{"left removes", viewOf(2, "a", "b", "c:l"), opLeft, []string{"c"}, true, "a=active,b=active"},
		{"left of an active member", viewOf(2, "a", "b"), opLeft, []string{"b"}, false, "409 member b is not leaving"},
		{"activate", viewOf(2, "a", "b:j"), opActivate, []string{"b"}, true, "a=active,b=active"},
	} {
		t.Run(c.name, func(t *testing.T) {
			next, changed, err := PlanOp(c.cur, c.kind, c.args)
			got := memberSummary(next)
			var oe *OpError
			if errors.As(err, &oe) {
				got = fmt.Sprintf("%d %s", oe.Code, oe.Msg)
			} else if err != nil {
				t.Fatal(err)
			}
			if got != c.want || changed != c.changed {
				t.Errorf("got %q changed=%v, want %q changed=%v", got, changed, c.want, c.changed)
			}
		})
	}
}

func TestOwnersMoveOnlyTheChangedMembersPartitions(t *testing.T) {
	three := viewOf(2, "vc-0", "vc-1", "vc-2")
	four := viewOf(2, "vc-0", "vc-1", "vc-2", "vc-3:j")
	leaving := viewOf(2, "vc-0", "vc-1", "vc-2", "vc-3:l")
	for p := range 64 {
		o3, o4, ol := three.Owners(p), four.Owners(p), leaving.Owners(p)
		if len(o3) != 2 || len(o4) != 2 || o3[0] == o3[1] {
			t.Fatalf("partition %d: owners %v / %v", p, o3, o4)
		}
		// A joining member takes partitions; it never shuffles the others among themselves.
		for _, id := range o4 {
			if id != "vc-3" && !containsID(o3, id) {
				t.Errorf("partition %d: %s owns it with vc-3 joined (%v) but not before (%v)", p, id, o4, o3)
			}
		}
		if fmt.Sprint(ol) != fmt.Sprint(o3) {
			t.Errorf("partition %d: a leaving member still owns: %v, want %v", p, ol, o3)
		}
	}
	counts := four.PartitionCounts()
	for id, n := range counts {
		if n < 16 || n > 48 {
			t.Errorf("%s owns %d of 128 partition replicas: unbalanced %v", id, n, counts)
		}
	}
}
