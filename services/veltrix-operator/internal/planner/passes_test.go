package planner

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/opsuite/suite/services/veltrix-operator/internal/veltrix"
)

// world plays the StatefulSet and the servers between passes: a pod exists for every
// ordinal below replicas, is Ready and joins (joining for one pass, then active); a DELETE
// makes a member leaving, and it is gone after moveTicks passes.
type world struct {
	replicas  int32
	members   []veltrix.Member
	leftTicks map[string]int
	moveTicks int
	// unknownEvery makes every n-th pass see no member list (0: never).
	unknownEvery int
	pass         int
}

func (w *world) tick() {
	w.pass++
	var kept []veltrix.Member
	for _, m := range w.members {
		switch m.State {
		case veltrix.MemberJoining:
			m.State = veltrix.MemberActive
		case veltrix.MemberLeaving:
			w.leftTicks[m.ID]--
			if w.leftTicks[m.ID] <= 0 {
				continue
			}
		}
		kept = append(kept, m)
	}
	w.members = kept
	for i := range w.replicas {
		if !slices.ContainsFunc(w.members, func(m veltrix.Member) bool { return m.ID == podName(i) }) &&
			!slices.Contains(w.gone(), podName(i)) {
			w.members = append(w.members, veltrix.Member{ID: podName(i), State: veltrix.MemberJoining})
		}
	}
}

// gone lists members removed for good whose pods still run: a removed member does not
// re-join (its pod is about to be deleted).
func (w *world) gone() []string {
	var out []string
	for id, n := range w.leftTicks {
		if n <= 0 {
			out = append(out, id)
		}
	}
	return out
}

func (w *world) input(size, rf int32) Input {
	in := Input{SpecSize: size, ReplicationFactor: rf, StatefulSetReplicas: w.replicas, ReadyPods: w.replicas,
		PodName: podName, MemberAddr: func(i int32) string { return podName(i) + ":9000" }}
	if w.unknownEvery == 0 || w.pass%w.unknownEvery != 0 {
		in.Members = slices.Clone(w.members)
		if in.Members == nil {
			in.Members = []veltrix.Member{}
		}
	}
	return in
}

// run plays passes until Plan converges and returns the log of what changed.
func (w *world) run(t *testing.T, size, rf int32) []string {
	t.Helper()
	wanted := max(size, rf, 1)
	var log []string
	for range 200 {
		w.tick()
		in := w.input(size, rf)
		d := Plan(in)
		if d.Replicas < w.replicas {
			if w.replicas-d.Replicas != 1 {
				t.Fatalf("pass %d: lowered from %d to %d at once", w.pass, w.replicas, d.Replicas)
			}
			if d.Replicas < wanted {
				t.Fatalf("pass %d: lowered to %d, below %d", w.pass, d.Replicas, wanted)
			}
			if in.Members == nil || slices.ContainsFunc(in.Members, func(m veltrix.Member) bool { return m.ID == podName(d.Replicas) }) {
				t.Fatalf("pass %d: lowered to %d while member %s was not known to be gone", w.pass, d.Replicas, podName(d.Replicas))
			}
		}
		if d.Remove != "" {
			var ord int32
			if _, err := fmt.Sscanf(d.Remove, "vx-%d", &ord); err != nil || ord < wanted {
				t.Fatalf("pass %d: removes %s, one of the %d wanted members", w.pass, d.Remove, wanted)
			}
			if slices.ContainsFunc(w.members, func(m veltrix.Member) bool { return m.State != veltrix.MemberActive }) {
				t.Fatalf("pass %d: removes %s while another change is under way: %v", w.pass, d.Remove, w.members)
			}
			for i, m := range w.members {
				if m.ID == d.Remove {
					w.members[i].State = veltrix.MemberLeaving
					w.leftTicks[m.ID] = w.moveTicks
				}
			}
		}
		if d.Add.ID != "" {
			if d.Remove != "" || slices.ContainsFunc(w.members, func(m veltrix.Member) bool { return m.ID == d.Add.ID }) {
				t.Fatalf("pass %d: adds %s, which is a member, or removes %q at once", w.pass, d.Add.ID, d.Remove)
			}
			delete(w.leftTicks, d.Add.ID)
			w.members = append(w.members, veltrix.Member{ID: d.Add.ID, Addr: d.Add.Addr, State: veltrix.MemberJoining})
		}
		if d.Replicas != w.replicas || d.Remove != "" || d.Add.ID != "" {
			log = append(log, fmt.Sprintf("replicas=%d remove=%s add=%s %s", d.Replicas, d.Remove, d.Add.ID, d.Reason))
		}
		w.replicas = d.Replicas
		if d.Converged() || d.Reason == ReasonBelowReplicationFactor {
			if w.replicas != wanted || len(w.members) != int(wanted) {
				t.Fatalf("pass %d: converged with replicas %d and members %v, want %d", w.pass, w.replicas, w.members, wanted)
			}
			return log
		}
	}
	t.Fatalf("no convergence after %d passes: replicas %d, members %v", w.pass, w.replicas, w.members)
	return nil
}

func newWorld(replicas int32, moveTicks, unknownEvery int) *world {
	w := &world{replicas: replicas, leftTicks: map[string]int{}, moveTicks: moveTicks, unknownEvery: unknownEvery}
	for i := range replicas {
		w.members = append(w.members, veltrix.Member{ID: podName(i), State: veltrix.MemberActive})
	}
	return w
}

func TestPlanOverPasses(t *testing.T) {
	cases := []struct {
		name                string
		from, size, rf      int32
		moveTicks, unknownN int
		want                []string
	}{
		{name: "3 -> 5 grows at once", from: 3, size: 5, rf: 2, moveTicks: 3,
			want: []string{"replicas=5 remove= add= Scaling"}},
		{name: "5 -> 3 one member at a time", from: 5, size: 3, rf: 2, moveTicks: 3,
			want: []string{
				"replicas=5 remove=vx-4 add= Removing", "replicas=4 remove= add= Removing",
				"replicas=4 remove=vx-3 add= Removing", "replicas=3 remove= add= Removing",
			}},
		{name: "5 -> 3 with the member list unknown every other pass", from: 5, size: 3, rf: 2, moveTicks: 2, unknownN: 2,
			want: []string{
				"replicas=5 remove=vx-4 add= Removing", "replicas=4 remove= add= Removing",
				"replicas=4 remove=vx-3 add= Removing", "replicas=3 remove= add= Removing",
			}},
		{name: "6 -> 1 stops at replicationFactor 3", from: 6, size: 1, rf: 3, moveTicks: 1,
			want: []string{
				"replicas=6 remove=vx-5 add= Removing", "replicas=5 remove= add= Removing",
				"replicas=5 remove=vx-4 add= Removing", "replicas=4 remove= add= Removing",
				"replicas=4 remove=vx-3 add= Removing", "replicas=3 remove= add= Removing",
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(tc.from, tc.moveTicks, tc.unknownN)
			got := w.run(t, tc.size, tc.rf)
			if !slices.Equal(got, tc.want) {
				t.Errorf("log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// TestPlanSizeChangedMidway: 5 -> 3 changed back to 5 after the first member left, then
// to 4: the cluster ends with the last wanted size and never lowers below a wanted size.
func TestPlanSizeChangedMidway(t *testing.T) {
	w := newWorld(5, 2, 0)
	for range 4 { // remove vx-4, wait for it, lower to 4
		w.tick()
		d := Plan(w.input(3, 2))
		if d.Remove != "" {
			w.members[slices.IndexFunc(w.members, func(m veltrix.Member) bool { return m.ID == d.Remove })].State = veltrix.MemberLeaving
			w.leftTicks[d.Remove] = w.moveTicks
		}
		w.replicas = d.Replicas
	}
	if w.replicas != 4 {
		t.Fatalf("after 4 passes of 5 -> 3: replicas %d, want 4", w.replicas)
	}
	// The pod of vx-4 is deleted with the lowered StatefulSet: a new one joins by itself.
	// vx-3's keeps running without being a member, so it is added back.
	delete(w.leftTicks, "vx-4")
	got := w.run(t, 5, 2)
	want := []string{"replicas=5 remove= add= Scaling", "replicas=5 remove= add=vx-3 Scaling"}
	if !slices.Equal(got, want) {
		t.Errorf("back to 5, log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	got = w.run(t, 4, 2)
	want = []string{"replicas=5 remove=vx-4 add= Removing", "replicas=4 remove= add= Removing"}
	if !slices.Equal(got, want) {
		t.Errorf("then 4, log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
