package valdhelmsim

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/opsuite/suite/api/vald/valdchart"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// Reconciler plays the Vald Helm Operator for ValdReleases: each new generation is
// "released" DeployDelay after the simulator first saw it, and the status is written as
// operator-sdk's helm-operator writes it (status subresource, whole status replaced).
type Reconciler struct {
	Client client.Client
	// DeployDelay is how long one install, upgrade or uninstall try takes.
	DeployDelay time.Duration
	// Finalizer holds each deployed ValdRelease with the helm-operator's finalizer until
	// an uninstall try has run, as the real operator does.
	Finalizer bool
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	mu    sync.Mutex
	tries map[types.NamespacedName]try
	// owners is which release has which objects installed.
	owners owners
}

// try is the install or upgrade under way for one ValdRelease.
type try struct {
	uid     types.UID
	key     string
	started time.Time
}

// SetupWithManager watches ValdReleases with workers reconcilers.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, workers int) error {
	vr := &unstructured.Unstructured{}
	vr.SetGroupVersionKind(ValdReleaseGVK)
	return ctrl.NewControllerManagedBy(mgr).For(vr).Named("valdrelease").
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).Complete(r)
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// started returns when the try identified by key began, starting it now when it is new.
func (r *Reconciler) started(name types.NamespacedName, uid types.UID, key string, now time.Time) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.tries == nil {
		r.tries = map[types.NamespacedName]try{}
	}
	t, ok := r.tries[name]
	if !ok || t.uid != uid || t.key != key {
		t = try{uid: uid, key: key, started: now}
		r.tries[name] = t
	}
	return t.started
}

func (r *Reconciler) forget(name types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.tries, name)
}

// Reconcile computes the status for one ValdRelease and writes it when it changed.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	logger := log.FromContext(ctx)
	vr := &unstructured.Unstructured{}
	vr.SetGroupVersionKind(ValdReleaseGVK)
	if err := r.Client.Get(ctx, req.NamespacedName, vr); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
			r.owners.drop(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	observed := Observed{
		Namespace: vr.GetNamespace(), Name: vr.GetName(), Generation: vr.GetGeneration(),
		Annotations: vr.GetAnnotations(), Spec: vr.Object["spec"], Status: StatusOf(vr.Object),
		Deleting: vr.GetDeletionTimestamp() != nil, HasFinalizer: controllerutil.ContainsFinalizer(vr, Finalizer),
	}
	observed.Render = valdchart.Objects(observed.Name, observed.Namespace, valuesOf(observed.Spec))
	r.owners.seed(req.NamespacedName, releasedObjects(observed.Status.DeployedRelease))
	now := r.now()
	started := r.started(req.NamespacedName, vr.GetUID(), observed.Attempt(), now)
	plan, err := r.owners.decide(req.NamespacedName, observed.Render, func(taken []Taken) (Plan, bool, error) {
		observed.Taken = taken
		p, err := Next(observed, started, now, r.DeployDelay, r.Finalizer)
		return p, p.Installed, err
	})
	if err != nil {
		return ctrl.Result{}, err
	}
	if plan.AddFinalizer {
		controllerutil.AddFinalizer(vr, Finalizer)
		if err := r.Client.Update(ctx, vr); err != nil {
			return writeFailed(err, "adding the finalizer to", req)
		}
	}
	if !statusEqual(plan.Status, observed.Status) {
		status, err := plan.Status.ToUnstructured()
		if err != nil {
			return ctrl.Result{}, err
		}
		vr.Object["status"] = status
		if err := r.Client.Status().Update(ctx, vr); err != nil {
			return writeFailed(err, "writing the status of", req)
		}
		logger.Info("Updated ValdRelease status", "generation", observed.Generation, "conditions", summary(plan.Status))
	}
	if plan.RemoveFinalizer {
		controllerutil.RemoveFinalizer(vr, Finalizer)
		if err := r.Client.Update(ctx, vr); err != nil {
			return writeFailed(err, "removing the finalizer from", req)
		}
		r.owners.drop(req.NamespacedName)
		logger.Info("Uninstalled ValdRelease's release")
	}
	return ctrl.Result{RequeueAfter: plan.RequeueAfter}, nil
}

// writeFailed turns a failed write into the pass's result: a conflict or a deletion is
// followed by a watch event that brings the release back, anything else is retried.
func writeFailed(err error, what string, req ctrl.Request) (ctrl.Result, error) {
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, fmt.Errorf("%s ValdRelease %s: %w", what, req.NamespacedName, err)
}

// summary is "Type=Status/Reason" for each condition, for the log.
func summary(s Status) []string {
	out := make([]string, 0, len(s.Conditions))
	for _, c := range s.Conditions {
		out = append(out, c.Type+"="+c.Status+"/"+c.Reason)
	}
	return out
}
