package controller

import (
	veltrixv1 "github.com/opsuite/suite/api/veltrix/v1alpha1"
	"github.com/opsuite/suite/shared/metrics"
)

// The operator's own series per VeltrixCluster, next to the kit's reconcile metrics:
// <operator>_cluster_state{state}, <operator>_cluster_ready_members and _size,
// <operator>_member_removals_total and <operator>_failovers_total.
const (
	gaugeReadyMembers     = "ready_members"
	gaugeSize             = "size"
	counterMemberRemovals = "member_removals"
	counterFailovers      = "failovers"
)

// newMetrics registers the operator's series (shared by every manager of the process).
func newMetrics(operator string) (*metrics.Objects, error) {
	return metrics.For(metrics.Kind{
		Operator: operator,
		Kind:     "VeltrixCluster",
		Name:     "cluster",
		// The suite's state words (a state not listed still gets its own series while
		// current).
		States: []string{"Initializing", "Reconciling", "Ready", "Degraded", "Failed"},
		Gauges: []metrics.Series{
			{Name: gaugeReadyMembers, Help: "Members of a VeltrixCluster that are Ready and search-ready."},
			{Name: gaugeSize, Help: "Replicas of a VeltrixCluster's StatefulSet."},
		},
		Counters: []metrics.Series{{
			Name: counterMemberRemovals,
			Help: "Members of a VeltrixCluster whose removal the server accepted (DELETE /admin/cluster/members/<id>) as the operator scaled it down.",
		}, {
			Name: counterFailovers,
			Help: "Members of a VeltrixCluster's lost nodes the operator removed from membership at once (DELETE ?force=true), their co-owners serving their partitions, to make them anew on another node; status.lastFailoverTime dates the last.",
		}},
	})
}

// observeMetrics sets c's state and member gauges from the status the pass computed.
func (ctl *Controller) observeMetrics(c *veltrixv1.VeltrixCluster) {
	ctl.metrics.SetState(c.Namespace, c.Name, string(c.Status.State))
	ctl.metrics.Set(c.Namespace, c.Name, gaugeReadyMembers, float64(c.Status.ReadyMembers))
	ctl.metrics.Set(c.Namespace, c.Name, gaugeSize, float64(c.Status.Size))
}
