package controller

import (
	"sync"

	veltrixv1 "github.com/opsuite/suite/api/veltrix/v1alpha1"
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// metrics are the operator's own series on controller-runtime's registry, one set per
// cluster, deleted when the cluster goes.
type metrics struct {
	readyMembers *prometheus.GaugeVec
	size         *prometheus.GaugeVec
	state        *prometheus.GaugeVec
}

var (
	metricsOnce   sync.Once
	sharedMetrics *metrics
)

// newMetrics registers the series once per process; every controller (tests start several)
// shares them.
func newMetrics() *metrics {
	metricsOnce.Do(func() { sharedMetrics = registerMetrics() })
	return sharedMetrics
}

func registerMetrics() *metrics {
	labels := []string{"namespace", "name"}
	m := &metrics{
		readyMembers: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "veltrix_operator_cluster_ready_members", Help: "Members of a VeltrixCluster that are Ready and search-ready."}, labels),
		size:         prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "veltrix_operator_cluster_size", Help: "Replicas of a VeltrixCluster's StatefulSet."}, labels),
		state:        prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "veltrix_operator_cluster_state_info", Help: "1 for a VeltrixCluster's current state."}, append(labels, "state")),
	}
	ctrlmetrics.Registry.MustRegister(m.readyMembers, m.size, m.state)
	return m
}

func (m *metrics) observe(c *veltrixv1.VeltrixCluster) {
	m.readyMembers.WithLabelValues(c.Namespace, c.Name).Set(float64(c.Status.ReadyMembers))
	m.size.WithLabelValues(c.Namespace, c.Name).Set(float64(c.Status.Size))
	m.state.DeletePartialMatch(prometheus.Labels{"namespace": c.Namespace, "name": c.Name})
	m.state.WithLabelValues(c.Namespace, c.Name, string(c.Status.State)).Set(1)
}

func (m *metrics) forget(c *veltrixv1.VeltrixCluster) {
	l := prometheus.Labels{"namespace": c.Namespace, "name": c.Name}
	m.readyMembers.DeletePartialMatch(l)
	m.size.DeletePartialMatch(l)
	m.state.DeletePartialMatch(l)
}
