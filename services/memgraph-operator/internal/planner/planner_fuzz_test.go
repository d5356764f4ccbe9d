package planner

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/opsuite/suite/services/memgraph-operator/internal/memgraph"
	"github.com/opsuite/suite/shared/fuzzinput"
)

// fuzzBytes reads the fuzz input: a byte per decision, 0 past its end.
type fuzzBytes = fuzzinput.Bytes

// FuzzPlan plans from arbitrary declared topologies and SHOW INSTANCES answers: up to
// seven coordinators and six data instances, any of them retiring or draining, listed or
// not, up or down, in any role (two MAINs, a MAIN among coordinators' names, unknown
// roles), with any replication lag. Plan must not panic, must be deterministic, and its
// commands must keep the rules of the package documentation (checkPlan).
func FuzzPlan(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{3, 2, 0, 0, 1, 0x07, 0x03, 1, 1, 0, 0})
	f.Add([]byte{5, 3, 0x18, 0x04, 4, 0x1f, 0x07, 2, 1, 2, 1, 1, 1, 0, 0, 0, 1, 0})
	f.Add([]byte{3, 3, 0, 0x04, 1, 0x07, 0x07, 4, 1, 2, 1, 0, 1, 5, 0x02, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		want, seen := decodeTopology(fuzzinput.New(in))
		wantCopy, seenCopy := cloneDesired(want), cloneObserved(seen)
		r := Plan(want, seen)
		if !reflect.DeepEqual(want, wantCopy) || !reflect.DeepEqual(seen, seenCopy) {
			t.Fatal("Plan changed its input")
		}
		if again := Plan(wantCopy, seenCopy); !reflect.DeepEqual(r, again) {
			t.Fatalf("two plans from one input:\n%v\n%v", describe(r), describe(again))
		}
		checkPlan(t, want, seen, r)
	})
}

// decodeTopology builds a declared topology and the leader's answer from the input.
func decodeTopology(s *fuzzBytes) (Desired, Observed) {
	nc, nd := 1+s.Next()%7, s.Next()%7
	retC, retD, drainD := s.Next(), s.Next(), s.Next()
	w := desired(nc, nd, 0, 0)
	for id := 1; id <= nc; id++ {
		if retC&(1<<(id-1)) != 0 {
			w.RetiringCoordinators = append(w.RetiringCoordinators, id)
		}
	}
	for i := range nd {
		if retD&(1<<i) != 0 {
			w.RetiringData = append(w.RetiringData, dataName(i))
		}
		if drainD&(1<<i) != 0 {
			w.DrainData = append(w.DrainData, dataName(i))
		}
	}
	seen := Observed{Leader: memgraph.CoordinatorName(1 + s.Next()%(nc+1))}
	if x := s.Next(); x&0x80 != 0 {
		w.DrainCoordinators = []int{1 + x%nc}
	}
	listedC, listedD := s.Next(), s.Next()
	for id := 1; id <= nc+1; id++ { // one more than declared: a member added by hand
		if listedC&(1<<(id-1)) == 0 {
			continue
		}
		x := s.Next()
		row := memgraph.Instance{Name: memgraph.CoordinatorName(id), CoordinatorServer: fmt.Sprintf("c-%d.svc:12000", id-1),
			Health: []string{"up", "down"}[x%2], Role: memgraph.RoleFollower}
		if x&2 == 0 {
			row.BoltServer = fmt.Sprintf("c-%d.svc:7687", id-1)
		}
		if seen.Leader == row.Name {
			row.Role = memgraph.RoleLeader
		}
		seen.Instances = append(seen.Instances, row)
	}
	roles := []string{memgraph.RoleReplica, memgraph.RoleMain, memgraph.RoleUnknown, memgraph.RoleReplica}
	for i := range nd + 1 { // one more than declared: registered by hand
		if listedD&(1<<i) == 0 {
			continue
		}
		x := s.Next()
		seen.Instances = append(seen.Instances, memgraph.Instance{Name: dataName(i), BoltServer: "x:7687",
			ManagementServer: "x:10000", Health: []string{"up", "down"}[x%2], Role: roles[(x>>1)%4]})
	}
	for s.More() && len(seen.Lag) < 8 {
		i, behind := s.Next()%(nd+1), int64(s.Next()%3)
		seen.Lag = append(seen.Lag, memgraph.Lag{Instance: dataName(i), Databases: map[string]memgraph.DatabaseLag{
			"memgraph": {Committed: 100 - behind, Behind: behind}}})
	}
	return w, seen
}

func cloneDesired(w Desired) Desired {
	c := w
	c.Coordinators = slices.Clone(w.Coordinators)
	c.Data = slices.Clone(w.Data)
	c.RetiringCoordinators = slices.Clone(w.RetiringCoordinators)
	c.RetiringData = slices.Clone(w.RetiringData)
	c.DrainData = slices.Clone(w.DrainData)
	c.DrainCoordinators = slices.Clone(w.DrainCoordinators)
	return c
}

func cloneObserved(o Observed) Observed {
	c := o
	c.Instances = slices.Clone(o.Instances)
	c.Lag = nil
	for _, l := range o.Lag {
		dbs := map[string]memgraph.DatabaseLag{}
		for k, v := range l.Databases {
			dbs[k] = v
		}
		c.Lag = append(c.Lag, memgraph.Lag{Instance: l.Instance, Databases: dbs})
	}
	if o.Lag == nil {
		c.Lag = nil
	}
	return c
}

// checkPlan holds a plan against the package's rules, playing its commands in order over
// what the leader showed: never a second MAIN (SET INSTANCE TO MAIN only while none is
// listed, and at most once a plan), DEMOTE only of the MAIN and only when it is retiring
// or draining, followed by the handover to caught-up survivors with it as fallback;
// UNREGISTER only of listed retiring instances, never the MAIN, only while a MAIN exists,
// each once; REGISTER only of declared, unlisted, non-retiring instances, each once; ADD
// COORDINATOR only of declared, non-retiring coordinators not listed with a bolt server;
// REMOVE COORDINATOR only of listed retiring ones, never the leader; YIELD LEADERSHIP
// last, only from a retiring or draining leader with an up successor.
func checkPlan(t *testing.T, want Desired, seen Observed, r Result) {
	t.Helper()
	fail := func(format string, a ...any) {
		t.Helper()
		t.Fatalf(format+"\nplan: %v\nwaiting: %q\nwant: %+v\nseen: %+v", append(a, describe(r), r.Waiting, want, seen)...)
	}
	declaredD := map[string]bool{}
	for _, d := range want.Data {
		declaredD[d.Name] = true
	}
	declaredC := map[int]Coordinator{}
	for _, c := range want.Coordinators {
		declaredC[c.ID] = c
	}
	listed := map[string]memgraph.Instance{}
	for _, in := range seen.Instances {
		listed[in.Name] = in
	}
	caughtUp := map[string]bool{}
	for _, l := range seen.Lag {
		caughtUp[l.Instance] = l.CaughtUp()
	}
	m, hasMain := memgraph.MainOf(seen.Instances)
	mainNow := ""
	if hasMain {
		mainNow = m.Name
	}
	registered, unregistered, added := map[string]bool{}, map[string]bool{}, map[int]bool{}
	setMains, demoted := 0, ""
	for i, c := range r.Commands {
		switch c.Kind {
		case SetMain:
			setMains++
			if mainNow != "" {
				fail("command %d: %s while %s is MAIN", i, c, mainNow)
			}
			if setMains > 1 {
				fail("command %d: a second SetMain in one plan", i)
			}
			if len(c.Candidates) == 0 {
				fail("command %d: SetMain without candidates", i)
			}
			for _, n := range c.Candidates {
				// A candidate is listed, or registered earlier in this plan: the leader
				// refuses to promote what it does not list.
				if _, ok := listed[n]; !ok && !registered[n] {
					fail("command %d: candidate %s is neither listed nor registered before it", i, n)
				}
				if unregistered[n] {
					fail("command %d: candidate %s was unregistered earlier in the plan", i, n)
				}
				if demoted != "" && (n == demoted || !caughtUp[n] || !listed[n].Up() || listed[n].Role != memgraph.RoleReplica ||
					slices.Contains(want.RetiringData, n) || slices.Contains(want.DrainData, n)) {
					fail("command %d: handover candidate %s is not an up, caught-up, staying replica", i, n)
				}
			}
			if demoted != c.Fallback {
				fail("command %d: fallback %q, demoted %q", i, c.Fallback, demoted)
			}
			// Whichever attempt succeeds, one instance is MAIN.
			mainNow = c.Candidates[0]
		case DemoteInstance:
			n := c.Instance.Name
			if n != mainNow || demoted != "" {
				fail("command %d: demotes %s, MAIN is %q", i, n, mainNow)
			}
			if !slices.Contains(want.RetiringData, n) && !slices.Contains(want.DrainData, n) {
				fail("command %d: demotes %s, which neither retires nor drains", i, n)
			}
			if i+1 >= len(r.Commands) || r.Commands[i+1].Kind != SetMain {
				fail("command %d: DEMOTE not followed by SET INSTANCE TO MAIN", i)
			}
			demoted, mainNow = n, ""
		case UnregisterInstance:
			n := c.Instance.Name
			if n == mainNow {
				fail("command %d: unregisters the MAIN %s", i, n)
			}
			if !hasMain {
				fail("command %d: unregisters %s while the cluster has no MAIN", i, n)
			}
			if !slices.Contains(want.RetiringData, n) {
				fail("command %d: unregisters %s, which is not retiring", i, n)
			}
			if _, ok := listed[n]; !ok || unregistered[n] {
				fail("command %d: unregisters %s, not listed or twice", i, n)
			}
			unregistered[n] = true
		case RegisterInstance:
			n := c.Instance.Name
			if _, ok := listed[n]; ok || registered[n] || !declaredD[n] || slices.Contains(want.RetiringData, n) {
				fail("command %d: registers %s (listed, twice, undeclared or retiring)", i, n)
			}
			registered[n] = true
		case AddCoordinator:
			id := c.Coordinator.ID
			row, ok := listed[memgraph.CoordinatorName(id)]
			if _, declared := declaredC[id]; !declared || added[id] || slices.Contains(want.RetiringCoordinators, id) || (ok && row.BoltServer != "") {
				fail("command %d: adds coordinator %d (undeclared, twice, retiring or already added)", i, id)
			}
			added[id] = true
		case RemoveCoordinator:
			name := memgraph.CoordinatorName(c.Coordinator.ID)
			if name == seen.Leader {
				fail("command %d: removes the leader", i)
			}
			if _, ok := listed[name]; !ok || !slices.Contains(want.RetiringCoordinators, c.Coordinator.ID) {
				fail("command %d: removes %s, not listed or not retiring", i, name)
			}
		case YieldLeadership:
			if i != len(r.Commands)-1 {
				fail("command %d: YieldLeadership is not last", i)
			}
			id, _ := memgraph.CoordinatorID(seen.Leader)
			if !slices.Contains(want.RetiringCoordinators, id) && !slices.Contains(want.DrainCoordinators, id) {
				fail("command %d: leader %s yields but neither retires nor drains", i, seen.Leader)
			}
			successor := false
			for _, in := range seen.Instances {
				cid, ok := memgraph.CoordinatorID(in.Name)
				successor = successor || (ok && in.IsCoordinator() && cid != id && in.Up() && !slices.Contains(want.RetiringCoordinators, cid))
			}
			if !successor {
				fail("command %d: leader yields with no up successor", i)
			}
		default:
			fail("command %d: unknown kind %v", i, c.Kind)
		}
	}
	for _, w := range r.Waiting {
		if strings.TrimSpace(w) == "" {
			fail("an empty waiting message")
		}
	}
}

// FuzzChaos drives the coordinator cluster model of sim_test.go with a script: scale
// changes of both StatefulSets, passes killed after any number of queries, pods going down
// and up, replicas lagging, the coordinators' own failover, registrations and members lost
// by hand, elections, rolling restarts draining the MAIN or the leader. The model records
// every breach it sees (two MAINs, a promotion that loses commits, the alive MAIN
// unregistered, the leader removed); each pass's plan is held against checkPlan; at the
// end, calm passes converge to the spec.
func FuzzChaos(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 1, 1, 2, 3, 4, 0, 2, 1, 5})
	f.Add([]byte{0, 2, 2, 1, 0, 0, 3, 0, 1, 7, 1, 0, 1, 1, 8, 1, 1, 9})
	f.Add([]byte{0, 3, 3, 5, 1, 1, 0, 0, 2, 1, 0, 10, 11, 0, 0, 0, 1, 3, 2})
	f.Fuzz(func(t *testing.T, in []byte) {
		s := fuzzinput.New(in)
		w := newWorld(uint64(s.Next())+1, 3, 2)
		w.liveC, w.specC = 1, 1
		w.m.showUnknown = s.Next()%2 == 1
		w.scale(3, 2)
		coords := []int{3, 5, 7, 9} // what admission allows: odd, 3 to 9
		for step := 0; step < 40 && s.More(); step++ {
			switch op := s.Next() % 12; op {
			case 0:
				w.scale(coords[s.Next()%4], 1+s.Next()%5)
			case 1, 2, 3:
				budget := -1
				if x := s.Next(); x%2 == 1 {
					budget = x / 2 % 8
				}
				w.fuzzPass(t, budget)
			case 4:
				if names := w.podNames(); len(names) > 0 {
					p := w.m.pods[names[s.Next()%len(names)]]
					p.up = !p.up
				}
			case 5:
				if names := w.podNames(); len(names) > 0 {
					p := w.m.pods[names[s.Next()%len(names)]]
					p.lagging = !p.lagging
				}
			case 6:
				w.m.failover()
			case 7:
				w.m.write(int64(1 + s.Next()%3))
			case 8: // a registration wiped by hand while the cluster has a MAIN
				if m := w.m; len(m.regOrder) > 0 && m.main != "" {
					if n := m.regOrder[s.Next()%len(m.regOrder)]; n != m.main {
						delete(m.reg, n)
						m.regOrder = without(m.regOrder, n)
					}
				}
			case 9: // a member removed by hand, or an election
				ids := w.m.memberIDs(func(id int) bool { return id != w.m.leader })
				if len(ids) > 0 && s.Next()%2 == 0 {
					delete(w.m.members, ids[s.Next()%len(ids)])
				} else {
					all := w.m.memberIDs(func(int) bool { return true })
					w.m.leader = all[s.Next()%len(all)]
				}
			case 10: // a rolling restart drains the MAIN
				if w.m.main != "" && w.specD >= 2 {
					w.drainD = []string{w.m.main}
				}
			case 11: // or the leader, or is done
				if s.Next()%2 == 0 {
					w.drainC = []int{w.m.leader}
				} else {
					w.drainC = nil
				}
			}
			w.m.replicate()
			if len(w.m.violations) > 0 {
				t.Fatalf("%s (spec %d+%d live %d+%d)\nlog:\n%s", w.m.violations[0], w.specC, w.specD, w.liveC, w.liveD, tail(w.log, 40))
			}
		}
		w.converge(t, 30)
		w.assertNoViolations(t, "after convergence")
	})
}

// fuzzPass is world.pass with every plan also held against checkPlan.
func (w *world) fuzzPass(t *testing.T, budget int) {
	t.Helper()
	want := w.desired()
	seen := Observed{Leader: memgraph.CoordinatorName(w.m.leader), Instances: w.m.showInstances(want)}
	if NeedsLag(want, seen.Instances) {
		seen.Lag = w.m.lag()
	}
	checkPlan(t, want, seen, Plan(want, seen))
	w.pass(t, budget)
}
