package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	"github.com/opsuite/suite/services/valkey-operator/internal/resources"
	"github.com/opsuite/suite/shared/children"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// +kubebuilder:rbac:groups=monitoring.coreos.com,resources=servicemonitors,verbs=get;create;patch;delete

// monitorState is what the monitoring step found: the MetricsMonitored condition.
type monitorState struct {
	// ran: the step ran this pass (the condition is left as it was otherwise).
	ran bool
	// wanted: the condition is present (exporter on, ServiceMonitor not disabled).
	wanted          bool
	status          metav1.ConditionStatus
	reason, message string
}

const crdMissingMessage = "The ServiceMonitor CRD (monitoring.coreos.com/v1) is not installed: install the Prometheus Operator (or its CRDs) and the operator writes the ServiceMonitor within minutes; the metrics Service lists the exporters meanwhile"

// monitoring writes the metrics Service and the ServiceMonitor while the exporter runs,
// and deletes them when it no longer does. It never stops the pass: scraping is not what
// makes the cluster serve. It returns true when the ServiceMonitor CRD is missing, so the
// pass comes back to look for it (no watch can be set on a kind that does not exist).
func (p *pass) monitoring(ctx context.Context) (recheck bool) {
	c := p.c
	p.monitor = monitorState{ran: true}
	if !c.Spec.Exporter.Enabled {
		p.deleteServiceMonitor(ctx)
		// From the cache: Services with the cluster's labels are watched.
		if err := p.deleteOwned(ctx, p.ctl.client, &corev1.Service{}, resources.MetricsServiceName(c.Name)); err != nil {
			log.FromContext(ctx).Info("Deleting the metrics Service failed", "service", resources.MetricsServiceName(c.Name), "error", err.Error())
		}
		return false
	}
	if !c.Spec.Exporter.ServiceMonitorEnabled() {
		p.deleteServiceMonitor(ctx)
		// The metrics Service stays: a Prometheus configured by hand may scrape it.
		if _, _, err := p.applyOwned(ctx, resources.MetricsService(c)); err != nil {
			log.FromContext(ctx).Info("Writing the metrics Service failed", "service", resources.MetricsServiceName(c.Name), "error", err.Error())
		}
		return false
	}
	p.monitor.wanted = true
	if _, _, err := p.applyOwned(ctx, resources.MetricsService(c)); err != nil {
		log.FromContext(ctx).Info("Writing the metrics Service failed", "service", resources.MetricsServiceName(c.Name), "error", err.Error())
		p.monitorFailed(fmt.Sprintf("Writing the metrics Service %s failed; the operator's log has the cause", resources.MetricsServiceName(c.Name)))
		return false
	}
	switch err := p.applyServiceMonitor(ctx); {
	case meta.IsNoMatchError(err):
		p.monitor.status, p.monitor.reason, p.monitor.message = metav1.ConditionFalse, valkeyv1.ReasonServiceMonitorCRDMissing, crdMissingMessage
		p.normalOn(valkeyv1.ConditionMetricsMonitored, metav1.ConditionFalse, valkeyv1.ReasonServiceMonitorCRDMissing, valkeyv1.EventServiceMonitorCRDMissing, crdMissingMessage)
		return true
	case err != nil:
		var nc *children.NotControlledError
		if errors.As(err, &nc) {
			p.monitorFailed(fmt.Sprintf("ServiceMonitor %s exists and is not this cluster's: delete or rename it", nc.Key.Name))
			return false
		}
		log.FromContext(ctx).Info("Writing the ServiceMonitor failed", "serviceMonitor", resources.ServiceMonitorName(c.Name), "error", err.Error())
		p.monitorFailed(fmt.Sprintf("Writing the ServiceMonitor %s failed; the operator's log has the cause", resources.ServiceMonitorName(c.Name)))
		return false
	}
	p.monitor.status, p.monitor.reason = metav1.ConditionTrue, valkeyv1.ReasonServiceMonitorApplied
	p.monitor.message = fmt.Sprintf("ServiceMonitor %s scrapes every member's exporter through Service %s", resources.ServiceMonitorName(c.Name), resources.MetricsServiceName(c.Name))
	return false
}

func (p *pass) monitorFailed(msg string) {
	p.monitor.status, p.monitor.reason, p.monitor.message = metav1.ConditionFalse, valkeyv1.ReasonServiceMonitorError, msg
}

// applyServiceMonitor writes the ServiceMonitor (controlled by the cluster) unless the
// live one already holds it; a NoMatch error says its CRD is not installed.
func (p *pass) applyServiceMonitor(ctx context.Context) error {
	want := resources.ServiceMonitor(p.c)
	if err := controllerutil.SetControllerReference(p.c, want, p.ctl.client.Scheme()); err != nil {
		return err
	}
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(resources.ServiceMonitorGVK)
	err := p.ctl.reader.Get(ctx, client.ObjectKeyFromObject(want), live)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return err
	default:
		if owner := metav1.GetControllerOf(live); owner == nil || owner.UID != p.c.UID {
			return &children.NotControlledError{Kind: resources.ServiceMonitorGVK.Kind, Key: client.ObjectKeyFromObject(want), Controller: owner}
		}
		if children.UpToDate(want, live) {
			return nil
		}
	}
	return p.ctl.apply.Apply(ctx, want)
}

// deleteServiceMonitor deletes the cluster's ServiceMonitor when the last status says one
// was written (so a cluster that never had one costs no API call, and no discovery of a
// missing kind, each pass). A failed delete keeps the condition, and the next pass tries
// again.
func (p *pass) deleteServiceMonitor(ctx context.Context) {
	cond := meta.FindStatusCondition(p.before.Conditions, valkeyv1.ConditionMetricsMonitored)
	if cond == nil || cond.Reason == valkeyv1.ReasonServiceMonitorCRDMissing {
		return
	}
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(resources.ServiceMonitorGVK)
	if err := p.deleteOwned(ctx, p.ctl.reader, live, resources.ServiceMonitorName(p.c.Name)); err != nil {
		log.FromContext(ctx).Info("Deleting the ServiceMonitor failed", "serviceMonitor", resources.ServiceMonitorName(p.c.Name), "error", err.Error())
		p.monitor.ran = false
	}
}

// deleteOwned deletes the object of that name and obj's kind, read through r, when the
// cluster controls it; one that is gone, or whose kind is not installed, is no error.
func (p *pass) deleteOwned(ctx context.Context, r client.Reader, obj client.Object, name string) error {
	err := r.Get(ctx, client.ObjectKey{Namespace: p.c.Namespace, Name: name}, obj)
	if err == nil {
		if owner := metav1.GetControllerOf(obj); owner == nil || owner.UID != p.c.UID {
			return nil // not ours: left alone
		}
		uid := obj.GetUID()
		err = p.ctl.client.Delete(ctx, obj, client.Preconditions{UID: &uid})
	}
	if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
		return nil
	}
	return err
}

// setMonitoringCondition writes MetricsMonitored from what the step found; a pass that
// stopped before the step leaves it as it was.
func (p *pass) setMonitoringCondition(set func(t string, s metav1.ConditionStatus, reason, msg string), conds *[]metav1.Condition) {
	switch {
	case !p.monitor.ran:
	case p.monitor.wanted:
		set(valkeyv1.ConditionMetricsMonitored, p.monitor.status, p.monitor.reason, p.monitor.message)
	default:
		meta.RemoveStatusCondition(conds, valkeyv1.ConditionMetricsMonitored)
	}
}

// withRecheck shortens wait to the monitor recheck interval when the ServiceMonitor CRD
// was missing (0 means no wait was asked for).
func (p *pass) withRecheck(wait time.Duration, recheck bool) time.Duration {
	if !recheck {
		return wait
	}
	if r := p.ctl.cfg.MonitorRecheck; wait <= 0 || r < wait {
		return r
	}
	return wait
}
