package controller

import (
	"sync"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/shared/metrics"
	"k8s.io/apimachinery/pkg/types"
)

// Series of the operator's own next to the kit's reconcile metrics, per MemgraphCluster:
// <operator>_cluster_state{state} (1 for the current status.state, 0 for the others, so an
// alert can select state="Degraded"), <operator>_registrations_total and
// <operator>_main_changes_total.
const (
	counterRegistrations = "registrations"
	counterMainChanges   = "main_changes"
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
		}},
	})
}

// mainTracker remembers each cluster's MAIN as the last pass saw it, in memory: a MAIN that
// moved while no operator watched (or before this one led) is not counted.
type mainTracker struct {
	mu   sync.Mutex
	last map[types.NamespacedName]string
}

// moved records main as key's MAIN and reports whether it replaced another one (a pass
// that finds no MAIN keeps the last one: MAIN lost and then back on the same instance is
// no move).
func (t *mainTracker) moved(key types.NamespacedName, main string) bool {
	if main == "" {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	prev := t.last[key]
	t.last[key] = main
	return prev != "" && prev != main
}

func (t *mainTracker) forget(key types.NamespacedName) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.last, key)
}
