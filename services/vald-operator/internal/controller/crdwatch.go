package controller

import (
	"context"
	"time"

	valdv1 "github.com/opsuite/suite/api/vald/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// valdReleaseGroupKind is the kind the Vald Helm Operator's CRD defines.
var valdReleaseGroupKind = schema.GroupKind{Group: valdv1.GroupVersion.Group, Kind: "ValdRelease"}

// crdMissing is the condition message while the ValdRelease CRD is not served.
const crdMissing = "The ValdRelease CRD (valdreleases.vald.vdaas.org) is not installed: install the Vald Helm Operator, or the vald-operator chart with installValdReleaseCRD=true, or `kubectl apply -f deploy/crds/vald.vdaas.org_valdreleases.yaml`. The operator notices it without a restart."

// valdReleaseWatch starts the controller's ValdRelease watch once the API server serves
// the kind. Registered up front, a watch of a kind without its CRD would hold the manager's
// start until its cache sync timed out and the process exited, again and again; the Vald
// Helm Operator, which owns the CRD, may well be installed after this operator.
type valdReleaseWatch struct {
	mapper   meta.RESTMapper
	cache    cache.Cache
	ctrl     controller.Controller
	handler  handler.EventHandler
	releases client.Reader
	// wake reconciles every release once the watch runs, so those that waited for the
	// CRD go on at once instead of after their requeue interval.
	wake     chan event.GenericEvent
	interval time.Duration
	index    *valdReleaseIndex
}

// Start polls discovery until the kind is served, then starts the watch and wakes the
// releases. It returns when that is done or ctx ends.
func (w *valdReleaseWatch) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithValues("crd", "valdreleases.vald.vdaas.org")
	warned := false
	err := wait.PollUntilContextCancel(ctx, w.interval, true, func(context.Context) (bool, error) {
		_, err := w.mapper.RESTMapping(valdReleaseGroupKind, valdv1.GroupVersion.Version)
		switch {
		case err == nil:
			return true, nil
		case !warned:
			logger.Info("Waiting for the ValdRelease CRD; releases report it missing", "error", err.Error())
			warned = true
		}
		return false, nil
	})
	if err != nil {
		// Only ctx ending stops the poll: the manager is stopping, which is no failure.
		return nil //nolint:nilerr // an error here would be reported as the manager's
	}
	if err := w.index.register(ctx, w.cache); err != nil {
		return err
	}
	if err := w.ctrl.Watch(source.Kind[client.Object](w.cache, &valdv1.ValdRelease{}, w.handler, predicate.Funcs{CreateFunc: notCreatedByARelease})); err != nil {
		return err
	}
	logger.Info("Started watching ValdReleases")
	list := &valdv1.ValdOperatorReleaseList{}
	if err := w.releases.List(ctx, list); err != nil {
		// Not fatal: every release is requeued anyway while it waits for the CRD.
		logger.Error(err, "Failed to list ValdOperatorReleases to wake them")
		return nil
	}
	for i := range list.Items {
		select {
		case w.wake <- event.GenericEvent{Object: &list.Items[i]}:
		case <-ctx.Done():
			return nil
		}
	}
	return nil
}

// notCreatedByARelease passes the creation of a ValdRelease unless a ValdOperatorRelease
// controls it: that one was created by a pass of this controller, which saw the API
// server's answer already (see appliedReader), so its event would only bring one more pass
// that writes nothing. Creations without that controller (a name another owner takes, one
// to adopt) still wake the releases concerned; updates and deletions always do.
func notCreatedByARelease(e event.TypedCreateEvent[client.Object]) bool {
	ref := metav1.GetControllerOfNoCopy(e.Object)
	return ref == nil || ref.Kind != "ValdOperatorRelease" || ref.APIVersion != valdv1.GroupVersion.String()
}

// NeedLeaderElection: the watch feeds the leader's controller.
func (w *valdReleaseWatch) NeedLeaderElection() bool { return true }
