// Package executor carries planner steps out on the members through valkey.Conn and
// observes the members into a snapshot; it holds the connections, not the decisions.
package executor

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/opsuite/suite/services/valkey-operator/internal/planner"
	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
)

// Dialer opens the admin connection to one member.
type Dialer func(addr string) (valkey.Conn, error)

// Executor keeps one connection per member address.
type Executor struct {
	Dial Dialer
	// KeyBatch is how many keys one MIGRATE carries (default 100).
	KeyBatch int
	// Now is the clock Observe stamps snapshots with (default time.Now).
	Now func() time.Time
	// ObserveTimeout bounds the observation of one member (default 5 s): a member the
	// operator cannot reach (a partition drops its packets, so no error comes back) costs
	// a pass that long, not a TCP retransmission timeout.
	ObserveTimeout time.Duration
	mu             sync.Mutex // guards conns: Observe reads the members at once
	conns          map[string]valkey.Conn
	// failSince remembers, across Observe calls, when each node id was first seen marked
	// fail or fail? by some view.
	failSince map[string]time.Time
}

// New returns an executor dialling through dial.
func New(dial Dialer) *Executor {
	return &Executor{Dial: dial, conns: map[string]valkey.Conn{}, failSince: map[string]time.Time{}}
}

func (e *Executor) now() time.Time {
	if e.Now != nil {
		return e.Now()
	}
	return time.Now()
}

// Conn returns the cached connection to addr, dialling it on first use.
func (e *Executor) Conn(addr string) (valkey.Conn, error) {
	e.mu.Lock()
	c, ok := e.conns[addr]
	e.mu.Unlock()
	if ok {
		return c, nil
	}
	c, err := e.Dial(addr)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if cur, ok := e.conns[addr]; ok { // dialled at the same time by another observation
		c.Close()
		return cur, nil
	}
	e.conns[addr] = c
	return c, nil
}

// drop closes a connection after an error so the next use dials afresh.
func (e *Executor) drop(addr string) {
	e.mu.Lock()
	c, ok := e.conns[addr]
	delete(e.conns, addr)
	e.mu.Unlock()
	if ok {
		c.Close()
	}
}

// Close closes every connection.
func (e *Executor) Close() {
	e.mu.Lock()
	addrs := make([]string, 0, len(e.conns))
	for addr := range e.conns {
		addrs = append(addrs, addr)
	}
	e.mu.Unlock()
	for _, addr := range addrs {
		e.drop(addr)
	}
}

// Observe reads CLUSTER NODES, CLUSTER INFO and INFO replication from every address; the
// ones that did not answer are returned with their error and left out of the snapshot. It
// stamps the snapshot with the time and with when each failing node was first seen failing
// by this executor.
func (e *Executor) Observe(ctx context.Context, addrs []string) (valkey.Snapshot, map[string]error) {
	snap := valkey.Snapshot{At: e.now(), FailSince: map[string]time.Time{}}
	failed := map[string]error{}
	sorted := append([]string(nil), addrs...)
	sort.Strings(sorted)
	// Every member at once, each within ObserveTimeout: a pass waits for the slowest member
	// only, however many do not answer.
	timeout := e.ObserveTimeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	views := make([]valkey.View, len(sorted))
	errs := make([]error, len(sorted))
	var wg sync.WaitGroup
	for i, addr := range sorted {
		wg.Go(func() {
			octx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			views[i], errs[i] = e.observe(octx, addr)
		})
	}
	wg.Wait()
	for i, addr := range sorted {
		if errs[i] != nil {
			e.drop(addr)
			failed[addr] = errs[i]
			continue
		}
		snap.Views = append(snap.Views, views[i])
	}
	// A failing node has failed since this executor first saw it so, or since the last
	// pong any member got from it, whichever is earlier: the latter survives an operator
	// restart.
	for _, v := range snap.Views {
		for _, n := range v.Nodes {
			// A lost link or a noaddr mark (a new node took its address) counts as well:
			// such a node is never pinged, so it may never be flagged fail.
			if !n.Fail && !n.PFail && !n.NoAddr && (n.Connected || n.Myself) {
				continue
			}
			since, ok := snap.FailSince[n.ID]
			if !ok {
				if since, ok = e.failSince[n.ID]; !ok {
					since = snap.At
				}
			}
			if !n.PongRecv.IsZero() && n.PongRecv.Before(since) {
				since = n.PongRecv
			}
			snap.FailSince[n.ID] = since
		}
	}
	// Only ids failing now are remembered: a node that recovered starts afresh.
	e.failSince = snap.FailSince
	return snap, failed
}

func (e *Executor) observe(ctx context.Context, addr string) (valkey.View, error) {
	c, err := e.Conn(addr)
	if err != nil {
		return valkey.View{}, err
	}
	v, err := c.ClusterNodes(ctx)
	if err != nil {
		return valkey.View{}, err
	}
	info, err := c.ClusterInfo(ctx)
	if err != nil {
		return valkey.View{}, err
	}
	v.Info = valkey.ClusterInfoFrom(info)
	if v.Repl, err = c.ReplicationState(ctx); err != nil {
		return valkey.View{}, err
	}
	if v.ShardID, err = c.ShardID(ctx); err != nil {
		return valkey.View{}, err
	}
	return v, nil
}

// Run executes steps in order and stops at the first error: the next pass observes again
// and plans from what actually happened. It returns how many steps completed.
//
// Runs of consecutive SETSLOT steps on one member, and of MigrateKeys steps from one member
// to one target, are pipelined: each such command stands alone, so sending them together
// changes only how many round trips a rebalance waits for. After a failure in a run the
// later commands of that run may have been applied too; the next observation shows it.
//
// Consecutive steps of one wave (planner.Step.Wave) run on their members at once, each
// member's share in order: a member answers SETSLOT only once its replicas have it, so a
// rebalance waits for the slowest member of each wave rather than for all of them in
// turn. A wave that fails on some member counts as not done; its other members' shares
// ran to their end or their own error.
func (e *Executor) Run(ctx context.Context, steps []planner.Step) (int, error) {
	for i := 0; i < len(steps); {
		n := sameWave(steps[i:])
		if steps[i].Wave != 0 {
			if err := e.wave(ctx, steps[i:i+n]); err != nil {
				return i, fmt.Errorf("steps %d-%d (%s, ...): %w", i+1, i+n, steps[i], err)
			}
			i += n
			continue
		}
		done, err := e.sequence(ctx, steps[i:i+n])
		if err != nil {
			return i + done, fmt.Errorf("step %d (%s): %w", i+done+1, steps[i+done], err)
		}
		i += n
	}
	return len(steps), nil
}

// sameWave is how many steps from the first have its Wave.
func sameWave(steps []planner.Step) int {
	n := 1
	for n < len(steps) && steps[n].Wave == steps[0].Wave {
		n++
	}
	return n
}

// wave runs each member's share of steps at once and returns the first member's error.
func (e *Executor) wave(ctx context.Context, steps []planner.Step) error {
	var members []string
	share := map[string][]planner.Step{}
	for _, s := range steps {
		if _, ok := share[s.On]; !ok {
			members = append(members, s.On)
		}
		share[s.On] = append(share[s.On], s)
	}
	errs := make([]error, len(members))
	var wg sync.WaitGroup
	for i, on := range members {
		wg.Go(func() {
			if _, err := e.sequence(ctx, share[on]); err != nil {
				errs[i] = fmt.Errorf("on %s: %w", on, err)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// sequence runs steps in order, pipelining what batchLen allows, and returns how many
// completed.
func (e *Executor) sequence(ctx context.Context, steps []planner.Step) (int, error) {
	for i := 0; i < len(steps); {
		n := batchLen(steps[i:])
		if n == 1 {
			if err := e.step(ctx, steps[i]); err != nil {
				return i, err
			}
			i++
			continue
		}
		done, err := e.batch(ctx, steps[i:i+n])
		if err != nil {
			return i + done, err
		}
		i += n
	}
	return len(steps), nil
}

func isSetSlot(op planner.Op) bool {
	return op == planner.SetSlotImporting || op == planner.SetSlotMigrating || op == planner.SetSlotNode || op == planner.SetSlotStable
}

// batchLen is how many steps from the first can be pipelined together (1: none).
func batchLen(steps []planner.Step) int {
	first := steps[0]
	n := 1
	for ; n < len(steps); n++ {
		s := steps[n]
		if s.On != first.On {
			break
		}
		setSlots := isSetSlot(first.Op) && isSetSlot(s.Op)
		migrations := first.Op == planner.MigrateKeys && s.Op == planner.MigrateKeys && s.Addr == first.Addr
		if !setSlots && !migrations {
			break
		}
	}
	return n
}

// batch pipelines a run found by batchLen and returns how many of its steps completed.
func (e *Executor) batch(ctx context.Context, steps []planner.Step) (int, error) {
	c, err := e.Conn(steps[0].On)
	if err != nil {
		return 0, err
	}
	if steps[0].Op == planner.MigrateKeys {
		slots := make([]int, len(steps))
		for i, s := range steps {
			slots[i] = s.Slot
		}
		if _, err := c.MigrateSlotsKeys(ctx, slots, steps[0].Addr, e.keyBatch()); err != nil {
			return 0, err
		}
		return len(steps), nil
	}
	cmds := make([]valkey.SetSlot, len(steps))
	for i, s := range steps {
		cmds[i] = valkey.SetSlot{Slot: s.Slot, NodeID: s.NodeID}
		switch s.Op {
		case planner.SetSlotImporting:
			cmds[i].State = valkey.SlotImporting
		case planner.SetSlotMigrating:
			cmds[i].State = valkey.SlotMigrating
		case planner.SetSlotNode:
			cmds[i].State = valkey.SlotNode
		default:
			cmds[i].State, cmds[i].NodeID = valkey.SlotStable, ""
		}
	}
	return c.SetSlots(ctx, cmds...)
}

func (e *Executor) keyBatch() int {
	if e.KeyBatch <= 0 {
		return 100
	}
	return e.KeyBatch
}

func (e *Executor) step(ctx context.Context, s planner.Step) error {
	c, err := e.Conn(s.On)
	if err != nil {
		return err
	}
	switch s.Op {
	case planner.Meet:
		return c.Meet(ctx, s.Addr, s.BusPort)
	case planner.AddSlots:
		return c.AddSlotsRange(ctx, s.Ranges...)
	case planner.Replicate:
		return c.Replicate(ctx, s.NodeID)
	case planner.SetSlotImporting:
		return c.SetSlotImporting(ctx, s.Slot, s.NodeID)
	case planner.SetSlotMigrating:
		return c.SetSlotMigrating(ctx, s.Slot, s.NodeID)
	case planner.MigrateKeys:
		batch := e.keyBatch()
		// A short batch emptied the slot: a key created since would have been redirected
		// to the target by ASK, the source being MIGRATING.
		for {
			n, err := c.MigrateSlotKeys(ctx, s.Slot, s.Addr, batch)
			if err != nil || n < batch {
				return err
			}
		}
	case planner.SetSlotNode:
		return c.SetSlotNode(ctx, s.Slot, s.NodeID)
	case planner.SetSlotStable:
		return c.SetSlotStable(ctx, s.Slot)
	case planner.Forget:
		return c.Forget(ctx, s.NodeID)
	case planner.Reset:
		return c.Reset(ctx)
	case planner.Takeover:
		return c.Failover(ctx, valkey.FailoverTakeover)
	case planner.SetConfigEpoch:
		return c.SetConfigEpoch(ctx, s.Epoch)
	case planner.BumpEpoch:
		// STILL (nothing to bump) is not an error: the planner asks another member next.
		_, err := c.BumpEpoch(ctx)
		return err
	}
	return fmt.Errorf("unknown step %q", s.Op)
}
