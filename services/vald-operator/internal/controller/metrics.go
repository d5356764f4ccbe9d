package controller

import (
	"github.com/opsuite/suite/services/vald-operator/internal/lifecycle"
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Metrics of the controller, on controller-runtime's registry (served on the manager's
// metrics endpoint next to the workqueue and client metrics). The reconciler skeleton adds
// vald_operator_reconcile_total{outcome} and vald_operator_reconcile_duration_seconds.
var (
	phaseSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "vald_operator_phase_duration_seconds",
		Help:    "Time a lifecycle phase took from being reached (or falling back) until it succeeded.",
		Buckets: prometheus.ExponentialBuckets(0.01, 2, 16),
	}, []string{"phase"})
	phaseEvaluationSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "vald_operator_phase_evaluation_seconds",
		Help:    "Time one evaluation of a lifecycle phase took within a pass.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
	}, []string{"phase"})
	phaseTransitions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vald_operator_phase_transitions_total",
		Help: "Lifecycle condition transitions by phase and new reason.",
	}, []string{"phase", "reason"})
	childWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vald_operator_valdrelease_writes_total",
		Help: "ValdRelease writes by kind (apply: a create or server-side apply; upgrade: the managed fields of a created ValdRelease handed to its first apply; prune); zero while every release is converged.",
	}, []string{"kind"})
)

func init() {
	metrics.Registry.MustRegister(phaseSeconds, phaseEvaluationSeconds, phaseTransitions, childWrites)
}

func recordPhases(out lifecycle.Outcome) {
	for phase, d := range out.Durations {
		phaseEvaluationSeconds.WithLabelValues(phase).Observe(d.Seconds())
	}
	for _, t := range out.Transitions {
		phaseTransitions.WithLabelValues(t.Type, t.After.Reason).Inc()
		switch d, evaluated := out.Durations[t.Type]; {
		case t.After.Reason != "Succeeded":
		case t.Before != nil && t.Elapsed > 0:
			phaseSeconds.WithLabelValues(t.Type).Observe(t.Elapsed.Seconds())
		case t.Before == nil && evaluated:
			// Reached and done in the same pass: it took that evaluation.
			phaseSeconds.WithLabelValues(t.Type).Observe(d.Seconds())
		}
	}
}

func countWrite(kind string) { childWrites.WithLabelValues(kind).Inc() }
