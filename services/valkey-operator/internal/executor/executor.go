// Package executor carries planner steps out on the members through valkey.Conn and
// observes the members into a snapshot; it holds the connections, not the decisions.
package executor

import (
	"context"
	"fmt"
	"sort"
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
	Now   func() time.Time
	conns map[string]valkey.Conn
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
	if c, ok := e.conns[addr]; ok {
		return c, nil
	}
	c, err := e.Dial(addr)
	if err != nil {
		return nil, err
	}
	e.conns[addr] = c
	return c, nil
}

// drop closes a connection after an error so the next use dials afresh.
func (e *Executor) drop(addr string) {
	if c, ok := e.conns[addr]; ok {
		c.Close()
		delete(e.conns, addr)
	}
}

// Close closes every connection.
func (e *Executor) Close() {
	for addr := range e.conns {
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
	for _, addr := range sorted {
		v, err := e.observe(ctx, addr)
		if err != nil {
			e.drop(addr)
			failed[addr] = err
			continue
		}
		snap.Views = append(snap.Views, v)
	}
	// A failing node has failed since this executor first saw it so, or since the last
	// pong any member got from it, whichever is earlier: the latter survives an operator
	// restart.
	for _, v := range snap.Views {
		for _, n := range v.Failed() {
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
	return v, nil
}

// Run executes steps in order and stops at the first error: the next pass observes again
// and plans from what actually happened. It returns how many steps completed.
func (e *Executor) Run(ctx context.Context, steps []planner.Step) (int, error) {
	for i, s := range steps {
		if err := e.step(ctx, s); err != nil {
			return i, fmt.Errorf("step %d (%s): %w", i+1, s, err)
		}
	}
	return len(steps), nil
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
		batch := e.KeyBatch
		if batch <= 0 {
			batch = 100
		}
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
	}
	return fmt.Errorf("unknown step %q", s.Op)
}
