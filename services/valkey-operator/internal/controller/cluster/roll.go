package cluster

import (
	"context"
	"fmt"
	"sort"
	"time"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	"github.com/opsuite/suite/services/valkey-operator/internal/executor"
	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
)

// steadyResync is how often a converged cluster is observed again, reading only: a member
// can fail without any Kubernetes object changing.
const steadyResync = 15 * time.Second

// roll updates one outdated ValkeyNode per pass, replicas before primaries, after a
// proactive failover away from a primary that has an in-sync replica. It runs only on a
// converged cluster whose members are all ready, so a shard is never rolled while its
// other members are unhealthy.
func (p *pass) roll(ctx context.Context, exec *executor.Executor, snap valkey.Snapshot, set nodeSet) time.Duration {
	var outdated []member
	for _, m := range set.desired {
		if m.outdated() {
			outdated = append(outdated, m)
		}
	}
	if len(outdated) == 0 {
		down := p.stateNotOK(snap, set)
		if down == "" {
			down = p.staleView(snap, set)
		}
		p.healthy = p.readyShards == p.c.Spec.Shards && p.slotsAssigned != nil && *p.slotsAssigned && down == ""
		if p.healthy {
			p.ctl.setRolling(p.c, false)
		}
		if !p.healthy {
			p.progress, p.progressMsg = valkeyv1.ReasonReconciling, fmt.Sprintf("%d of %d shards are ready", p.readyShards, p.c.Spec.Shards)
			if down != "" {
				p.progressMsg = fmt.Sprintf("Waiting for %s", down)
			}
			return p.ctl.cfg.Poll
		}
		return steadyResync
	}
	p.progress = valkeyv1.ReasonUpdatingNodes
	for _, m := range set.desired {
		if m.liveConfigFailed() {
			p.progressMsg = fmt.Sprintf("Waiting for ValkeyNode %s to apply its live config (LiveConfigApplied=False)", m.node.Name)
			return p.ctl.cfg.Poll
		}
	}
	role := func(m member) (valkey.Node, bool) {
		v, ok := snap.View(m.addr)
		if !ok {
			return valkey.Node{}, false
		}
		return v.Myself()
	}
	sort.SliceStable(outdated, func(i, j int) bool {
		a, _ := role(outdated[i])
		b, _ := role(outdated[j])
		if a.Primary != b.Primary {
			return !a.Primary // replicas first
		}
		return outdated[i].node.Name < outdated[j].node.Name
	})
	next := outdated[0]
	p.progressMsg = fmt.Sprintf("Rolling ValkeyNode %s (%d left)", next.node.Name, len(outdated))
	if me, ok := role(next); ok && me.Primary && me.SlotTotal() > 0 {
		if replica, ok := p.failoverTarget(snap, set, me); ok {
			return p.failover(ctx, exec, next, replica, set)
		}
	}
	if !p.update(ctx, next) {
		return p.retry()
	}
	p.ctl.setRolling(p.c, true)
	return p.ctl.cfg.Poll
}

// stateNotOK names a member whose cluster_state is not ok yet (it refuses clients with
// CLUSTERDOWN): the cluster is not Ready before every member serves.
func (p *pass) stateNotOK(snap valkey.Snapshot, set nodeSet) string {
	for _, m := range set.desired {
		if v, ok := snap.View(m.addr); ok && !v.Info.OK() {
			return m.node.Name + " to report cluster_state ok"
		}
	}
	return ""
}

// staleView names a member whose own table does not show the desired shape yet (gossip
// has not reached it): every member must answer clients with the same topology, each
// primary with its replicas, before the cluster is Ready.
func (p *pass) staleView(snap valkey.Snapshot, set nodeSet) string {
	want := int(p.c.Spec.Replicas)
	for _, m := range set.desired {
		v, ok := snap.View(m.addr)
		if !ok {
			continue
		}
		owners := 0
		for _, n := range v.Primaries() {
			if n.SlotTotal() == 0 {
				return m.node.Name + " to learn the role of " + n.Addr
			}
			owners++
			if len(v.ReplicasOf(n.ID)) < want {
				return m.node.Name + " to see every replica of " + n.Addr
			}
		}
		if owners != int(p.c.Spec.Shards) {
			return m.node.Name + " to see every shard"
		}
	}
	return ""
}

// failoverTarget is a healthy replica of primary; the executor checks that it is in sync
// before it fails over.
func (p *pass) failoverTarget(snap valkey.Snapshot, set nodeSet, primary valkey.Node) (member, bool) {
	for _, m := range set.desired {
		v, ok := snap.View(m.addr)
		if !ok {
			continue
		}
		me, ok := v.Myself()
		if ok && me.Replica && me.PrimaryID == primary.ID && me.Healthy() {
			return m, true
		}
	}
	return member{}, false
}

// failover hands primary's slots to replica before primary's pod is replaced.
func (p *pass) failover(ctx context.Context, exec *executor.Executor, primaryM member, replica member, set nodeSet) time.Duration {
	shard := primaryM.node.Spec.ShardIndex
	var observe []string
	for _, m := range set.desired {
		observe = append(observe, m.addr)
	}
	res, err := exec.Failover(ctx, replica.addr, observe, p.ctl.cfg.FailoverTimeout)
	if res.Sent > 0 {
		p.normalAbout(replica.node, valkeyv1.EventFailoverInitiated, fmt.Sprintf("Sent CLUSTER FAILOVER to replica %s to take over from primary %s (shard %d) before its pod is replaced", replica.node.Name, primaryM.node.Name, shard))
	}
	switch res.Outcome {
	case executor.FailoverCompleted:
		p.ctl.metrics.Add(p.c.Namespace, p.c.Name, counterFailovers, 1)
		p.normalAbout(replica.node, valkeyv1.EventFailoverCompleted, fmt.Sprintf("Replica %s is the primary of shard %d", replica.node.Name, shard))
		return time.Second
	case executor.FailoverNotReady:
		p.progressMsg = fmt.Sprintf("Waiting for replica %s to catch up before failing over: %s", replica.node.Name, res.Message)
		return p.ctl.cfg.Poll
	case executor.FailoverTimedOut:
		p.warn(valkeyv1.EventFailoverTimeout, fmt.Sprintf("Replica %s did not become primary within %s: %s", replica.node.Name, p.ctl.cfg.FailoverTimeout, res.Message))
		p.progressMsg = fmt.Sprintf("Failover to %s timed out", replica.node.Name)
		return p.retry()
	default:
		p.warn(valkeyv1.EventFailoverFailed, fmt.Sprintf("CLUSTER FAILOVER on %s failed: %v", replica.node.Name, err))
		p.progressMsg = fmt.Sprintf("Failover to %s failed: %v", replica.node.Name, err)
		return p.retry()
	}
}
