package memgraphsim

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/opsuite/suite/shared/testenv"
	"github.com/opsuite/suite/tools/internal/bolt"
)

// bootstrapNamed forms the Raft group and registers data instance i as names[i] (SYNC, in
// that order), with names[0] the MAIN.
func (tc *testCluster) bootstrapNamed(names ...string) {
	tc.t.Helper()
	l := tc.waitLeader()
	for _, p := range tc.coords {
		mustRunRetrying(tc.t, l, tc.addCoordinatorQuery(p))
	}
	for i, p := range tc.data {
		mustRunRetrying(tc.t, l, registerQuery(names[i], p, testenv.FreePortBelowEphemeral(tc.t)))
	}
	mustRunRetrying(tc.t, l, "SET INSTANCE "+names[0]+" TO MAIN")
}

// writeLedger counts what a MAIN committed: every CREATE that returned success
// (acknowledged) and every one that came back with the SYNC replication exception, which
// Memgraph also leaves committed on the MAIN.
type writeLedger struct {
	committed, acked int64
}

func (w *writeLedger) create(t *testing.T, main *simProc, batch string) {
	t.Helper()
	_, err := run(t, main, fmt.Sprintf(`CREATE (:Person {batch: %q}), (:Person {batch: %q})`, batch, batch))
	var f *bolt.Failure
	switch {
	case err == nil:
		w.acked += 2
	case errors.As(err, &f) && f.Message == ErrSyncReplica:
	default:
		t.Fatalf("write %q on the MAIN: %v", batch, err)
	}
	w.committed += 2
}

// mainsInRaft is every MAIN some running coordinator's Raft state names now.
func (tc *testCluster) mainsInRaft() []string {
	var out []string
	for _, p := range tc.coords {
		if p.srv != nil {
			if m := p.srv.coord.fsm.state().Main; m != "" && !slices.Contains(out, m) {
				out = append(out, m)
			}
		}
	}
	return out
}

// awaitFailover waits until the leader reports want as the up MAIN, failing at once if
// any coordinator's Raft state names never as MAIN on the way.
func (tc *testCluster) awaitFailover(want, never string) time.Duration {
	tc.t.Helper()
	start := time.Now()
	testenv.EventuallyTrue(tc.t, 15*time.Second, want+" as the MAIN", func() bool {
		if mains := tc.mainsInRaft(); slices.Contains(mains, never) {
			tc.t.Fatalf("the coordinators recorded %s as MAIN (Raft states name %v)", never, mains)
		}
		l := tc.leader()
		if l == nil {
			return false
		}
		r := showInstances(tc.t, l)
		return r[want][5] == RoleMain && r[want][4] == "up"
	})
	return time.Since(start)
}

// neverMain asserts the invariant log shows no promotion of name.
func neverMain(t *testing.T, events []Event, name string) {
	t.Helper()
	for _, e := range events {
		if e.Instance == name && e.Role == RoleMain {
			t.Fatalf("invariant log: %s became MAIN at %s (epoch %d)", name, e.TS.Format(time.RFC3339Nano), e.Epoch)
		}
	}
}

// The MAIN dies while the replica that comes first by name and registration order is
// behind the other: the coordinators must promote the up-to-date one, whose graph holds
// every transaction the old MAIN committed, and the lagging one must follow it.
func TestFailoverPromotesMostUpToDateReplica(t *testing.T) {
	tc := newTestCluster(t, 3, 3)
	tc.bootstrap() // instance_0 MAIN; instance_1 and instance_2 SYNC replicas, in that order
	oldMain, lagging, upToDate := tc.data[0], tc.data[1], tc.data[2]
	var w writeLedger
	for i := range 3 {
		w.create(t, oldMain, fmt.Sprintf("all-%d", i))
	}
	if w.acked != w.committed || count(t, lagging, "Person") != w.committed || count(t, upToDate, "Person") != w.committed {
		t.Fatalf("before the fault: acked %d of %d, replicas count %d and %d", w.acked, w.committed,
			count(t, lagging, "Person"), count(t, upToDate, "Person"))
	}

	// instance_1 stops while writes go on; it comes back, but the MAIN's replication to it
	// stays cut (the pause knob), so it cannot catch up.
	tc.stop(lagging)
	for i := range 3 {
		w.create(t, oldMain, fmt.Sprintf("without-instance_1-%d", i))
	}
	oldMain.srv.data.pauseReplicationTo("instance_1")
	tc.start(lagging)
	w.create(t, oldMain, "instance_1-back-but-paused")

	leader := tc.waitLeader()
	testenv.EventuallyTrue(t, 10*time.Second, "the leader to see instance_1 up and behind instance_2", func() bool {
		h1, up1 := leader.srv.coord.alive("instance_1")
		h2, up2 := leader.srv.coord.alive("instance_2")
		return up1 && up2 && h1.role == RoleReplica && h1.committed == 3 && h2.committed == 7
	})
	lag := mustRun(t, leader, "SHOW REPLICATION LAG")
	behind := map[any]any{}
	for _, r := range lag.Records {
		behind[r[0]] = r[1].(map[string]any)["memgraph"].(map[string]any)["num_txns_behind_main"]
	}
	if behind["instance_1"] == int64(0) || behind["instance_2"] != int64(0) {
		t.Fatalf("SHOW REPLICATION LAG before the kill: %v, want instance_1 behind and instance_2 not", lag.Records)
	}
	if n, m := count(t, lagging, "Person"), count(t, oldMain, "Person"); n != 6 || m != w.committed {
		t.Fatalf("before the kill: instance_1 counts %d (want 6), the MAIN %d (want %d)", n, m, w.committed)
	}

	tc.kill(oldMain)
	took := tc.awaitFailover("instance_2", "instance_1")
	t.Logf("failover to instance_2 took %s (down timeout %s); %d of %d nodes acknowledged without a replication exception",
		took.Round(time.Millisecond), oldMain.opts.InstanceDownTimeout, w.acked, w.committed)

	// Nothing the old MAIN committed is lost on the new one.
	if n := count(t, upToDate, "Person"); n != w.committed {
		t.Fatalf("new MAIN counts %d Person nodes, the old MAIN committed %d (%d acknowledged)", n, w.committed, w.acked)
	}
	// The new MAIN takes writes (instance_0, a SYNC replica now, is down: the exception).
	testenv.EventuallyTrue(t, 5*time.Second, "the new MAIN accepting writes", func() bool {
		_, err := run(t, upToDate, `CREATE (:Person {batch: "after-failover"})`)
		var f *bolt.Failure
		if err == nil || (errors.As(err, &f) && f.Message == ErrSyncReplica) {
			return true
		}
		if !errors.As(err, &f) || f.Message != ErrWriteOnReplica {
			t.Fatalf("write on the new MAIN: %v", err)
		}
		return false
	})
	// The lagging replica follows the new MAIN (which pauses nothing) and catches up.
	testenv.EventuallyTrue(t, 10*time.Second, "instance_1 caught up from the new MAIN", func() bool {
		return count(t, lagging, "Person") == w.committed+1
	})
	if r := showInstances(t, tc.waitLeader()); r["instance_1"][5] != RoleReplica {
		t.Fatalf("instance_1 after the failover: %v", r["instance_1"])
	}

	events := tc.oneMainAtMost()
	neverMain(t, events, "instance_1")
}

// Both replicas hold the same transactions: the choice is deterministic and Memgraph's,
// the smallest instance name (byte order; Memgraph iterates a std::map keyed by name and
// keeps the first of equals), whatever the registration order.
func TestFailoverTieGoesToSmallestName(t *testing.T) {
	tc := newTestCluster(t, 3, 3)
	// Registered as instance_0 (MAIN), then instance_2, then instance_1: registration
	// order and name order disagree.
	tc.bootstrapNamed("instance_0", "instance_2", "instance_1")
	oldMain, second, first := tc.data[0], tc.data[1], tc.data[2]
	var w writeLedger
	for i := range 3 {
		w.create(t, oldMain, fmt.Sprintf("tie-%d", i))
	}
	if w.acked != w.committed {
		t.Fatalf("acknowledged %d of %d nodes with both replicas up", w.acked, w.committed)
	}
	leader := tc.waitLeader()
	testenv.EventuallyTrue(t, 5*time.Second, "the leader to see both replicas equal", func() bool {
		h1, _ := leader.srv.coord.alive("instance_1")
		h2, _ := leader.srv.coord.alive("instance_2")
		return h1.committed == 3 && h2.committed == 3
	})

	tc.kill(oldMain)
	took := tc.awaitFailover("instance_1", "instance_2")
	t.Logf("failover to instance_1 took %s", took.Round(time.Millisecond))
	if n := count(t, first, "Person"); n != w.committed {
		t.Fatalf("new MAIN counts %d Person nodes, want %d", n, w.committed)
	}
	testenv.EventuallyTrue(t, 5*time.Second, "instance_2 a replica of the new MAIN", func() bool {
		r := showInstances(t, tc.waitLeader())
		return r["instance_2"][5] == RoleReplica && count(t, second, "Person") == w.committed
	})
	events := tc.oneMainAtMost()
	neverMain(t, events, "instance_2")
}

func TestFailoverCandidateOrder(t *testing.T) {
	cand := func(name, mode string, committed uint64) failoverCandidate {
		return failoverCandidate{inst: dataMeta{Name: name, Mode: mode}, committed: committed}
	}
	cases := []struct {
		name string
		a, b failoverCandidate
		want bool // a before b
	}{
		{"more commits wins", cand("instance_2", "sync", 7), cand("instance_1", "sync", 3), true},
		{"fewer commits loses, whatever the name", cand("instance_1", "sync", 3), cand("instance_2", "sync", 7), false},
		{"equal: smaller name", cand("instance_1", "sync", 5), cand("instance_2", "sync", 5), true},
		{"equal: byte order, not numeric", cand("instance_10", "sync", 5), cand("instance_2", "sync", 5), true},
		{"modes do not order (failoverLocked filters)", cand("instance_2", "strict_sync", 4), cand("instance_1", "sync", 3), true},
		{"a candidate is not before itself", cand("instance_1", "sync", 5), cand("instance_1", "sync", 5), false},
	}
	for _, c := range cases {
		if got := c.a.moreUpToDate(c.b); got != c.want {
			t.Errorf("%s: %s(%s, %d) before %s(%s, %d) = %v, want %v", c.name, c.a.inst.Name, c.a.inst.Mode, c.a.committed,
				c.b.inst.Name, c.b.inst.Mode, c.b.committed, got, c.want)
		}
	}
}

func TestParseOptionsPauseReplicationTo(t *testing.T) {
	o, _, err := ParseOptions([]string{"--management-port=10000"}, env(map[string]string{
		"MEMGRAPH_ENTERPRISE_LICENSE": "k", "MEMGRAPH_ORGANIZATION_NAME": "o",
		"MEMGRAPH_SIM_PAUSE_REPLICATION_TO": " instance_1, ,instance_3 "}))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(o.PauseReplicationTo, []string{"instance_1", "instance_3"}) {
		t.Fatalf("PauseReplicationTo %q", o.PauseReplicationTo)
	}
}
