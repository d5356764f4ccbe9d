package cluster

import (
	"context"
	"fmt"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	"github.com/opsuite/suite/services/valkey-operator/internal/executor"
	"github.com/opsuite/suite/services/valkey-operator/internal/planner"
	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
)

// takeOverLost promotes a replica of every primary whose pod is gone: its ValkeyNode is
// not ready and its server does not answer, while the others still route its slots to it.
// Waiting for the cluster's own election (cluster-node-timeout) is not safe there: a pod
// without persistence that comes back at its old IP is an empty primary its replicas
// resynchronise from, wiping their copy of the shard. A takeover keeps the replica's data;
// the member that comes back joins as a replica. It returns whether it sent any.
func (p *pass) takeOverLost(ctx context.Context, exec *executor.Executor, snap valkey.Snapshot, set nodeSet, unreachable map[string]error) bool {
	seed, ok := p.seedView(snap, set)
	if !ok {
		return false
	}
	sent := false
	for _, m := range set.desired {
		if m.ready() && unreachable[m.addr] == nil {
			continue
		}
		if _, answered := snap.View(m.addr); answered {
			continue // it answers: not gone (maybe back empty, handled by the planner)
		}
		id := m.node.Status.ValkeyNodeID
		if id == "" {
			continue
		}
		old, known := seed.Node(id)
		if !known || !old.Primary || old.SlotTotal() == 0 {
			continue
		}
		// A ready pod that only the operator cannot reach may be serving writes: a
		// takeover would discard those its replica has not received yet. It is lost once
		// the members agree it failed (the seed's view holds the majority's fail flag).
		if m.ready() && !old.Fail {
			continue
		}
		replica, ok := bestReplica(snap, id)
		if !ok {
			continue
		}
		done, err := exec.Run(ctx, []planner.Step{{Op: planner.Takeover, On: replica.Addr, NodeID: id}})
		if err != nil || done == 0 {
			p.degraded, p.degradedMsg = valkeyv1.ReasonNodeAddFailed, fmt.Sprintf("Failed to promote a replica of lost primary %s: %v", m.node.Name, err)
			p.warnOnce(valkeyv1.ReasonNodeAddFailed, valkeyv1.EventReplicaCreationFailed, p.degradedMsg)
			continue
		}
		p.ctl.metrics.Add(p.c.Namespace, p.c.Name, counterFailovers, 1)
		p.failedOver = true
		p.normalAbout(m.node, valkeyv1.EventReplicasTakenOver, fmt.Sprintf("Promoted replica %s with CLUSTER FAILOVER TAKEOVER: primary %s (shard %d) is gone", replica.Addr, m.node.Name, m.node.Spec.ShardIndex))
		sent = true
	}
	return sent
}

// bestReplica is the answering replica of primary id that got furthest in its stream.
func bestReplica(snap valkey.Snapshot, id string) (valkey.View, bool) {
	var best valkey.View
	found := false
	for _, v := range snap.Views {
		me, ok := v.Myself()
		if !ok || !me.Replica || me.PrimaryID != id {
			continue
		}
		if !found || v.Repl.Offset > best.Repl.Offset {
			best, found = v, true
		}
	}
	return best, found
}

// seedView is the view of the desired member that knows the most nodes (one that just
// came back empty knows only itself).
func (p *pass) seedView(snap valkey.Snapshot, set nodeSet) (valkey.View, bool) {
	var seed valkey.View
	found := false
	for _, m := range set.desired {
		if v, ok := snap.View(m.addr); ok && m.addr != "" && (!found || len(v.Nodes) > len(seed.Nodes)) {
			seed, found = v, true
		}
	}
	return seed, found
}
