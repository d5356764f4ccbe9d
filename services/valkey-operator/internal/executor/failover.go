package executor

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
)

// FailoverOutcome is how a proactive failover ended; each maps to one event.
type FailoverOutcome string

// Failover outcomes.
const (
	// FailoverCompleted: the replica is primary and every reachable member names it as the
	// owner of its slots (FailoverCompleted).
	FailoverCompleted FailoverOutcome = "Completed"
	// FailoverNotReady: nothing was sent; the replica is not in sync with a reachable
	// primary (requeue, no event).
	FailoverNotReady FailoverOutcome = "NotReady"
	// FailoverFailed: CLUSTER FAILOVER answered an error, or the member was lost
	// (FailoverFailed).
	FailoverFailed FailoverOutcome = "Failed"
	// FailoverTimedOut: the replica did not take over within the timeout (FailoverTimeout).
	FailoverTimedOut FailoverOutcome = "Timeout"
)

// FailoverResult says what Failover did.
type FailoverResult struct {
	Outcome FailoverOutcome
	// Replica is the address asked to take over and NodeID its id.
	Replica, NodeID string
	// PrimaryID is the primary it replaced ("" when it already was primary).
	PrimaryID string
	// Sent counts CLUSTER FAILOVER commands sent: 0 when resumed on a finished failover
	// or not ready, above 1 when a refused attempt was retried (FailoverInitiated when > 0).
	Sent int
	// Message says why it ended so, for the event.
	Message string
}

// DefaultMaxFailoverLag is the replication lag, in bytes, under which a replica counts as
// in sync for a proactive failover; CLUSTER FAILOVER itself pauses writes on the primary
// and lets the replica catch up before switching, so this only keeps a far-behind replica
// from stalling the primary's clients for long.
const DefaultMaxFailoverLag = 1 << 20

// failoverRetryAfter is how long a sent CLUSTER FAILOVER is given before it counts as
// refused: the server abandons a manual failover after 5 s (CLUSTER_MF_TIMEOUT).
const failoverRetryAfter = 6 * time.Second

const failoverPoll = 100 * time.Millisecond

// Failover makes the replica at replicaAddr its shard's primary with CLUSTER FAILOVER (the
// primary pauses its clients until the replica caught up, so no acknowledged write is
// lost) and waits until every reachable member of observe agrees it owns the slots. It
// sends only when the replica is in sync and all members agree on slot owners; a request
// refused by the voters for a stale epoch (right after SETSLOT NODE) is retried once they
// agree, while the replica still follows the same primary. Resumed on a replica that is
// already primary, it completes without sending. The error is set exactly when the outcome
// is FailoverFailed.
func (e *Executor) Failover(ctx context.Context, replicaAddr string, observe []string, timeout time.Duration) (FailoverResult, error) {
	res := FailoverResult{Replica: replicaAddr}
	deadline := e.now().Add(timeout)
	failed := func(err error) (FailoverResult, error) {
		res.Outcome, res.Message = FailoverFailed, err.Error()
		return res, err
	}
	c, err := e.Conn(replicaAddr)
	if err != nil {
		return failed(err)
	}
	v, err := c.ClusterNodes(ctx)
	if err != nil {
		e.drop(replicaAddr)
		return failed(err)
	}
	me, _ := v.Myself()
	res.NodeID = me.ID
	if me.Primary {
		if me.SlotTotal() == 0 {
			return failed(fmt.Errorf("%s is a primary serving no slots, not a replica", replicaAddr))
		}
		return e.awaitOwner(ctx, res, me.ID, me.Slots, observe, deadline)
	}
	res.PrimaryID = me.PrimaryID
	primary, ok := v.Node(me.PrimaryID)
	if !ok || primary.SlotTotal() == 0 {
		res.Outcome, res.Message = FailoverNotReady, fmt.Sprintf("the primary %s of %s serves no slots", me.PrimaryID, replicaAddr)
		return res, nil
	}
	if why := e.inSync(ctx, c, primary.Addr); why != "" {
		res.Outcome, res.Message = FailoverNotReady, why
		return res, nil
	}
	slots := primary.Slots
	for {
		if !e.awaitAgreement(ctx, observe, deadline) {
			res.Outcome, res.Message = FailoverTimedOut, fmt.Sprintf("members did not agree on slot owners within %s", timeout)
			return res, nil
		}
		err := c.Failover(ctx, valkey.FailoverDefault)
		switch {
		case err == nil:
			res.Sent++
		case strings.Contains(err.Error(), "to a replica"):
			// It became primary between our read and the command: a resumed failover.
		default:
			e.drop(replicaAddr)
			return failed(err)
		}
		retryAt := e.now().Add(failoverRetryAfter)
		for {
			v, err := c.ClusterNodes(ctx)
			if err != nil {
				e.drop(replicaAddr)
				return failed(err)
			}
			me, _ := v.Myself()
			if me.Primary {
				return e.awaitOwner(ctx, res, me.ID, slots, observe, deadline)
			}
			if me.PrimaryID != res.PrimaryID {
				return failed(fmt.Errorf("%s now follows %s instead of %s: roles changed, not retrying", replicaAddr, me.PrimaryID, res.PrimaryID))
			}
			// A sent attempt is given its whole window, past the deadline too: the server
			// may still complete it until then, and a failover that lands after the
			// operator gave up would go unreported. No attempt is sent after the deadline.
			if now := e.now(); now.After(retryAt) {
				if now.After(deadline) {
					res.Outcome = FailoverTimedOut
					res.Message = fmt.Sprintf("%s still a replica of %s after %s (%d attempt(s))", replicaAddr, res.PrimaryID, timeout, res.Sent)
					return res, nil
				}
				break
			}
			if err := sleep(ctx, failoverPoll); err != nil {
				return failed(err)
			}
		}
	}
}

// inSync says why the replica (conn c) is not in sync with its primary at primaryAddr, ""
// when it is.
func (e *Executor) inSync(ctx context.Context, c valkey.Conn, primaryAddr string) string {
	r, err := c.ReplicationState(ctx)
	if err != nil {
		return err.Error()
	}
	if !r.Replica() || !r.MasterLinkUp || r.SyncInProgress {
		return fmt.Sprintf("%s is not in sync: role %s, link up %t, full sync running %t", c.Addr(), r.Role, r.MasterLinkUp, r.SyncInProgress)
	}
	pc, err := e.Conn(primaryAddr)
	if err != nil {
		return fmt.Sprintf("primary %s unreachable: %v", primaryAddr, err)
	}
	p, err := pc.ReplicationState(ctx)
	if err != nil {
		e.drop(primaryAddr)
		return fmt.Sprintf("primary %s: %v", primaryAddr, err)
	}
	if lag := p.Offset - r.Offset; lag > DefaultMaxFailoverLag {
		return fmt.Sprintf("%s lags %d bytes behind its primary %s", c.Addr(), lag, primaryAddr)
	}
	return ""
}

// awaitAgreement polls the members until every reachable one names the same owner for
// every slot, or the deadline passes.
func (e *Executor) awaitAgreement(ctx context.Context, observe []string, deadline time.Time) bool {
	for {
		if snap := e.views(ctx, observe); snap.Agree() {
			return true
		}
		if e.now().After(deadline) || sleep(ctx, failoverPoll) != nil {
			return false
		}
	}
}

// awaitOwner waits until every reachable member names id as the owner of slots.
func (e *Executor) awaitOwner(ctx context.Context, res FailoverResult, id string, slots []valkey.SlotRange, observe []string, deadline time.Time) (FailoverResult, error) {
	for {
		snap := e.views(ctx, observe)
		behind, why := "", ""
		for _, v := range snap.Views {
			o := v.Owners()
			for _, r := range slots {
				for s := r.Start; s <= r.End; s++ {
					if o[s] != id && behind != v.Addr {
						behind, why = v.Addr, staleOwner(v, id, s, o[s])
					}
				}
			}
		}
		if behind == "" {
			res.Outcome, res.Message = FailoverCompleted, fmt.Sprintf("%s (%s) is primary of slots %v", res.Replica, id, slots)
			return res, nil
		}
		if e.now().After(deadline) {
			res.Outcome, res.Message = FailoverTimedOut, fmt.Sprintf("%s (%s) is primary but %s does not know it yet: %s", res.Replica, id, behind, why)
			return res, nil
		}
		if err := sleep(ctx, failoverPoll); err != nil {
			res.Outcome, res.Message = FailoverFailed, err.Error()
			return res, err
		}
	}
}

// staleOwner says what member view v believes of slot and of the new owner id: the
// evidence a timed-out failover's event carries.
func staleOwner(v valkey.View, id string, slot int, owner string) string {
	seen := func(n valkey.Node) string {
		role := "primary"
		if n.Replica {
			role = "replica of " + n.PrimaryID
		}
		return fmt.Sprintf("%s at %s, %s, config epoch %d, connected %t, fail %t, pfail %t, handshake %t, noaddr %t",
			n.ID, n.Addr, role, n.ConfigEpoch, n.Connected, n.Fail, n.PFail, n.Handshake, n.NoAddr)
	}
	var b strings.Builder
	if owner == "" {
		fmt.Fprintf(&b, "slot %d has no owner there", slot)
	} else if o, ok := v.Node(owner); ok {
		fmt.Fprintf(&b, "slot %d owned there by %s", slot, seen(o))
	} else {
		fmt.Fprintf(&b, "slot %d owned there by %s", slot, owner)
	}
	if n, ok := v.Node(id); ok {
		fmt.Fprintf(&b, "; it sees %s", seen(n))
	} else {
		fmt.Fprintf(&b, "; it does not know %s", id)
	}
	return b.String()
}

// views reads CLUSTER NODES from the members that answer; the others are skipped (a
// primary being replaced may be gone already).
func (e *Executor) views(ctx context.Context, addrs []string) valkey.Snapshot {
	var snap valkey.Snapshot
	for _, a := range addrs {
		c, err := e.Conn(a)
		if err != nil {
			continue
		}
		v, err := c.ClusterNodes(ctx)
		if err != nil {
			e.drop(a)
			continue
		}
		snap.Views = append(snap.Views, v)
	}
	return snap
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}
