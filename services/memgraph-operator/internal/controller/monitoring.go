package controller

import (
	"context"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/services/memgraph-operator/internal/resources"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// +kubebuilder:rbac:groups=monitoring.coreos.com,resources=servicemonitors,verbs=list;watch;create;patch;delete

// Stable MetricsMonitored messages.
const (
	msgServiceMonitorApplied    = "ServiceMonitor <cluster> scrapes every member's metrics (the metrics-exporter sidecar, or memgraph's metrics port with spec.metricsExporter.enabled false) through the headless Services <cluster>-coordinators and <cluster>-data"
	msgServiceMonitorCRDMissing = "The ServiceMonitor CRD (monitoring.coreos.com/v1) is not installed: install the Prometheus Operator (or its CRDs) and the operator writes the ServiceMonitor on its next pass (within 30 s on a converged cluster); the headless Services list every member's metrics port meanwhile"
	msgServiceMonitorError      = "Writing the ServiceMonitor failed; the operator's log has the cause"
)

// monitorFinding is what the monitoring step found: MetricsMonitored's status and reason.
type monitorFinding struct {
	ran    bool
	status metav1.ConditionStatus
	reason string
}

// monitoring writes the ServiceMonitor (or deletes it when spec.serviceMonitor.enabled is
// false). It never stops the pass: scraping is not what makes the cluster serve. A missing
// CRD is looked for again on every pass: no watch can be set on a kind that does not
// exist, and every pass ends with a requeue (30 s at most on a converged cluster).
func (p *pass) monitoring(ctx context.Context) {
	var want []*unstructured.Unstructured
	if p.c.ServiceMonitorEnabled() {
		want = append(want, resources.ServiceMonitor(p.c))
	}
	sms := childrenOf[*unstructured.Unstructured](p, func() client.ObjectList {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(resources.ServiceMonitorGVK.GroupVersion().WithKind(resources.ServiceMonitorGVK.Kind + "List"))
		return l
	})
	// None wanted is a real answer here: it deletes the one written before.
	sms.AllowEmpty = true
	_, err := sms.Sync(ctx, want)
	p.monitor = monitorFinding{ran: true, status: metav1.ConditionTrue, reason: memgraphv1.ReasonServiceMonitorApplied}
	switch {
	case meta.IsNoMatchError(err):
		p.monitor.status, p.monitor.reason = metav1.ConditionFalse, memgraphv1.ReasonServiceMonitorCRDMissing
	case err != nil:
		log.FromContext(ctx).Info("Writing the ServiceMonitor failed", "serviceMonitor", resources.ServiceMonitorName(p.c.Name), "error", err.Error())
		p.monitor.status, p.monitor.reason = metav1.ConditionFalse, memgraphv1.ReasonServiceMonitorError
	}
}

// setMetricsMonitored writes MetricsMonitored from what the step found; a pass that
// stopped before the step leaves it as it was, and a disabled ServiceMonitor removes it.
func (p *pass) setMetricsMonitored(set setFunc) {
	switch {
	case !p.monitor.ran:
	case !p.c.ServiceMonitorEnabled():
		meta.RemoveStatusCondition(&p.c.Status.Conditions, memgraphv1.ConditionMetricsMonitored)
	case p.monitor.reason == memgraphv1.ReasonServiceMonitorCRDMissing:
		set(memgraphv1.ConditionMetricsMonitored, p.monitor.status, p.monitor.reason, msgServiceMonitorCRDMissing)
	case p.monitor.reason == memgraphv1.ReasonServiceMonitorError:
		set(memgraphv1.ConditionMetricsMonitored, p.monitor.status, p.monitor.reason, msgServiceMonitorError)
	default:
		set(memgraphv1.ConditionMetricsMonitored, p.monitor.status, p.monitor.reason, msgServiceMonitorApplied)
	}
}
