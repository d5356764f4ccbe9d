package controller

import (
	"sync"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/shared/reconciler"
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// clusterMetrics are the operator's own series next to the kit's reconcile metrics.
type clusterMetrics struct {
	// state is 1 for each cluster's current state and 0 for the others, so an alert can
	// select state="Degraded".
	state *prometheus.GaugeVec
	// commands counts the registration commands the operator ran; 0 at steady state.
	commands prometheus.Counter
}

var (
	metricsMu     sync.Mutex
	metricsByName = map[string]*clusterMetrics{}
)

var states = []memgraphv1.ClusterState{memgraphv1.StateInitializing, memgraphv1.StateReady, memgraphv1.StateConverging, memgraphv1.StateDegraded}

// metricsFor registers the operator's metrics once per process (tests start many managers).
func metricsFor(operator string) *clusterMetrics {
	metricsMu.Lock()
	defer metricsMu.Unlock()
	if m, ok := metricsByName[operator]; ok {
		return m
	}
	prefix := reconciler.MetricsPrefix(operator)
	m := &clusterMetrics{
		state: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: prefix + "_cluster_state_info",
			Help: "1 for the MemgraphCluster's current status.state, 0 for the other states.",
		}, []string{"namespace", "name", "state"}),
		commands: prometheus.NewCounter(prometheus.CounterOpts{
			Name: prefix + "_registration_commands_total",
			Help: "Registration commands (ADD COORDINATOR, REGISTER INSTANCE, SET INSTANCE TO MAIN, ...) the operator ran.",
		}),
	}
	metrics.Registry.MustRegister(m.state, m.commands)
	metricsByName[operator] = m
	return m
}

func (m *clusterMetrics) record(c *memgraphv1.MemgraphCluster) {
	for _, s := range states {
		v := 0.0
		if c.Status.State == s {
			v = 1
		}
		m.state.WithLabelValues(c.Namespace, c.Name, string(s)).Set(v)
	}
}

// forget deletes a gone cluster's series.
func (m *clusterMetrics) forget(namespace, name string) {
	m.state.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "name": name})
}
