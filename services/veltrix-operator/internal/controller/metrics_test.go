package controller

import (
	"testing"

	veltrixv1 "github.com/opsuite/suite/api/veltrix/v1alpha1"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestMetrics: one state series per cluster (the old state's goes), all gone with the cluster.
func TestMetrics(t *testing.T) {
	m := newMetrics()
	c := &veltrixv1.VeltrixCluster{ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "metrics"}}
	c.Status.State, c.Status.ReadyMembers, c.Status.Size = veltrixv1.StateScaling, 2, 3
	m.observe(c)
	c.Status.State, c.Status.ReadyMembers = veltrixv1.StateRunning, 3
	m.observe(c)
	if v := testutil.ToFloat64(m.readyMembers.WithLabelValues("metrics", "m")); v != 3 {
		t.Errorf("ready members %v, want 3", v)
	}
	if v := testutil.ToFloat64(m.state.WithLabelValues("metrics", "m", "Running")); v != 1 {
		t.Errorf("state Running %v, want 1", v)
	}
	// Series of other clusters (other tests of this binary) share the vectors: count ours.
	mine := prometheus.Labels{"namespace": "metrics", "name": "m"}
	if n := m.state.DeletePartialMatch(mine); n != 1 {
		t.Errorf("%d state series, want 1 (Scaling's deleted)", n)
	}
	m.observe(c)
	m.forget(c)
	if n := m.state.DeletePartialMatch(mine) + m.readyMembers.DeletePartialMatch(mine) + m.size.DeletePartialMatch(mine); n != 0 {
		t.Errorf("%d series left after forget", n)
	}
}
