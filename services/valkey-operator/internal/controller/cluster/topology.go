package cluster

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	"github.com/opsuite/suite/services/valkey-operator/internal/planner"
	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// topology observes the members, plans the next data-plane steps and runs them; once the
// topology converged it deletes drained nodes and rolls one outdated node. It returns how
// soon to look again (0: done until something changes).
func (p *pass) topology(ctx context.Context, set nodeSet) time.Duration {
	c := p.c
	opts, err := p.ctl.cfg.Options(ctx, c)
	if err != nil {
		p.fail(valkeyv1.ReasonSystemUsersACLError, "", fmt.Sprintf("Cannot log in to the members: %v", err))
		return p.retry()
	}
	exec := p.ctl.executorFor(c, opts)

	// Every member with an address is observed, ready or not: a pod being replaced may
	// already answer (empty, under a new id) and its shard must be recovered first.
	var addrs []string
	for _, m := range append(append([]member(nil), set.desired...), set.removed...) {
		if m.addr != "" {
			addrs = append(addrs, m.addr)
		}
	}
	snap, unreachable := exec.Observe(ctx, addrs)
	p.observe(snap, set)
	p.reportServedShards(ctx, snap, set)
	if p.takeOverLost(ctx, exec, snap, set, unreachable) {
		p.progress, p.progressMsg = valkeyv1.ReasonReconciling, "Promoted replicas of lost primaries"
		return time.Second
	}

	// A member whose claim is on a lost node never comes back by itself.
	p.lostMembers(ctx, snap, set, unreachable)

	// Members still to come: wait for their pods (a first creation, a scale-out, a pod
	// being replaced).
	var notReady, unanswered []string
	for _, m := range set.desired {
		if !m.ready() {
			notReady = append(notReady, m.node.Name)
		} else if err := unreachable[m.addr]; err != nil {
			unanswered = append(unanswered, fmt.Sprintf("%s (%v)", m.node.Name, err))
		}
	}
	for _, pos := range set.missing {
		notReady = append(notReady, fmt.Sprintf("%s-%d-%d", c.Name, pos.Shard, pos.Index))
	}
	switch {
	case len(notReady) > 0:
		p.waitForMembers(ctx, set, append(notReady, unanswered...))
		return p.ctl.cfg.Poll
	case len(unanswered) > 0:
		p.membersUnreachable(unanswered)
		return p.ctl.cfg.Poll
	}

	// A restore gives each primary its backed-up slots before the members meet.
	if !p.restoreSlots(ctx, exec, snap, set) {
		return p.ctl.cfg.Poll
	}
	d := planner.Desired{Shards: int(c.Spec.Shards), Replicas: int(c.Spec.Replicas)}
	for _, m := range set.desired {
		d.Members = append(d.Members, planner.Member{Addr: m.addr, BusPort: p.ctl.cfg.BusPort(m.node), Host: m.node.Status.NodeName,
			Shard: strconv.Itoa(int(m.node.Spec.ShardIndex)), PreferPrimary: m.node.Spec.NodeIndex == 0})
	}
	plan := planner.Compute(d, snap)
	switch {
	case len(plan.Steps) > 0:
		done, err := exec.Run(ctx, plan.Steps)
		p.announceSteps(snap, set, plan.Steps[:done])
		p.progressFor(plan.Steps, set)
		primary, behind := valkey.ReplicasBehind(err)
		var since time.Time
		if behind {
			p.acksRefused, since = true, p.ctl.replicasBehindSince(p.c, p.now)
		}
		switch {
		case err == nil:
		case staleRole(err):
			log.FromContext(ctx).Info("Data-plane step went to a member no longer primary; observing again", "error", err.Error())
		case behind && p.now.Sub(since) < p.ctl.cfg.ReplicaAckGrace:
			// Nothing was lost or half done: the refused command was not applied, and the
			// next pass sends it again.
			log.FromContext(ctx).Info("Slot move waits for replicas to acknowledge it", "primary", primary, "since", since, "error", err.Error())
			p.progressMsg = fmt.Sprintf("Waiting for the replicas of %s to acknowledge slot changes", primary)
		default:
			log.FromContext(ctx).Info("Data-plane step failed; observing again", "error", err.Error())
			if behind {
				err = fmt.Errorf("the replicas of %s have not acknowledged slot changes for over %s: %w", primary, p.ctl.cfg.ReplicaAckGrace, err)
			}
			p.stepFailed(plan.Steps[done], set, err)
		}
		return time.Second
	case plan.Wait != "":
		p.progressFor(nil, set)
		if p.progress == "" {
			p.progress, p.progressMsg = valkeyv1.ReasonReconciling, plan.Wait
		} else {
			p.progressMsg = plan.Wait
		}
		return p.ctl.cfg.Poll
	}

	// Converged. Drained nodes are gone from every member's table: delete them.
	if len(set.removed) > 0 {
		return p.removeDrained(ctx, snap, set)
	}
	p.formed, p.formedReason, p.formedMsg = metav1.ConditionTrue, valkeyv1.ReasonTopologyComplete, "All nodes joined cluster"
	return p.roll(ctx, exec, snap, set)
}

// observe fills the status numbers from the first member that answered.
func (p *pass) observe(snap valkey.Snapshot, set nodeSet) {
	seed, found := p.seedView(snap, set)
	if !found {
		return
	}
	owners := seed.Owners()
	all := true
	for _, o := range owners {
		if o == "" {
			all = false
			break
		}
	}
	p.slotsAssigned = &all
	for _, n := range seed.Primaries() {
		if n.SlotTotal() == 0 || n.Fail {
			continue
		}
		p.shards++
		healthy := 0
		for _, r := range seed.ReplicasOf(n.ID) {
			if r.Healthy() && inSync(snap, r.ID) {
				healthy++
			}
		}
		if n.Healthy() && healthy >= int(p.c.Spec.Replicas) {
			p.readyShards++
		}
	}
}

// inSync: the replica id answered and its link to its primary is up with no full sync
// running. Until then it holds no copy of the shard (a first sync can take seconds:
// diskless syncs wait for more replicas), and the shard is not ready.
func inSync(snap valkey.Snapshot, id string) bool {
	for _, v := range snap.Views {
		if me, ok := v.Myself(); ok && me.ID == id {
			return v.Repl.MasterLinkUp && !v.Repl.SyncInProgress
		}
	}
	return false
}

// waitForMembers sets the conditions of a cluster waiting for member pods.
func (p *pass) waitForMembers(ctx context.Context, set nodeSet, notReady []string) {
	// A shard is missing while none of its positions has a ready member.
	haveShard := map[int32]bool{}
	for _, m := range set.desired {
		if m.ready() {
			haveShard[m.node.Spec.ShardIndex] = true
		}
	}
	reason, msg, event := valkeyv1.ReasonMissingReplicas, "Waiting for replicas", valkeyv1.EventWaitingForReplicas
	eventMsg := fmt.Sprintf("Waiting for %d member(s): %s", len(notReady), strings.Join(notReady, ", "))
	if int32(len(haveShard)) < p.c.Spec.Shards {
		reason, msg, event = valkeyv1.ReasonMissingShards, "Waiting for shards", valkeyv1.EventWaitingForShards
		eventMsg = fmt.Sprintf("%d of %d shards exist", len(haveShard), p.c.Spec.Shards)
	}
	p.formed, p.formedReason, p.formedMsg = metav1.ConditionFalse, reason, msg
	p.normalOn(valkeyv1.ConditionClusterFormed, metav1.ConditionFalse, reason, event, eventMsg)
	if name, why := p.unschedulable(ctx); name != "" && p.degraded == "" {
		p.degraded, p.degradedMsg = valkeyv1.ReasonPodUnschedulable, fmt.Sprintf("Pod %s cannot be scheduled: %s", name, why)
	}
	p.progress = valkeyv1.ReasonAddingNodes
	switch {
	case p.neverReady():
		p.progress = valkeyv1.ReasonInitializing
	case p.ctl.isRolling(p.c) || anyOutdated(set):
		p.progress = valkeyv1.ReasonUpdatingNodes
	}
	p.progressMsg = "Waiting for " + strings.Join(notReady, ", ")
}

// membersUnreachable reports members whose pods are ready and which do not answer the
// operator: a partition between the operator and the data plane, or an overloaded member.
// Nothing is planned while the operator's view is incomplete; a member the other members
// see fail is taken over all the same (takeOverLost).
func (p *pass) membersUnreachable(unanswered []string) {
	msg := fmt.Sprintf("The operator cannot reach %d member(s) whose pods are ready: %s; it changes nothing about the cluster until they answer or the other members see them fail",
		len(unanswered), strings.Join(unanswered, ", "))
	p.degraded, p.degradedMsg = valkeyv1.ReasonMembersUnreachable, msg
	p.warnOnce(valkeyv1.ReasonMembersUnreachable, valkeyv1.EventMembersUnreachable, msg)
}

// anyOutdated: a member does not hold its desired spec yet (a rolling update is due).
func anyOutdated(set nodeSet) bool {
	for _, m := range set.desired {
		if m.outdated() {
			return true
		}
	}
	return false
}

// neverReady: the cluster has not served a slot yet (its first creation): its progress
// reads Initializing rather than AddingNodes.
func (p *pass) neverReady() bool {
	return p.before.Shards == 0 && p.shards == 0
}

// progressFor names the work a plan does: slot moves first, then joining members.
func (p *pass) progressFor(steps []planner.Step, set nodeSet) {
	moving, joining := false, false
	for _, s := range steps {
		switch s.Op {
		case planner.SetSlotImporting, planner.SetSlotMigrating, planner.MigrateKeys, planner.SetSlotNode, planner.SetSlotStable:
			moving = true
		case planner.Meet, planner.AddSlots, planner.Replicate, planner.Reset, planner.SetConfigEpoch:
			joining = true
		}
	}
	switch {
	case moving:
		p.progress, p.progressMsg = valkeyv1.ReasonRebalancingSlots, "Moving slots between shards"
		if len(set.removed) > 0 {
			p.progressMsg = "Draining the slots of removed shards"
		}
		p.formed, p.formedReason, p.formedMsg = metav1.ConditionTrue, valkeyv1.ReasonTopologyComplete, "All nodes joined cluster"
		if len(set.removed) > 0 {
			p.normalOn(valkeyv1.ConditionProgressing, metav1.ConditionTrue, valkeyv1.ReasonRebalancingSlots,
				valkeyv1.EventSlotsDraining, fmt.Sprintf("Migrating slots away from %d removed node(s)", len(set.removed)))
		} else {
			p.normalOn(valkeyv1.ConditionProgressing, metav1.ConditionTrue, valkeyv1.ReasonRebalancingSlots,
				valkeyv1.EventSlotsRebalancing, fmt.Sprintf("Rebalancing slots over %d shards", p.c.Spec.Shards))
		}
	case joining:
		p.progress, p.progressMsg = valkeyv1.ReasonAddingNodes, "Adding nodes to cluster"
		reason, msg := valkeyv1.ReasonMissingReplicas, "Waiting for replicas"
		if p.shards < p.c.Spec.Shards {
			reason, msg = valkeyv1.ReasonMissingShards, "Waiting for shards"
		}
		p.formed, p.formedReason, p.formedMsg = metav1.ConditionFalse, reason, msg
		if p.neverReady() {
			p.progress = valkeyv1.ReasonInitializing
		}
	default:
		if len(set.removed) > 0 {
			p.progress, p.progressMsg = valkeyv1.ReasonRebalancingSlots, "Removing drained nodes"
		}
	}
}

// announceSteps records the documented event of every completed action.
func (p *pass) announceSteps(snap valkey.Snapshot, set nodeSet, done []planner.Step) {
	sum := planner.Summarize(done)
	moved := 0
	for _, m := range sum.Moves {
		moved += m.Slots
	}
	p.ctl.metrics.Add(p.c.Namespace, p.c.Name, counterSlotMoves, moved)
	p.ctl.metrics.Add(p.c.Namespace, p.c.Name, counterFailovers, len(sum.TakenOver))
	if len(sum.TakenOver) > 0 {
		p.failedOver = true
	}
	shardOf := p.shardOfAddr(set)
	nodeAt := map[string]*valkeyv1.ValkeyNode{}
	for _, m := range append(append([]member(nil), set.desired...), set.removed...) {
		if m.addr != "" {
			nodeAt[m.addr] = m.node
		}
	}
	about := func(addr string) runtime.Object {
		if n, ok := nodeAt[addr]; ok {
			return n
		}
		return nil
	}
	for _, a := range sum.Primaries {
		ranges := make([]string, len(a.Ranges))
		for i, r := range a.Ranges {
			ranges[i] = r.String()
		}
		p.normalAbout(about(a.Addr), valkeyv1.EventPrimaryCreated, fmt.Sprintf("Created primary %s with slots %s", a.Addr, strings.Join(ranges, ",")))
	}
	for _, r := range sum.Replicas {
		p.normalAbout(about(r.Addr), valkeyv1.EventReplicaCreated, fmt.Sprintf("Created replica %s for primary %s (shard %s)", r.Addr, r.PrimaryID, shardOf[addrOf(snap, r.PrimaryID)]))
	}
	if len(sum.Met) > 0 {
		p.normal(valkeyv1.EventClusterMeetBatch, fmt.Sprintf("Introduced %d isolated node(s) to the cluster", len(sum.Met)))
	}
	if len(sum.Primaries) > 0 {
		p.normal(valkeyv1.EventPrimariesCreated, fmt.Sprintf("Assigned slots to %d new primary node(s)", len(sum.Primaries)))
	}
	if len(sum.Replicas) > 0 {
		p.normal(valkeyv1.EventReplicasAttached, fmt.Sprintf("Attached %d replica node(s)", len(sum.Replicas)))
	}
	// How many members each node was forgotten on, for the message.
	on := map[string]int{}
	for _, s := range done {
		if s.Op == planner.Forget {
			on[s.NodeID]++
		}
	}
	for _, b := range sum.EpochBumped {
		p.normal(valkeyv1.EventConfigEpochBumped, fmt.Sprintf("Bumped the config epoch on %s: the replica that took over the slots of failed primary %s claimed them with an epoch the other members did not accept", b.Addr, b.PrimaryID))
	}
	for _, id := range sum.Forgotten {
		p.normal(valkeyv1.EventStaleNodeForgotten, fmt.Sprintf("Forgot node %s on %d member(s)", id, on[id]))
	}
}

// staleRole: the step went to a member that stopped being a primary since it was observed
// (a failover in between); the next pass observes again and plans from its new role.
func staleRole(err error) bool {
	return strings.Contains(err.Error(), "only with masters")
}

// stepFailed turns a failed step into Degraded and its Warning event.
func (p *pass) stepFailed(s planner.Step, set nodeSet, err error) {
	msg := fmt.Sprintf("%s: %v", s, err)
	switch s.Op {
	case planner.Meet:
		p.degraded, p.degradedMsg = valkeyv1.ReasonNodeAddFailed, "Failed to add node: "+msg
		p.warnOnce(valkeyv1.ReasonNodeAddFailed, valkeyv1.EventClusterMeetFailed, fmt.Sprintf("CLUSTER MEET %s -> %s failed: %v", s.On, s.Addr, err))
	case planner.SetConfigEpoch:
		p.degraded, p.degradedMsg = valkeyv1.ReasonNodeAddFailed, "Failed to add node: "+msg
		p.warnOnce(valkeyv1.ReasonNodeAddFailed, valkeyv1.EventClusterMeetFailed, fmt.Sprintf("CLUSTER SET-CONFIG-EPOCH %d on %s failed: %v", s.Epoch, s.On, err))
	case planner.AddSlots:
		p.degraded, p.degradedMsg = valkeyv1.ReasonNodeAddFailed, "Failed to assign slots: "+msg
		p.warnOnce(valkeyv1.ReasonNodeAddFailed, valkeyv1.EventSlotAssignmentFailed, "Failed to assign slots: "+msg)
	case planner.Replicate, planner.Reset:
		p.degraded, p.degradedMsg = valkeyv1.ReasonNodeAddFailed, "Failed to create replica: "+msg
		p.warnOnce(valkeyv1.ReasonNodeAddFailed, valkeyv1.EventReplicaCreationFailed, "Failed to create replica: "+msg)
	case planner.Forget:
		p.degraded, p.degradedMsg = valkeyv1.ReasonNodeAddFailed, "Failed to forget node: "+msg
		p.warnOnce(valkeyv1.ReasonNodeAddFailed, valkeyv1.EventNodeForgetFailed, "Failed to forget node: "+msg)
	default:
		p.degraded, p.degradedMsg = valkeyv1.ReasonRebalanceFailed, "Slot rebalancing failed: "+msg
		event := valkeyv1.EventSlotRebalanceFailed
		if len(set.removed) > 0 {
			event = valkeyv1.EventDrainFailed
		}
		p.warnOnce(valkeyv1.ReasonRebalanceFailed, event, "Slot rebalancing failed: "+msg)
	}
}

// warnOnce records a Warning event once the status moves Degraded to True with reason.
func (p *pass) warnOnce(reason, event, message string) {
	p.warnOn(valkeyv1.ConditionDegraded, metav1.ConditionTrue, reason, event, message)
}

// removeDrained deletes the removed nodes no member knows any more.
func (p *pass) removeDrained(ctx context.Context, snap valkey.Snapshot, set nodeSet) time.Duration {
	p.progress, p.progressMsg = valkeyv1.ReasonRebalancingSlots, "Removing drained nodes"
	p.formed, p.formedReason, p.formedMsg = metav1.ConditionTrue, valkeyv1.ReasonTopologyComplete, "All nodes joined cluster"
	for _, m := range set.removed {
		id := m.node.Status.ValkeyNodeID
		if v, ok := snap.View(m.addr); ok {
			if me, ok := v.Myself(); ok {
				id = me.ID
			}
		}
		if id != "" && knownBy(snap, set, id) {
			continue // the planner forgets it first
		}
		if !p.remove(ctx, m) {
			return p.retry()
		}
	}
	return time.Second
}

// knownBy: some desired member still lists node id.
func knownBy(snap valkey.Snapshot, set nodeSet, id string) bool {
	for _, m := range set.desired {
		if v, ok := snap.View(m.addr); ok {
			if _, ok := v.Node(id); ok {
				return true
			}
		}
	}
	return false
}

func (p *pass) shardOfAddr(set nodeSet) map[string]string {
	out := map[string]string{}
	for _, m := range append(append([]member(nil), set.desired...), set.removed...) {
		if m.addr != "" {
			out[m.addr] = fmt.Sprint(m.node.Spec.ShardIndex)
		}
	}
	return out
}

// addrOf is the address of node id in any view.
func addrOf(snap valkey.Snapshot, id string) string {
	for _, v := range snap.Views {
		if n, ok := v.Node(id); ok {
			if n.Myself {
				return v.Addr
			}
			return n.Addr
		}
	}
	return ""
}
