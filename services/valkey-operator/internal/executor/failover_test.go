package executor

import (
	"context"
	"fmt"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/opsuite/suite/services/valkey-operator/internal/planner"
	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
	"github.com/opsuite/suite/shared/testenv"
)

// formReal starts n servers and forms d's shape out of them; it returns the members'
// addresses and an executor dialling without credentials.
func formReal(ctx context.Context, t testing.TB, shards, replicas int) (*Executor, planner.Desired, []*server, []string) {
	t.Helper()
	servers := startServers(t, shards*(1+replicas))
	var members []planner.Member
	var addrs []string
	for _, s := range servers {
		members = append(members, s.member)
		addrs = append(addrs, s.member.Addr)
	}
	d := planner.Desired{Shards: shards, Replicas: replicas, Members: members}
	e := New(func(addr string) (valkey.Conn, error) { return valkey.Dial(addr, valkey.Options{}) })
	t.Cleanup(e.Close)
	convergeReal(ctx, t, e, d, addrs)
	return e, d, servers, addrs
}

func writeKeys(ctx context.Context, t *testing.T, kv valkey.Cluster, n int) {
	t.Helper()
	for i := range n {
		if err := kv.Set(ctx, fmt.Sprintf("k%d", i), strconv.Itoa(i)); err != nil {
			t.Fatalf("SET k%d: %v", i, err)
		}
	}
}

func readKeys(ctx context.Context, t *testing.T, kv valkey.Cluster, n int, when string) {
	t.Helper()
	for i := range n {
		v, err := kv.Get(ctx, fmt.Sprintf("k%d", i))
		if err != nil || v != strconv.Itoa(i) {
			t.Fatalf("%s: GET k%d = %q, %v", when, i, v, err)
		}
	}
}

// awaitReplicasInSync waits until every replica's link to its primary is up and it has
// caught up with the primary's offset (the tests write nothing meanwhile).
func awaitReplicasInSync(ctx context.Context, t *testing.T, e *Executor, addrs []string) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, "every replica in sync with its primary", func() (bool, string) {
		snap, failed := e.Observe(ctx, addrs)
		if len(failed) > 0 {
			return false, fmt.Sprint("unreachable: ", failed)
		}
		offsets := map[string]int64{}
		for _, v := range snap.Views {
			me, _ := v.Myself()
			offsets[me.ID] = v.Repl.Offset
		}
		for _, v := range snap.Views {
			me, _ := v.Myself()
			if me.Replica && (!v.Repl.MasterLinkUp || v.Repl.Offset != offsets[me.PrimaryID]) {
				return false, fmt.Sprintf("%s: %+v, primary at %d", v.Addr, v.Repl, offsets[me.PrimaryID])
			}
		}
		return true, ""
	})
}

// TestFailoverEveryShard fails over every shard of a real 3x1 cluster to its replica, the
// last one right after moving a slot to that shard (SETSLOT NODE bumps the epoch the
// voters check), resumes one finished failover, and reads every key back.
func TestFailoverEveryShard(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	e, _, _, addrs := formReal(ctx, t, 3, 1)
	kv, err := valkey.DialCluster(addrs, valkey.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Close()
	const keys = 1000
	writeKeys(ctx, t, kv, keys)
	awaitReplicasInSync(ctx, t, e, addrs)

	snap, _ := e.Observe(ctx, addrs)
	view := snap.Views[0]
	type shard struct{ primary, replica valkey.Node }
	var shards []shard
	for _, p := range view.Primaries() {
		if reps := view.ReplicasOf(p.ID); p.SlotTotal() > 0 && len(reps) == 1 {
			shards = append(shards, shard{primary: p, replica: reps[0]})
		}
	}
	if len(shards) != 3 {
		t.Fatalf("%d shards with one replica, want 3", len(shards))
	}

	for i, sh := range shards {
		last := i == len(shards)-1
		if last {
			// Move one slot from the first shard's (new) primary to this shard's primary
			// with the planner's steps, then fail over at once.
			moveOneSlot(ctx, t, e, addrs, sh.primary)
		}
		start := time.Now()
		res, err := e.Failover(ctx, sh.replica.Addr, addrs, 45*time.Second)
		if err != nil || res.Outcome != FailoverCompleted {
			t.Fatalf("failover to %s: %+v, %v", sh.replica.Addr, res, err)
		}
		if res.Sent < 1 || res.NodeID != sh.replica.ID || res.PrimaryID != sh.primary.ID {
			t.Fatalf("failover to %s: %+v", sh.replica.Addr, res)
		}
		t.Logf("shard %d: %s took over from %s in %s, %d CLUSTER FAILOVER sent", i, sh.replica.Addr, sh.primary.Addr, time.Since(start).Round(time.Millisecond), res.Sent)
		readKeys(ctx, t, kv, keys, fmt.Sprintf("after failover %d", i))
		// Resumed on the new primary, it completes without sending anything.
		again, err := e.Failover(ctx, sh.replica.Addr, addrs, 10*time.Second)
		if err != nil || again.Outcome != FailoverCompleted || again.Sent != 0 {
			t.Fatalf("resumed failover to %s: %+v, %v", sh.replica.Addr, again, err)
		}
	}
	snap, failed := e.Observe(ctx, addrs)
	if len(failed) > 0 {
		t.Fatalf("unreachable: %v", failed)
	}
	for _, sh := range shards {
		v, _ := snap.View(sh.replica.Addr)
		if me, _ := v.Myself(); !me.Primary || me.SlotTotal() == 0 {
			t.Fatalf("%s is not a primary serving slots after failover: %+v", sh.replica.Addr, me)
		}
		testenv.Eventually(t, 20*time.Second, sh.primary.Addr+" follows "+sh.replica.Addr, func() (bool, string) {
			c, err := e.Conn(sh.primary.Addr)
			if err != nil {
				return false, err.Error()
			}
			v, err := c.ClusterNodes(ctx)
			if err != nil {
				return false, err.Error()
			}
			me, _ := v.Myself()
			return me.PrimaryID == sh.replica.ID, fmt.Sprintf("%+v", me)
		})
	}
	writeKeys(ctx, t, kv, keys)
	readKeys(ctx, t, kv, keys, "after every failover")
}

// moveOneSlot moves the lowest slot of another primary to primary with the planner's
// move steps, as a rebalance would, leaving gossip to spread the new epoch.
func moveOneSlot(ctx context.Context, t *testing.T, e *Executor, addrs []string, to valkey.Node) {
	t.Helper()
	snap, _ := e.Observe(ctx, addrs)
	view := snap.Views[0]
	var from valkey.Node
	for _, p := range view.Primaries() {
		if p.ID != to.ID && p.SlotTotal() > 0 {
			from = p
			break
		}
	}
	slot := from.Slots[0].Start
	steps := []planner.Step{
		{Op: planner.SetSlotImporting, On: to.Addr, Slot: slot, NodeID: from.ID},
		{Op: planner.SetSlotMigrating, On: from.Addr, Slot: slot, NodeID: to.ID},
		{Op: planner.MigrateKeys, On: from.Addr, Slot: slot, Addr: to.Addr},
		{Op: planner.SetSlotNode, On: to.Addr, Slot: slot, NodeID: to.ID},
		{Op: planner.SetSlotNode, On: from.Addr, Slot: slot, NodeID: to.ID},
	}
	if n, err := e.Run(ctx, steps); err != nil {
		t.Fatalf("moving slot %d after %d steps: %v", slot, n, err)
	}
}

// TestFailoverNotReady: a primary serving no slots is refused, and a replica whose link to
// its primary is down is not ready (nothing sent).
func TestFailoverNotReady(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	servers := startServers(t, 2)
	e := New(func(addr string) (valkey.Conn, error) { return valkey.Dial(addr, valkey.Options{}) })
	defer e.Close()
	a, b := servers[0].member.Addr, servers[1].member.Addr
	res, err := e.Failover(ctx, a, []string{a, b}, 5*time.Second)
	if err == nil || res.Outcome != FailoverFailed || res.Sent != 0 {
		t.Fatalf("failover on an empty primary: %+v, %v", res, err)
	}
	// One replicates the other, which serves slots; then the primary dies.
	d := planner.Desired{Shards: 1, Replicas: 1, Members: []planner.Member{servers[0].member, servers[1].member}}
	convergeReal(ctx, t, e, d, []string{a, b})
	snap, _ := e.Observe(ctx, []string{a, b})
	primary, replica := servers[0], b
	if va, ok := snap.View(a); !ok {
		t.Fatalf("%s not observed", a)
	} else if me, _ := va.Myself(); me.Replica {
		primary, replica = servers[1], a
	}
	primary.stop(t)
	res, err = e.Failover(ctx, replica, []string{a, b}, 5*time.Second)
	if err != nil || res.Outcome != FailoverNotReady || res.Sent != 0 || res.Message == "" {
		t.Fatalf("failover with the primary gone: %+v, %v", res, err)
	}
	t.Logf("not ready: %s", res.Message)
}

// TestFailoverTimesOutWithoutQuorum freezes (SIGSTOP) two of three primaries: the replica
// of the third gets too few votes, its attempt is abandoned, retried while its primary is
// unchanged, and the failover ends as a typed timeout, not an error.
func TestFailoverTimesOutWithoutQuorum(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	e, _, servers, addrs := formReal(ctx, t, 3, 1)
	awaitReplicasInSync(ctx, t, e, addrs)
	snap, _ := e.Observe(ctx, addrs)
	view := snap.Views[0]
	primaries := view.Primaries()
	keep := primaries[0]
	replica := view.ReplicasOf(keep.ID)[0]
	var reachable []string
	for _, s := range servers {
		n, _ := view.ByAddr(s.member.Addr)
		if n.Primary && n.ID != keep.ID {
			if err := s.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.cmd.Process.Signal(syscall.SIGCONT) })
			continue
		}
		reachable = append(reachable, s.member.Addr)
	}
	start := time.Now()
	res, err := e.Failover(ctx, replica.Addr, reachable, 15*time.Second)
	if err != nil || res.Outcome != FailoverTimedOut || res.Sent < 2 || res.Message == "" {
		t.Fatalf("failover without quorum: %+v, %v; want a timeout after a retried attempt", res, err)
	}
	t.Logf("after %s: %+v", time.Since(start).Round(time.Millisecond), res)
	v, _ := e.views(ctx, []string{replica.Addr}).View(replica.Addr)
	if me, _ := v.Myself(); !me.Replica || me.PrimaryID != keep.ID {
		t.Fatalf("%s after the timeout: %+v, want still a replica of %s", replica.Addr, me, keep.ID)
	}
}
