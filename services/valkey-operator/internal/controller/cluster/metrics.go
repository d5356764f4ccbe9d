package cluster

import (
	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	"github.com/opsuite/suite/shared/metrics"
)

// The operator's own series per ValkeyCluster, next to the kit's reconcile metrics:
// <operator>_cluster_state{state}, <operator>_cluster_shards and _shards_ready, and the
// counters below.
const (
	gaugeShards      = "shards"
	gaugeShardsReady = "shards_ready"
	counterFailovers = "failovers"
	counterSlotMoves = "slot_moves"
)

// newMetrics registers the operator's series (shared by every manager of the process).
func newMetrics(operator string) (*metrics.Objects, error) {
	return metrics.For(metrics.Kind{
		Operator: operator,
		Kind:     "ValkeyCluster",
		Name:     "cluster",
		States: []string{string(valkeyv1.StateInitializing), string(valkeyv1.StateReconciling), string(valkeyv1.StateReady),
			string(valkeyv1.StateDegraded), string(valkeyv1.StateFailed)},
		Gauges: []metrics.Series{
			{Name: gaugeShards, Help: "Primaries of a ValkeyCluster that serve slots (status.shards)."},
			{Name: gaugeShardsReady, Help: "Shards of a ValkeyCluster whose primary is healthy with every replica in sync (status.readyShards)."},
		},
		Counters: []metrics.Series{
			{Name: counterFailovers, Help: "Replicas of a ValkeyCluster promoted by the operator: CLUSTER FAILOVER TAKEOVER for a lost primary, or a completed CLUSTER FAILOVER before a primary's pod is replaced."},
			{Name: counterSlotMoves, Help: "Slots of a ValkeyCluster whose keys the operator migrated to another shard (rebalancing or draining)."},
		},
	})
}

// observeMetrics sets c's state and shard gauges from the status the pass computed.
func (ctl *Controller) observeMetrics(c *valkeyv1.ValkeyCluster) {
	ctl.metrics.SetState(c.Namespace, c.Name, string(c.Status.State))
	ctl.metrics.Set(c.Namespace, c.Name, gaugeShards, float64(c.Status.Shards))
	ctl.metrics.Set(c.Namespace, c.Name, gaugeShardsReady, float64(c.Status.ReadyShards))
}
