package cluster

import (
	"context"
	"fmt"
	"sort"
	"time"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	"github.com/opsuite/suite/services/valkey-operator/internal/executor"
	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// steadyResync is how often a converged cluster is observed again, reading only: a member
// can fail without any Kubernetes object changing.
const steadyResync = 15 * time.Second

// roll updates one outdated ValkeyNode per pass, shard by shard, a shard's replicas
// before its primary, each after every replica finished its sync; a primary only after a
// proactive failover to an in-sync replica, or, when it has none, as replaceAlone says. It runs only on a
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
	// A replica replaced before must have finished its sync before the next node goes:
	// until then it is no copy of its shard's keys.
	if name := p.syncing(snap, set); name != "" {
		p.progressMsg = fmt.Sprintf("Waiting for replica %s to finish syncing with its primary before the next node is replaced", name)
		return p.ctl.cfg.Poll
	}
	// Nor before every member serves and knows the shape: a replica replaced by a new
	// node must be known as its primary's replica by the other primaries, or they refuse
	// it their votes when it is asked to fail over (Redis 7.0 did, 10 times in a row).
	if down := p.stateNotOK(snap, set); down != "" {
		p.progressMsg = fmt.Sprintf("Waiting for %s before the next node is replaced", down)
		return p.ctl.cfg.Poll
	}
	if stale := p.staleView(snap, set); stale != "" {
		p.progressMsg = fmt.Sprintf("Waiting for %s before the next node is replaced", stale)
		return p.ctl.cfg.Poll
	}
	next := rollOrder(outdated, role, set)[0]
	p.progressMsg = fmt.Sprintf("Rolling ValkeyNode %s (%d left)", next.node.Name, len(outdated))
	if me, ok := role(next); ok && me.Primary && me.SlotTotal() > 0 {
		if replica, ok := p.failoverTarget(snap, set, me); ok {
			return p.failover(ctx, exec, next, replica, set)
		}
		if !p.replaceAlone(next) {
			return p.ctl.cfg.Poll
		}
	}
	if !p.update(ctx, next) {
		return p.retry()
	}
	p.ctl.setRolling(p.c, true)
	return p.ctl.cfg.Poll
}

// rollOrder sorts the outdated members shard by shard (the shard a member serves: its
// primary's, by the primary's shard index), and within a shard its replicas before its
// primary, so each shard is finished before the next one starts.
func rollOrder(outdated []member, role func(member) (valkey.Node, bool), set nodeSet) []member {
	shardOf := map[string]int32{} // node id of a primary -> its shard index
	for _, m := range set.desired {
		if me, ok := role(m); ok && me.Primary {
			shardOf[me.ID] = m.node.Spec.ShardIndex
		}
	}
	served := func(m member) int32 {
		me, ok := role(m)
		if !ok {
			return m.node.Spec.ShardIndex
		}
		id := me.ID
		if me.Replica {
			id = me.PrimaryID
		}
		if s, ok := shardOf[id]; ok {
			return s
		}
		return m.node.Spec.ShardIndex
	}
	out := append([]member(nil), outdated...)
	sort.SliceStable(out, func(i, j int) bool {
		si, sj := served(out[i]), served(out[j])
		if si != sj {
			return si < sj
		}
		a, _ := role(out[i])
		b, _ := role(out[j])
		if a.Primary != b.Primary {
			return !a.Primary // replicas first
		}
		return out[i].node.Name < out[j].node.Name
	})
	return out
}

// syncing names a replica whose link to its primary is down or whose full sync is still
// running ("" when every replica is in sync).
func (p *pass) syncing(snap valkey.Snapshot, set nodeSet) string {
	for _, m := range set.desired {
		v, ok := snap.View(m.addr)
		if !ok || !v.Repl.Replica() {
			continue
		}
		if !v.Repl.MasterLinkUp || v.Repl.SyncInProgress {
			return m.node.Name
		}
	}
	return ""
}

// replaceAlone decides for a primary serving slots that no in-sync replica can take over
// from: with replicas asked for, wait for one; with none, replace it only when the user
// allowed it (spec.rollout.allowPrimaryWithoutReplica), else stop the roll, saying how to
// go on.
func (p *pass) replaceAlone(primary member) bool {
	c := p.c
	shard := primary.node.Spec.ShardIndex
	if c.Spec.Replicas > 0 {
		p.progressMsg = fmt.Sprintf("Waiting for a replica of primary %s (shard %d) to be in sync before the primary is replaced", primary.node.Name, shard)
		return false
	}
	loss := "its keys are lost (spec.persistence is unset)"
	if c.Spec.Persistence != nil {
		loss = "its keys wait on its volume"
	}
	if c.Spec.Rollout != nil && c.Spec.Rollout.AllowPrimaryWithoutReplica {
		p.warn(valkeyv1.EventPrimaryReplacedAlone, fmt.Sprintf("Replacing primary %s (shard %d) with no replica to take over, as spec.rollout.allowPrimaryWithoutReplica allows: the shard serves no client until the new pod is up and %s", primary.node.Name, shard, loss))
		return true
	}
	msg := fmt.Sprintf("Rolling update stopped before primary %s (shard %d): it has no replica to hand its slots to, so replacing it stops the shard and %s. Set spec.replicas to 1 or more (the roll then fails over first), or set spec.rollout.allowPrimaryWithoutReplica to true to replace it anyway", primary.node.Name, shard, loss)
	p.progress, p.progressMsg = valkeyv1.ReasonRollBlocked, msg
	p.warnOn(valkeyv1.ConditionProgressing, metav1.ConditionTrue, valkeyv1.ReasonRollBlocked, valkeyv1.EventRollBlocked, msg)
	return false
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

// failoverTarget is a healthy replica of primary whose link is up and whose sync
// finished; the executor checks its offset before it fails over.
func (p *pass) failoverTarget(snap valkey.Snapshot, set nodeSet, primary valkey.Node) (member, bool) {
	for _, m := range set.desired {
		v, ok := snap.View(m.addr)
		if !ok {
			continue
		}
		me, ok := v.Myself()
		if ok && me.Replica && me.PrimaryID == primary.ID && me.Healthy() && v.Repl.MasterLinkUp && !v.Repl.SyncInProgress {
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
		p.failedOver = true
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
