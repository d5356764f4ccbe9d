package controller

import (
	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/shared/metrics"
)

// Series of the operator's own next to the kit's reconcile metrics, per MemgraphCluster:
// <operator>_cluster_state{state} (1 for the current status.state, 0 for the others, so an
// alert can select state="Degraded") and <operator>_registrations_total.
const counterRegistrations = "registrations"

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
		}},
	})
}
