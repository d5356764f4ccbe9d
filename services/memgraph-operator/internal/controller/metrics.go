package controller

import (
	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/shared/metrics"
)

// Series of the operator's own next to the kit's reconcile metrics, per MemgraphCluster:
// <operator>_cluster_state{state} (1 for the current status.state, 0 for the others, so an
// alert can select state="Degraded"), <operator>_registrations_total and
// <operator>_main_changes_total and <operator>_failovers_total.
const (
	counterRegistrations = "registrations"
	counterMainChanges   = "main_changes"
	counterFailovers     = "failovers"
)

var states = []memgraphv1.ClusterState{memgraphv1.StateInitializing, memgraphv1.StateReconciling, memgraphv1.StateReady, memgraphv1.StateDegraded, memgraphv1.StateFailed}

// newMetrics registers the operator's series (shared by every manager of the process).
func newMetrics(operator string) (*metrics.Objects, error) {
	names := make([]string, len(states))
	for i, s := range states {
		names[i] = string(s)
	}
	return metrics.For(metrics.Kind{
		Operator: operator,
		Kind:     "MemgraphCluster",
		Name:     "cluster",
		States:   names,
		Counters: []metrics.Series{{
			Name: counterRegistrations,
			Help: "Registration commands (ADD COORDINATOR, REGISTER INSTANCE, SET INSTANCE TO MAIN, UNREGISTER INSTANCE, REMOVE COORDINATOR) the operator ran on a MemgraphCluster; 0 at steady state.",
		}, {
			Name: counterMainChanges,
			Help: "Times the MAIN of a MemgraphCluster moved to another data instance from one pass to the next (the coordinators' failover, or a switchover before the MAIN is retired); 0 at steady state.",
		}, {
			Name: counterFailovers,
			Help: "Times the coordinators of a MemgraphCluster promoted another data instance to MAIN without the operator asking (status.lastFailoverTime); a switchover the operator ran is not one. 0 at steady state.",
		}},
	})
}
