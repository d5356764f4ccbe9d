package planner

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/opsuite/suite/services/veltrix-operator/internal/veltrix"
	"github.com/opsuite/suite/shared/fuzzinput"
)

// fuzzBytes reads the fuzz input: a byte per decision, 0 past its end.
type fuzzBytes = fuzzinput.Bytes

var fuzzStates = []veltrix.MemberState{veltrix.MemberActive, veltrix.MemberJoining, veltrix.MemberLeaving}

// FuzzPlan decides from arbitrary observations: spec size and replication factor, the
// StatefulSet's size and Ready pods, a member list (or none) naming pods inside and beyond
// the StatefulSet and members added by hand, each active, joining or leaving, and a removal
// record of any age. Plan must not panic, must be deterministic and must keep checkDecision.
func FuzzPlan(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{3, 3, 5, 5, 1, 0x1f, 0, 0, 0, 0, 0})
	f.Add([]byte{5, 3, 3, 3, 1, 0x07, 0, 0, 2, 0, 3, 20})
	f.Add([]byte{1, 3, 6, 6, 1, 0x3f, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{3, 2, 4, 4, 1, 0x1b, 0, 0, 1, 0, 2, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		s := fuzzinput.New(in)
		in0 := decodeInput(s)
		d := Plan(in0)
		if again := Plan(in0); !reflect.DeepEqual(d, again) {
			t.Fatalf("two decisions from one input: %+v, %+v", d, again)
		}
		checkDecision(t, in0, d)
	})
}

func decodeInput(s *fuzzBytes) Input {
	in := Input{SpecSize: int32(s.Next()%9) - 1, ReplicationFactor: int32(s.Next() % 6), StatefulSetReplicas: int32(s.Next() % 9),
		PodName: podName, Now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	in.ReadyPods = min(int32(s.Next()%10), in.StatefulSetReplicas+1)
	if s.Next()%4 != 0 {
		in.MemberAddr = memberAddr
	}
	if x := s.Next(); x%8 != 0 {
		in.Members = []veltrix.Member{}
		present := x | s.Next()<<8
		for i := range int32(12) {
			if present&(1<<i) != 0 {
				in.Members = append(in.Members, veltrix.Member{ID: podName(i), Addr: memberAddr(i), State: fuzzStates[s.Next()%3]})
			}
		}
		if s.Next()%5 == 0 {
			in.Members = append(in.Members, veltrix.Member{ID: "by-hand", Addr: "h:9000", State: fuzzStates[s.Next()%3]})
		}
	}
	if x := s.Next(); x != 0 {
		in.Removal = Removal{Member: podName(int32(x % 12)), Since: in.Now.Add(-time.Duration(s.Next()) * time.Minute)}
	}
	return in
}

// activeAfter counts the active members once id is removed.
func activeAfter(members []veltrix.Member, id string) int32 {
	var n int32
	for _, m := range members {
		if m.State == veltrix.MemberActive && m.ID != id {
			n++
		}
	}
	return n
}

// checkDecision holds a decision against the rules: the StatefulSet never below
// max(spec.size, replicationFactor) and lowered by one only once its highest member is
// known gone; a DELETE only of a member outside the wanted pods, only while nothing joins
// or leaves and every pod is Ready, and, for a shrink, never leaving fewer active members
// than the wanted size (so never fewer than the replication factor); a POST only of a
// wanted pod that is no member; never both; the removal record and Waiting consistent.
func checkDecision(t *testing.T, in Input, d Decision) {
	t.Helper()
	fail := func(format string, a ...any) {
		t.Helper()
		t.Fatalf(format+"\ninput: size %d rf %d sts %d ready %d addr %v members %v removal %+v\ndecision: %+v",
			append(a, in.SpecSize, in.ReplicationFactor, in.StatefulSetReplicas, in.ReadyPods, in.MemberAddr != nil, in.Members, in.Removal, d)...)
	}
	rf := max(in.ReplicationFactor, 1)
	wanted := max(in.SpecSize, rf)
	cur := in.StatefulSetReplicas
	if d.Replicas < wanted {
		fail("replicas %d below the wanted %d (replicationFactor %d)", d.Replicas, wanted, rf)
	}
	switch {
	case cur < wanted && d.Replicas != wanted:
		fail("growing to %d, want %d at once", d.Replicas, wanted)
	case cur >= wanted && d.Replicas != cur && d.Replicas != cur-1:
		fail("replicas %d from %d", d.Replicas, cur)
	case d.Replicas == cur-1 && cur > wanted:
		if in.Members == nil || slices.ContainsFunc(in.Members, func(m veltrix.Member) bool { return m.ID == podName(cur-1) }) {
			fail("lowered while member %s is not known gone", podName(cur-1))
		}
	}
	var leaving []string
	joining := false
	for _, m := range in.Members {
		if m.State == veltrix.MemberLeaving {
			leaving = append(leaving, m.ID)
		}
		joining = joining || m.State == veltrix.MemberJoining
	}
	if d.Remove != "" {
		if d.Add.ID != "" || d.Replicas != cur {
			fail("a removal together with another change")
		}
		if in.Members == nil || len(leaving) > 0 || joining || in.ReadyPods < cur {
			fail("removes %s while members are unknown, changing, or pods are not Ready", d.Remove)
		}
		var ord int32
		if _, err := fmt.Sscanf(d.Remove, "vx-%d", &ord); err != nil || ord < wanted || ord < cur-1 {
			fail("removes %s: not the highest pod beyond the wanted %d, nor a pod gone", d.Remove, wanted)
		}
		if !slices.ContainsFunc(in.Members, func(m veltrix.Member) bool { return m.ID == d.Remove }) {
			fail("removes %s, no member", d.Remove)
		}
		if ord < cur && in.MemberAddr != nil && activeAfter(in.Members, d.Remove) < wanted {
			fail("removing %s leaves %d active members, fewer than %d", d.Remove, activeAfter(in.Members, d.Remove), wanted)
		}
		// The next pass sees the member leaving: its message is the one RemovalAccepted gives.
		acc := RemovalAccepted(in, d)
		next := in
		next.Members = slices.Clone(in.Members)
		for i := range next.Members {
			if next.Members[i].ID == d.Remove {
				next.Members[i].State = veltrix.MemberLeaving
			}
		}
		next.Removal = acc.Removal
		if nd := Plan(next); nd.Waiting != acc.Waiting || nd.Leaving != d.Remove || nd.Removal != acc.Removal {
			fail("accepted removal says %q (record %+v), the next pass %q (record %+v)", acc.Waiting, acc.Removal, nd.Waiting, nd.Removal)
		}
	}
	if d.Add.ID != "" {
		var ord int32
		if _, err := fmt.Sscanf(d.Add.ID, "vx-%d", &ord); err != nil || ord >= min(cur, wanted) || in.MemberAddr == nil || d.Add.Addr != in.MemberAddr(ord) {
			fail("adds %+v: not a kept pod at its address", d.Add)
		}
		if in.Members == nil || joining || in.ReadyPods < cur || slices.ContainsFunc(in.Members, func(m veltrix.Member) bool { return m.ID == d.Add.ID }) {
			fail("adds %s while members are unknown or joining, pods are not Ready, or it is a member", d.Add.ID)
		}
	}
	// The removal record.
	switch {
	case in.Members == nil:
		if d.Removal != in.Removal {
			fail("members unknown, yet the record changed")
		}
	case d.Leaving == "":
		if !d.Removal.IsZero() {
			fail("a record with nobody leaving")
		}
	default:
		if !slices.Contains(leaving, d.Leaving) || d.Leaving != slices.Min(leaving) || d.Removal.Member != d.Leaving {
			fail("leaving %q, record %+v", d.Leaving, d.Removal)
		}
	}
	if d.Converged() {
		if d.Reason != "" || cur != wanted || in.Members == nil || d.Remove != "" || d.Add.ID != "" {
			fail("converged with work left")
		}
		for i := range cur {
			if !slices.ContainsFunc(in.Members, func(m veltrix.Member) bool { return m.ID == podName(i) && m.State == veltrix.MemberActive }) {
				fail("converged while %s is no active member", podName(i))
			}
		}
	}
}

// FuzzPasses plays membership over many passes with the world of passes_test.go: the
// script changes spec.size and replicationFactor, how long data takes to move, which
// passes see no member list, pods that are not Ready, members removed by hand, and how
// many passes run before the next change. Every decision keeps checkDecision, active
// members never drop below the replication factor once the cluster had that many, and
// after the script the cluster converges to the last wanted size.
func FuzzPasses(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{5, 3, 2, 0, 3, 2, 20})
	f.Add([]byte{6, 1, 3, 1, 1, 3, 30, 5, 2, 2, 0, 0, 1, 10})
	f.Add([]byte{3, 3, 1, 0, 2, 1, 4, 0, 2, 5, 3, 1, 3, 0, 0, 0, 4, 2, 9})
	f.Fuzz(func(t *testing.T, in []byte) {
		s := fuzzinput.New(in)
		w := newWorld(int32(1+s.Next()%7), 1+s.Next()%4, 0)
		size, rf := int32(s.Next()%8), int32(1+s.Next()%4)
		var floor int32 // the most active members seen, capped at rf: never to drop below
		unready := 0
		for step := 0; step < 24 && s.More(); step++ {
			switch s.Next() % 6 {
			case 0:
				size, rf = int32(s.Next()%8), int32(1+s.Next()%4)
				floor = 0
			case 1:
				w.moveTicks = 1 + s.Next()%4
			case 2:
				w.unknownEvery = []int{0, 2, 3}[s.Next()%3] // 1 would never see the members
			case 3:
				unready = s.Next() % 3
			case 4: // a member removed by hand; its pod stays, so it is to be added back
				if len(w.members) > 0 {
					m := w.members[s.Next()%len(w.members)]
					if m.State == veltrix.MemberActive {
						w.members = slices.DeleteFunc(w.members, func(x veltrix.Member) bool { return x.ID == m.ID })
						w.leftTicks[m.ID] = 0
						floor = 0
					}
				}
			}
			for range 1 + s.Next()%12 {
				w.tick()
				in := w.input(size, rf)
				in.ReadyPods = max(0, w.replicas-int32(unready))
				d := Plan(in)
				checkDecision(t, in, d)
				w.apply(d)
				floor = max(floor, min(activeAfter(w.members, ""), max(rf, 1)))
				if a := activeAfter(w.members, ""); a < floor && a < rf {
					t.Fatalf("pass %d: %d active members, below replicationFactor %d: %v", w.pass, a, rf, w.members)
				}
			}
		}
		w.run(t, size, rf)
	})
}

// apply carries out a decision as the executor and the StatefulSet would.
func (w *world) apply(d Decision) {
	if d.Remove != "" {
		for i, m := range w.members {
			if m.ID == d.Remove {
				w.members[i].State = veltrix.MemberLeaving
				w.leftTicks[m.ID] = w.moveTicks
			}
		}
	}
	if d.Add.ID != "" {
		delete(w.leftTicks, d.Add.ID)
		w.members = append(w.members, veltrix.Member{ID: d.Add.ID, Addr: d.Add.Addr, State: veltrix.MemberJoining})
	}
	if d.Replicas < w.replicas {
		// The lowered StatefulSet deletes the pod: its member record, if any, is gone.
		for i := d.Replicas; i < w.replicas; i++ {
			delete(w.leftTicks, podName(i))
		}
	}
	w.replicas = d.Replicas
}
