package reconciler

import (
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Outcomes of a pass, the values of the outcome label.
const (
	OutcomeDone     = "done"
	OutcomeRequeued = "requeued"
	OutcomeFailed   = "failed"
	OutcomeError    = "error"
)

// Metrics are one operator's reconcile metrics on controller-runtime's registry (served
// on the manager's metrics endpoint): <prefix>_reconcile_total{outcome} and
// <prefix>_reconcile_duration_seconds.
type Metrics struct {
	outcomes *prometheus.CounterVec
	seconds  prometheus.Histogram
}

var (
	metricsMu     sync.Mutex
	metricsByName = map[string]*Metrics{}
)

// MetricsPrefix turns an operator's name into its metrics prefix: vald-operator ->
// vald_operator.
func MetricsPrefix(name string) string {
	return strings.NewReplacer("-", "_", ".", "_").Replace(name)
}

// MetricsFor returns the metrics of the operator called name, registering them on first
// use; every later call (another manager in the same test process) shares them.
func MetricsFor(name string) *Metrics {
	metricsMu.Lock()
	defer metricsMu.Unlock()
	if m, ok := metricsByName[name]; ok {
		return m
	}
	prefix := MetricsPrefix(name)
	m := &Metrics{
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: prefix + "_reconcile_total",
			Help: "Reconcile passes by outcome: done, requeued (Pending or Progressing), failed (waits for a spec change) or error (retried with back-off).",
		}, []string{"outcome"}),
		seconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    prefix + "_reconcile_duration_seconds",
			Help:    "Time of one reconcile pass.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
		}),
	}
	// Series exist at zero from the start, so rates and alerts need no absent().
	for _, o := range []string{OutcomeDone, OutcomeRequeued, OutcomeFailed, OutcomeError} {
		m.outcomes.WithLabelValues(o)
	}
	metrics.Registry.MustRegister(m.outcomes, m.seconds)
	metricsByName[name] = m
	return m
}

// Observe records one pass that began at began and ended with res and err.
func (m *Metrics) Observe(began time.Time, res reconcile.Result, err error) {
	m.seconds.Observe(time.Since(began).Seconds())
	m.outcomes.WithLabelValues(Outcome(res, err)).Inc()
}

// Outcome classifies what a pass returned to controller-runtime.
func Outcome(res reconcile.Result, err error) string {
	switch {
	case errors.Is(err, reconcile.TerminalError(nil)):
		return OutcomeFailed
	case err != nil:
		return OutcomeError
	case res.RequeueAfter > 0:
		return OutcomeRequeued
	}
	return OutcomeDone
}

// Count returns how many passes ended with outcome (for tests and diagnostics).
func (m *Metrics) Count(outcome string) float64 {
	c, err := m.outcomes.GetMetricWithLabelValues(outcome)
	if err != nil {
		return 0
	}
	var out dto.Metric
	if err := c.Write(&out); err != nil {
		return 0
	}
	return out.GetCounter().GetValue()
}
