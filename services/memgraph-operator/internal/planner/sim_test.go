package planner

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/opsuite/suite/services/memgraph-operator/internal/memgraph"
)

// world is the model plus the two StatefulSets the operator's controller would shrink
// once a retirement is done.
type world struct {
	m            *model
	specC, specD int
	liveC, liveD int
	passes       int
	log          []string
	// drainD and drainC are a rolling restart's requests (Desired.DrainData, DrainCoordinators).
	drainD []string
	drainC []int
}

func newWorld(seed uint64, coords, data int) *world {
	w := &world{m: newModel(seed)}
	w.scale(coords, data)
	return w
}

func dataName(i int) string { return fmt.Sprintf("d_%d", i) }

func (w *world) desired() Desired {
	return drain(desired(w.liveC, w.liveD, max(0, w.liveC-w.specC), max(0, w.liveD-w.specD)), w.drainD, w.drainC)
}

// scale changes the spec; growing starts pods at once (coordinator pods join Raft only
// when added), shrinking waits for the retirement.
func (w *world) scale(c, d int) {
	w.specC, w.specD = c, d
	w.liveC = max(w.liveC, c)
	for i := w.liveD; i < d; i++ {
		w.m.pods[dataName(i)] = &pod{up: true}
	}
	w.liveD = max(w.liveD, d)
}

// shrink is the controller lowering a StatefulSet once no retiring member is left.
func (w *world) shrink() {
	if w.liveC > w.specC {
		done := true
		for id := w.specC + 1; id <= w.liveC; id++ {
			if _, ok := w.m.members[id]; ok {
				done = false
			}
		}
		if done {
			w.liveC = w.specC
		}
	}
	if w.liveD > w.specD {
		done := true
		for i := w.specD; i < w.liveD; i++ {
			if w.m.reg[dataName(i)] {
				done = false
			}
		}
		if done {
			for i := w.specD; i < w.liveD; i++ {
				delete(w.m.pods, dataName(i))
			}
			w.liveD = w.specD
		}
	}
}

var errKilled = errors.New("operator killed")

// pass is one registration pass; budget < 0 means not killed, else the operator dies
// after that many queries.
func (w *world) pass(t *testing.T, budget int) Result {
	t.Helper()
	w.passes++
	want := w.desired()
	seen := Observed{Leader: memgraph.CoordinatorName(w.m.leader), Instances: w.m.showInstances(want)}
	if NeedsLag(want, seen.Instances) {
		seen.Lag = w.m.lag()
	}
	r := Plan(want, seen)
	assertSafe(t, want, seen, r)
	w.log = append(w.log, fmt.Sprintf("pass %d: spec %d+%d live %d+%d drain %v main %q plan %v waiting %q", w.passes,
		w.specC, w.specD, w.liveC, w.liveD, w.drainD, w.m.main, describe(r), r.Waiting))
	rep := Execute(r.Commands, func(c Command, a Attempt) error {
		if budget == 0 {
			return errKilled
		}
		budget--
		err := w.m.exec(c, a)
		w.log = append(w.log, fmt.Sprintf("pass %d: %s -> %v", w.passes, a.Cypher, err))
		if err != nil {
			w.m.refusals++
		}
		return err
	})
	if rep.Err != nil && !errors.Is(rep.Err, errKilled) && !memgraph.IsRefused(rep.Err) {
		t.Fatalf("pass %d: unexpected error %v", w.passes, rep.Err)
	}
	w.shrink()
	// As Desired.DrainData asks, the controller withdraws a drain once the MAIN is seen
	// elsewhere (never while there is none: the cluster may be mid-handover from it).
	if w.m.main != "" && !slices.Contains(w.drainD, w.m.main) {
		w.drainD = nil
	}
	return r
}

// chaos is what happens between passes: writes, pods dying and returning, replicas
// lagging, failovers, registrations lost by hand, elections.
func (w *world) chaos() {
	m := w.m
	rng := m.rng
	m.write(int64(rng.IntN(4)))
	if rng.Float64() < 0.15 {
		names := w.podNames()
		if p := m.pods[names[rng.IntN(len(names))]]; p != nil {
			p.up = !p.up
		}
	}
	if rng.Float64() < 0.1 {
		names := w.podNames()
		if p := m.pods[names[rng.IntN(len(names))]]; p != nil {
			p.lagging = !p.lagging
		}
	}
	if rng.Float64() < 0.6 {
		m.failover()
	}
	if rng.Float64() < 0.7 {
		m.replicate()
	}
	// A registration wiped by hand (while the cluster has a MAIN: wiping the demoted MAIN
	// of a MAIN-less cluster is the planner's documented limit).
	if rng.Float64() < 0.04 && len(m.regOrder) > 0 && m.main != "" {
		n := m.regOrder[rng.IntN(len(m.regOrder))]
		if n != m.main {
			delete(m.reg, n)
			m.regOrder = without(m.regOrder, n)
		}
	}
	if rng.Float64() < 0.03 {
		ids := m.memberIDs(func(id int) bool { return id != m.leader })
		if len(ids) > 0 {
			delete(m.members, ids[rng.IntN(len(ids))])
		}
	}
	if rng.Float64() < 0.05 {
		ids := m.memberIDs(func(int) bool { return true })
		m.leader = ids[rng.IntN(len(ids))]
	}
	// A rolling restart asks to move the MAIN or leadership off a member, or is done.
	switch x := rng.Float64(); {
	case x < 0.08 && m.main != "" && w.specD >= 2:
		w.drainD = []string{m.main}
	case x < 0.16:
		w.drainC = []int{m.leader}
	case x < 0.3:
		w.drainC = nil
	}
}

// calm ends the chaos: every pod up, replicas caught up, a down MAIN failed over.
func (w *world) calm() {
	for _, p := range w.m.pods {
		p.up = true
		p.lagging = false
	}
	w.m.write(1)
	w.m.raftFailRate = 0
	if w.specD < 2 {
		w.drainD = nil // the only data instance cannot hand its MAIN to anyone
	}
}

func (w *world) podNames() []string {
	var out []string
	for i := 0; i < w.liveD; i++ {
		out = append(out, dataName(i))
	}
	return out
}

func without(s []string, n string) []string {
	out := s[:0]
	for _, x := range s {
		if x != n {
			out = append(out, x)
		}
	}
	return out
}

// converge runs unkilled, event-free passes until the plan is empty and the
// StatefulSets are at the spec.
func (w *world) converge(t *testing.T, limit int) {
	t.Helper()
	w.calm()
	for i := 0; i < limit; i++ {
		r := w.pass(t, -1)
		if r.Converged() && w.liveC == w.specC && w.liveD == w.specD {
			w.assertConverged(t)
			return
		}
		w.m.failover()
		w.m.replicate()
	}
	r := w.pass(t, -1)
	t.Fatalf("not converged after %d calm passes: spec %d+%d live %d+%d, plan %v waiting %q, view %+v; last log:\n%s",
		limit, w.specC, w.specD, w.liveC, w.liveD, describe(r), r.Waiting, w.m.showInstances(w.desired()), tail(w.log, 10))
}

func (w *world) assertConverged(t *testing.T) {
	t.Helper()
	m := w.m
	var members []int
	for id := range m.members {
		members = append(members, id)
	}
	for id := 1; id <= w.specC; id++ {
		if added, ok := m.members[id]; !ok || !added {
			t.Errorf("coordinator %d not a member: %v", id, m.members)
		}
	}
	if len(m.members) != w.specC {
		t.Errorf("members %v, want %d", members, w.specC)
	}
	if m.leader > w.specC {
		t.Errorf("leader %d is beyond the spec", m.leader)
	}
	for i := 0; i < w.specD; i++ {
		if !m.reg[dataName(i)] {
			t.Errorf("%s not registered", dataName(i))
		}
	}
	if len(m.reg) != w.specD {
		t.Errorf("registered %v, want %d", m.regOrder, w.specD)
	}
	if m.main == "" || !m.pods[m.main].up {
		t.Errorf("no serving MAIN (%q)", m.main)
	}
	if slices.Contains(w.drainD, m.main) || slices.Contains(w.drainC, m.leader) {
		t.Errorf("MAIN %s or leader %d still on a draining member (%v %v)", m.main, m.leader, w.drainD, w.drainC)
	}
}

func tail(s []string, n int) string {
	if len(s) > n {
		s = s[len(s)-n:]
	}
	return strings.Join(s, "\n")
}

func (w *world) assertNoViolations(t *testing.T, what string) {
	t.Helper()
	if len(w.m.violations) > 0 {
		t.Fatalf("%s: %d violations, first: %s\nlog:\n%s", what, len(w.m.violations), w.m.violations[0], tail(w.log, 40))
	}
}

// TestKillBetweenAnyTwoCommands runs each scenario's first pass killed after every
// possible prefix of its queries, then lets the operator finish.
func TestKillBetweenAnyTwoCommands(t *testing.T) {
	type scenario struct {
		name  string
		setup func(w *world, t *testing.T)
		to    [2]int
	}
	bootstrapped := func(c, d int) func(*world, *testing.T) {
		return func(w *world, t *testing.T) {
			w.scale(c, d)
			w.converge(t, 10)
			w.m.write(5)
		}
	}
	scenarios := []scenario{
		{"bootstrap 3+2", func(*world, *testing.T) {}, [2]int{3, 2}},
		{"scale up 3+2 to 5+3", bootstrapped(3, 2), [2]int{5, 3}},
		{"data 3 to 2 with the MAIN parked on the retiring instance", func(w *world, t *testing.T) {
			bootstrapped(3, 3)(w, t)
			w.parkMain(t, dataName(2))
		}, [2]int{3, 2}},
		{"data 4 to 2, MAIN retiring, a survivor lagging", func(w *world, t *testing.T) {
			bootstrapped(3, 4)(w, t)
			w.parkMain(t, dataName(3))
			w.m.pods[dataName(0)].lagging = true
			w.m.write(3)
		}, [2]int{3, 2}},
		{"coordinators 5 to 3 with the leader retiring", func(w *world, t *testing.T) {
			bootstrapped(5, 2)(w, t)
			w.m.leader = 5
		}, [2]int{3, 2}},
		{"both roles shrinking, leader and MAIN retiring", func(w *world, t *testing.T) {
			bootstrapped(5, 3)(w, t)
			w.m.leader = 4
			w.parkMain(t, dataName(2))
		}, [2]int{3, 2}},
		{"rolling: drain the MAIN and the leader", func(w *world, t *testing.T) {
			bootstrapped(3, 3)(w, t)
			w.drainD, w.drainC = []string{w.m.main}, []int{w.m.leader}
		}, [2]int{3, 3}},
	}
	for _, sc := range scenarios {
		// Count the queries of an unkilled first pass to know every kill point.
		probe := newWorld(1, 3, 2)
		probe.liveC, probe.specC = 1, 1
		sc.setup(probe, t)
		probe.scale(sc.to[0], sc.to[1])
		before := probe.m.queries
		probe.pass(t, -1)
		n := probe.m.queries - before
		for k := 0; k <= n; k++ {
			t.Run(fmt.Sprintf("%s/killed after %d of %d", sc.name, k, n), func(t *testing.T) {
				w := newWorld(1, 3, 2)
				w.liveC, w.specC = 1, 1
				sc.setup(w, t)
				w.scale(sc.to[0], sc.to[1])
				w.pass(t, k)
				w.assertNoViolations(t, "killed pass")
				w.converge(t, 12)
				w.assertNoViolations(t, "after recovery")
			})
		}
	}
}

// parkMain moves the MAIN onto name the way a human would (DEMOTE + SET).
func (w *world) parkMain(t *testing.T, name string) {
	t.Helper()
	m := w.m
	if m.main == name {
		return
	}
	for _, p := range m.pods {
		p.lagging = false
	}
	m.write(1)
	if err := m.exec(Command{Kind: DemoteInstance}, Attempt{Target: m.main}); err != nil {
		t.Fatal(err)
	}
	if err := m.exec(Command{Kind: SetMain}, Attempt{Target: name}); err != nil {
		t.Fatal(err)
	}
	m.lastDemoted = ""
}

// TestManyPassChaos drives random scale changes, failures and operator kills through
// many passes, then asserts convergence; every query is checked against the invariants.
func TestManyPassChaos(t *testing.T) {
	specs := [][2]int{{3, 2}, {5, 3}, {3, 2}, {3, 1}, {5, 2}, {3, 3}, {7, 4}, {3, 2}}
	seeds := 2000
	if testing.Short() {
		seeds = 200
	}
	if v, err := strconv.Atoi(os.Getenv("PLANNER_SIM_SEEDS")); err == nil && v > 0 {
		seeds = v // a longer soak: PLANNER_SIM_SEEDS=5000 go test -run Chaos
	}
	var queries, refusals, kills int
	for seed := 1; seed <= seeds; seed++ {
		w := newWorld(uint64(seed), 3, 2)
		w.liveC, w.specC = 1, 1
		w.m.showUnknown = seed%2 == 0
		w.m.raftFailRate = 0.03
		w.scale(3, 2)
		for _, s := range specs {
			w.scale(s[0], s[1])
			for i := 0; i < 4+w.m.rng.IntN(8); i++ {
				budget := -1
				if w.m.rng.Float64() < 0.35 {
					budget = w.m.rng.IntN(6)
					kills++
				}
				w.pass(t, budget)
				if len(w.m.violations) > 0 {
					t.Fatalf("seed %d: %s (spec %d+%d live %d+%d drain %v %v)\nlog:\n%s", seed, w.m.violations[0],
						w.specC, w.specD, w.liveC, w.liveD, w.drainD, w.drainC, tail(w.log, 40))
				}
				w.chaos()
			}
		}
		w.converge(t, 25)
		if len(w.m.violations) > 0 {
			t.Fatalf("seed %d: %s\nlog:\n%s", seed, w.m.violations[0], tail(w.log, 25))
		}
		queries += w.m.queries
		refusals += w.m.refusals
	}
	t.Logf("%d seeds: %d queries, %d refused, %d passes killed", seeds, queries, refusals, kills)
}

// TestDownPodDoesNotBlockRetirement: a data instance that lost its registration and whose
// pod stays down is refused on every pass; the coordinators' retirement (leader included)
// and the MAIN's handover must finish regardless.
func TestDownPodDoesNotBlockRetirement(t *testing.T) {
	w := newWorld(11, 3, 2)
	w.liveC, w.specC = 1, 1
	w.scale(5, 4)
	w.converge(t, 10)
	w.m.write(3)
	w.parkMain(t, dataName(3))
	w.m.leader = 5
	// d_1 loses its registration and its pod stays down.
	delete(w.m.reg, dataName(1))
	w.m.regOrder = without(w.m.regOrder, dataName(1))
	w.m.pods[dataName(1)].up = false

	w.scale(3, 3)
	for i := 0; i < 10; i++ {
		w.pass(t, -1)
		w.m.replicate()
	}
	w.assertNoViolations(t, "with a pod down")
	if _, ok := w.m.members[4]; ok || w.m.members[5] || w.liveC != 3 {
		t.Errorf("coordinators not retired: members %v, live %d", w.m.members, w.liveC)
	}
	if w.m.reg[dataName(3)] || w.liveD != 3 || w.m.main == dataName(3) {
		t.Errorf("d_3 not retired: registered %v, live %d, MAIN %s", w.m.regOrder, w.liveD, w.m.main)
	}
	if w.m.reg[dataName(1)] {
		t.Fatal("d_1 registered while its pod is down")
	}
	w.m.pods[dataName(1)].up = true
	w.converge(t, 5)
}
