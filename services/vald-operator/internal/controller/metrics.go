package controller

import (
	valdv1 "github.com/opsuite/suite/api/vald/v1"
	"github.com/opsuite/suite/services/vald-operator/internal/lifecycle"
	"github.com/opsuite/suite/shared/metrics"
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// controllerMetrics are the controller's series on controller-runtime's registry (served
// on the manager's metrics endpoint next to the workqueue and client metrics). The
// reconciler skeleton adds vald_operator_reconcile_total{outcome} and
// vald_operator_reconcile_duration_seconds.
type controllerMetrics struct {
	// releases: vald_operator_release_state{namespace,name,state}, one series per state of
	// each ValdOperatorRelease, deleted with it.
	releases               *metrics.Objects
	phaseSeconds           *prometheus.HistogramVec
	phaseEvaluationSeconds *prometheus.HistogramVec
	phaseTransitions       *prometheus.CounterVec
	childWrites            *prometheus.CounterVec
}

// newControllerMetrics registers the series; a second manager of the process (tests)
// shares them.
func newControllerMetrics() (*controllerMetrics, error) {
	reg := ctrlmetrics.Registry
	var m controllerMetrics
	var err error
	if m.releases, err = metrics.For(metrics.Kind{
		Operator: Name,
		Kind:     "ValdOperatorRelease",
		Name:     "release",
		// status.state as conditions.Summarize reports it (a word not listed here still
		// gets its own series while current).
		States: []string{"Ready", "Reconciling", "Pending", "Failed"},
	}); err != nil {
		return nil, err
	}
	if m.phaseSeconds, err = metrics.Collector(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "vald_operator_phase_duration_seconds",
		Help:    "Time a lifecycle phase took from being reached (or falling back) until it succeeded.",
		Buckets: prometheus.ExponentialBuckets(0.01, 2, 16),
	}, []string{"phase"})); err != nil {
		return nil, err
	}
	if m.phaseEvaluationSeconds, err = metrics.Collector(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "vald_operator_phase_evaluation_seconds",
		Help:    "Time one evaluation of a lifecycle phase took within a pass.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
	}, []string{"phase"})); err != nil {
		return nil, err
	}
	if m.phaseTransitions, err = metrics.Collector(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vald_operator_phase_transitions_total",
		Help: "Lifecycle condition transitions by phase and new reason.",
	}, []string{"phase", "reason"})); err != nil {
		return nil, err
	}
	if m.childWrites, err = metrics.Collector(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vald_operator_valdrelease_writes_total",
		Help: "ValdRelease writes by kind (apply: a create or server-side apply; upgrade: the managed fields of a created ValdRelease handed to its first apply; prune); zero while every release is converged.",
	}, []string{"kind"})); err != nil {
		return nil, err
	}
	return &m, nil
}

// observe records a pass over vor: its state and the phases' timings and transitions.
func (m *controllerMetrics) observe(vor *valdv1.ValdOperatorRelease, out lifecycle.Outcome) {
	m.releases.SetState(vor.Namespace, vor.Name, vor.Status.State)
	for phase, d := range out.Durations {
		m.phaseEvaluationSeconds.WithLabelValues(phase).Observe(d.Seconds())
	}
	for _, t := range out.Transitions {
		m.phaseTransitions.WithLabelValues(t.Type, t.After.Reason).Inc()
		switch d, evaluated := out.Durations[t.Type]; {
		case t.After.Reason != "Succeeded":
		case t.Before != nil && t.Elapsed > 0:
			m.phaseSeconds.WithLabelValues(t.Type).Observe(t.Elapsed.Seconds())
		case t.Before == nil && evaluated:
			// Reached and done in the same pass: it took that evaluation.
			m.phaseSeconds.WithLabelValues(t.Type).Observe(d.Seconds())
		}
	}
}

func (m *controllerMetrics) countWrite(kind string) { m.childWrites.WithLabelValues(kind).Inc() }
