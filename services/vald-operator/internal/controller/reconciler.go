// Package controller reconciles ValdOperatorReleases into ValdReleases.
package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	valdv1 "github.com/opsuite/suite/api/vald/v1"
	"github.com/opsuite/suite/services/vald-operator/internal/resources"
	"github.com/opsuite/suite/shared/conditions"
	"github.com/opsuite/suite/shared/ssa"
	"github.com/opsuite/suite/shared/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Name is the controller's name: its field manager, event reporter and metrics prefix.
const Name = "vald-operator"

// Options configure the reconciler.
type Options struct {
	// RequeueAfter is how long a Pending or Progressing release waits before it is
	// checked again when no watch event comes first.
	RequeueAfter time.Duration
	// RequireNodePoolMatch generates ValdReleases only for entries whose node pools have
	// labelled Nodes.
	RequireNodePoolMatch bool
	// MaxConcurrentReconciles is the number of releases reconciled at once.
	MaxConcurrentReconciles int
	// Build is the builder's configuration.
	Build resources.Config

	// wrapClient wraps the manager's client (tests and benchmarks count writes with it).
	wrapClient func(client.Client) client.Client
	// skipNameValidation lets tests start several managers in one process.
	skipNameValidation bool
}

// DefaultOptions are the options without flags or environment.
func DefaultOptions() Options {
	return Options{RequeueAfter: 30 * time.Second, MaxConcurrentReconciles: 4, Build: resources.DefaultConfig()}
}

// Validate reports every invalid option at once.
func (o Options) Validate() error {
	var errs []error
	if o.RequeueAfter <= 0 {
		errs = append(errs, fmt.Errorf("requeue interval %s must be positive", o.RequeueAfter))
	}
	if o.MaxConcurrentReconciles < 1 {
		errs = append(errs, fmt.Errorf("max concurrent reconciles %d must be at least 1", o.MaxConcurrentReconciles))
	}
	errs = append(errs, o.Build.Validate())
	return errors.Join(errs...)
}

// Reconciler turns a ValdOperatorRelease into ValdReleases through the lifecycle phases
// WaitingClusterCreate, WaitingCreateVrs and Completed.
type Reconciler struct {
	// Client reads through the manager's cache and writes to the API server.
	Client   client.Client
	Applier  ssa.Applier
	Recorder events.EventRecorder
	Options  Options
}

// +kubebuilder:rbac:groups=vald.vdaas.org,resources=valdoperatorreleases,verbs=get;list;watch
// +kubebuilder:rbac:groups=vald.vdaas.org,resources=valdoperatorreleases/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=vald.vdaas.org,resources=valdoperatorreleases/finalizers,verbs=update
// +kubebuilder:rbac:groups=vald.vdaas.org,resources=valdreleases,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// SetupWithManager builds the reconciler from mgr and registers it: it watches releases,
// the ValdReleases they own and, with the node-pool match on, the labels of Nodes.
func SetupWithManager(mgr ctrl.Manager, opts Options) (*Reconciler, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	c := mgr.GetClient()
	if opts.wrapClient != nil {
		c = opts.wrapClient(c)
	}
	r := &Reconciler{
		Client:   c,
		Applier:  ssa.Applier{Client: c, FieldManager: resources.FieldManager},
		Recorder: mgr.GetEventRecorder(Name),
		Options:  opts,
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("valdoperatorrelease").
		For(&valdv1.ValdOperatorRelease{}).
		Owns(&valdv1.ValdRelease{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: opts.MaxConcurrentReconciles, SkipNameValidation: &opts.skipNameValidation})
	if opts.RequireNodePoolMatch {
		b = b.WatchesMetadata(nodeMetadata(), nodePoolHandler(mgr.GetClient(), opts.Build),
			builder.WithPredicates(predicate.LabelChangedPredicate{}))
	}
	return r, b.Complete(r)
}

// Reconcile runs one pass of the lifecycle and writes status once.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (res reconcile.Result, err error) {
	began := time.Now()
	defer func() { observeReconcile(began, res, err) }()

	vor := &valdv1.ValdOperatorRelease{}
	if err := r.Client.Get(ctx, req.NamespacedName, vor); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !vor.DeletionTimestamp.IsZero() {
		// The garbage collector removes the ValdReleases through their owner references.
		return reconcile.Result{}, nil
	}

	after := vor.DeepCopy()
	out, runErr := r.phases(after).Run(ctx, &after.Status.Conditions, vor.Generation, time.Now())
	after.Status.ObservedGeneration = vor.Generation
	after.Status.Phase = out.Phase
	after.Status.Progress = valdv1.Progress{Total: out.Total, Completed: out.Completed}
	after.Status.ProgressText = fmt.Sprintf("%d/%d", out.Completed, out.Total)
	after.Status.State = string(conditions.Summarize(after.Status.Conditions))
	recordPhases(out)

	written, err := status.Write(ctx, r.Client, vor, after)
	if err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			// A newer version or a deletion is on its way; its event reconciles again.
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, errors.Join(runErr, err)
	}
	if written {
		r.announce(after, out)
	}
	if runErr != nil {
		return reconcile.Result{}, runErr
	}

	switch {
	case out.Halt == nil && !out.Seeded:
		return reconcile.Result{}, nil
	case out.Halt != nil && out.Halt.Reason == valdv1.ReasonFailed:
		// No retry helps: the condition, the event and this error say what to change.
		return reconcile.Result{}, reconcile.TerminalError(fmt.Errorf("phase %s failed: %s", out.Phase, out.Halt.Message))
	default:
		// Pending or Progressing: look again later; watch events usually come first.
		return reconcile.Result{RequeueAfter: r.Options.RequeueAfter}, nil
	}
}
