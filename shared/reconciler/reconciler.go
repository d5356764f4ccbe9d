// Package reconciler is the skeleton every operator's reconcile pass runs in: read the
// object (gone: forget it, done), take the last status write instead when the cache has
// not caught up with it, handle deletion with an optional finalizer step, deep-copy it,
// run the operator's pass on the copy, write status once (not at all when unchanged),
// record an event per condition transition (or the operator's own, once the write that
// carries them succeeded), and map the pass's Result onto
// controller-runtime (RequeueAfter for waiting, TerminalError for a wrong spec, errors
// with back-off), counting outcomes in metrics named after the operator.
package reconciler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/opsuite/suite/shared/conditions"
	"github.com/opsuite/suite/shared/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Config describes one kind's reconciler. O is the object's pointer type
// (*v1.MyKind, or *unstructured.Unstructured with New setting its kind).
type Config[O client.Object] struct {
	// Name is the operator's name: it prefixes the metrics (vald-operator ->
	// vald_operator_reconcile_total).
	Name string
	// Client reads (through the manager's cache) and writes the object.
	Client client.Client
	// Recorder records an event per condition transition (or the operator's own, see
	// OwnEvents); nil records none.
	Recorder events.EventRecorder
	// New returns an empty object of the kind.
	New func() O
	// Run is the operator's pass over obj, a deep copy it may change (status above all).
	// Errors are transient failures worth a retry with back-off, never "not ready yet":
	// return Wait for that, and Terminal for a spec no retry can fix.
	Run func(ctx context.Context, obj O) (Result, error)
	// Conditions returns obj's status conditions, whose transitions become events; nil
	// records no events.
	Conditions func(obj O) []metav1.Condition
	// OwnEvents: the operator's events are a list of its own, not one per condition
	// transition. Run records them through EventsOf(ctx): actions at once (Record), states
	// once the status write that carries them succeeded (OnTransition, judged by
	// Conditions against the last status written). Needs Conditions.
	OwnEvents bool
	// ObserveGeneration stamps status.observedGeneration; it is called only after a pass
	// without error (a Terminal result included: the spec was fully judged).
	ObserveGeneration func(obj O, generation int64)
	// Finalizer, when set, is added to every object not being deleted (then the pass ends;
	// the update's watch event starts the next one, so the controller must not filter
	// metadata-only updates with a GenerationChangedPredicate) and removed once Finalize
	// returns Done for an object being deleted.
	Finalizer string
	// Finalize cleans up what owner references cannot (external state). Optional.
	Finalize func(ctx context.Context, obj O) (Result, error)
	// Summary tells which condition types are negative-polarity, so an event for an
	// abnormal condition is a Warning.
	Summary []conditions.SummaryOption
	// FoldNormalEvents are condition types whose Normal transitions in one pass are
	// recorded as one event rather than one each: named after the last of them (its
	// reason, its type as the action, its message), the note listing them all. Every
	// abnormal transition keeps its own Warning, and other types their own events. For a
	// pass that moves through several conditions at once (lifecycle phases), where each
	// event is one more write to the API server. Empty: one event per transition.
	FoldNormalEvents []string
	// OnGone is called when key is found gone (NotFound), or found holding an object of
	// another UID, with the UID it held ("" when this process never saw it): the place to
	// drop what the operator keeps per object (connections, back-off counters, metric
	// series). Optional.
	OnGone func(key types.NamespacedName, uid types.UID)
}

// Reconciler runs Config's pass; it implements reconcile.Reconciler.
type Reconciler[O client.Object] struct {
	cfg     Config[O]
	metrics *Metrics
	memory  memory[O]
}

// New checks cfg and returns its reconciler, registering the operator's metrics.
func New[O client.Object](cfg Config[O]) (*Reconciler[O], error) {
	var errs []error
	if cfg.Name == "" {
		errs = append(errs, errors.New("reconciler: Name is empty"))
	}
	if cfg.Client == nil {
		errs = append(errs, errors.New("reconciler: Client is nil"))
	}
	if cfg.New == nil || cfg.Run == nil {
		errs = append(errs, errors.New("reconciler: New and Run are required"))
	}
	if cfg.Finalize != nil && cfg.Finalizer == "" {
		errs = append(errs, errors.New("reconciler: Finalize needs a Finalizer name"))
	}
	if cfg.OwnEvents && cfg.Conditions == nil {
		errs = append(errs, errors.New("reconciler: OwnEvents needs Conditions (transitions are judged on them)"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &Reconciler[O]{cfg: cfg, metrics: MetricsFor(cfg.Name)}, nil
}

// Metrics are the reconciler's metrics.
func (r *Reconciler[O]) Metrics() *Metrics { return r.metrics }

// Remembered is how many objects the reconciler keeps in memory (those seen and not yet
// found gone).
func (r *Reconciler[O]) Remembered() int { return r.memory.len() }

// WrittenCopies is how many copies of status writes the reconciler holds for objects whose
// cache has yet to show them.
func (r *Reconciler[O]) WrittenCopies() int { return r.memory.writtenCopies() }

// TrackCache lets the reconciler see the cache's updates of its kind (obj: an empty object
// of it), so that it keeps the copy of a status write only until the cache holds it. Without
// it the copy stays until the object's next pass: for a converged object, whose status
// writes filter out its next events, that is one copy of every object for as long as it
// exists. Call it before the manager starts (or its cache has the informer).
func (r *Reconciler[O]) TrackCache(ctx context.Context, informers cache.Informers, obj O) error {
	inf, err := informers.GetInformer(ctx, obj)
	if err != nil {
		return fmt.Errorf("reconciler: informer to track the cache: %w", err)
	}
	seen := func(o any) {
		if obj, ok := o.(client.Object); ok {
			r.memory.seen(client.ObjectKeyFromObject(obj), obj.GetUID(), obj.GetResourceVersion())
		}
	}
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { seen(o) },
		UpdateFunc: func(_, o any) { seen(o) },
	})
	return err
}

// Reconcile runs one pass for req.
func (r *Reconciler[O]) Reconcile(ctx context.Context, req reconcile.Request) (res reconcile.Result, err error) {
	began := time.Now()
	defer func() { r.metrics.Observe(began, res, err) }()

	obj := r.cfg.New()
	if err := r.cfg.Client.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			r.gone(req.NamespacedName, r.memory.gone(req.NamespacedName))
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	// Transitions, the no-op check and the patch are judged from the last status write
	// when the cache has not seen it yet.
	obj, replaced := r.memory.fresher(req.NamespacedName, obj)
	if replaced != "" {
		r.gone(req.NamespacedName, replaced)
	}
	if !obj.GetDeletionTimestamp().IsZero() {
		return r.finalize(ctx, obj)
	}
	if r.cfg.Finalizer != "" {
		added, err := EnsureFinalizer(ctx, r.cfg.Client, obj, r.cfg.Finalizer)
		if err != nil || added {
			return reconcile.Result{}, ignoreStale(err)
		}
	}

	after, ok := obj.DeepCopyObject().(O)
	if !ok {
		return reconcile.Result{}, fmt.Errorf("reconciler: deep copy of %T is a %T", obj, obj.DeepCopyObject())
	}
	evs := &PassEvents{rec: r.cfg.Recorder, obj: after}
	out, runErr := r.cfg.Run(withEvents(ctx, evs), after)
	if runErr == nil && r.cfg.ObserveGeneration != nil {
		r.cfg.ObserveGeneration(after, obj.GetGeneration())
	}
	written, err := status.Write(ctx, r.cfg.Client, obj, after)
	if err != nil {
		if isStale(err) {
			// A newer version or a deletion is on its way; its event reconciles again.
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, errors.Join(runErr, err)
	}
	if written {
		r.memory.wrote(req.NamespacedName, after)
		r.announce(obj, after)
		if r.cfg.OwnEvents {
			evs.flush(r.cfg.Conditions(obj), r.cfg.Conditions(after))
		}
	}
	if runErr != nil {
		return reconcile.Result{}, runErr
	}
	return out.controllerResult()
}

func (r *Reconciler[O]) gone(key types.NamespacedName, uid types.UID) {
	if r.cfg.OnGone != nil {
		r.cfg.OnGone(key, uid)
	}
}

// finalize runs the finalizer step of an object being deleted; without a finalizer of
// ours on it there is nothing to do (owner references let the garbage collector remove
// the children).
func (r *Reconciler[O]) finalize(ctx context.Context, obj O) (reconcile.Result, error) {
	if r.cfg.Finalizer == "" || !controllerutil.ContainsFinalizer(obj, r.cfg.Finalizer) {
		return reconcile.Result{}, nil
	}
	out := Done()
	if r.cfg.Finalize != nil {
		var err error
		if out, err = r.cfg.Finalize(ctx, obj); err != nil {
			return reconcile.Result{}, err
		}
	}
	if out.after > 0 || out.terminal != nil {
		return out.controllerResult()
	}
	return reconcile.Result{}, ignoreStale(RemoveFinalizer(ctx, r.cfg.Client, obj, r.cfg.Finalizer))
}

// announce records an event for every condition that appeared or changed status or
// reason: reason = the condition's reason, action = its type, Warning when abnormal.
// Messages alone changing are no transition (events fold by reason anyway). With
// FoldNormalEvents the Normal ones are one event (see there).
func (r *Reconciler[O]) announce(before, after O) {
	if r.cfg.Recorder == nil || r.cfg.Conditions == nil || r.cfg.OwnEvents {
		return
	}
	old := r.cfg.Conditions(before)
	var normal []metav1.Condition
	for _, c := range r.cfg.Conditions(after) {
		if prev := conditions.Get(old, c.Type); prev != nil && prev.Status == c.Status && prev.Reason == c.Reason {
			continue
		}
		if conditions.IsIssue(c, r.cfg.Summary...) {
			r.cfg.Recorder.Eventf(after, nil, corev1.EventTypeWarning, c.Reason, c.Type, "%s: %s", c.Type, c.Message)
			continue
		}
		if slices.Contains(r.cfg.FoldNormalEvents, c.Type) {
			normal = append(normal, c)
			continue
		}
		r.cfg.Recorder.Eventf(after, nil, corev1.EventTypeNormal, c.Reason, c.Type, "%s: %s", c.Type, c.Message)
	}
	switch len(normal) {
	case 0:
	case 1:
		c := normal[0]
		r.cfg.Recorder.Eventf(after, nil, corev1.EventTypeNormal, c.Reason, c.Type, "%s: %s", c.Type, c.Message)
	default:
		last := normal[len(normal)-1]
		steps := make([]string, len(normal))
		for i, c := range normal {
			steps[i] = c.Type + " " + c.Reason
		}
		r.cfg.Recorder.Eventf(after, nil, corev1.EventTypeNormal, last.Reason, last.Type, "%s: %s (this pass: %s)", last.Type, last.Message, strings.Join(steps, ", "))
	}
}

// EnsureFinalizer adds finalizer to obj unless it is there or obj is being deleted (a
// finalizer added then would hold the object forever). It reports whether it wrote;
// callers end the pass then and act on the next one. The patch carries obj's
// resourceVersion, so it never overwrites a concurrent change of the finalizer list.
func EnsureFinalizer(ctx context.Context, c client.Client, obj client.Object, finalizer string) (bool, error) {
	if !obj.GetDeletionTimestamp().IsZero() || controllerutil.ContainsFinalizer(obj, finalizer) {
		return false, nil
	}
	before, ok := obj.DeepCopyObject().(client.Object)
	if !ok {
		return false, fmt.Errorf("reconciler: %T is not a client.Object", obj)
	}
	controllerutil.AddFinalizer(obj, finalizer)
	if err := c.Patch(ctx, obj, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return false, fmt.Errorf("adding finalizer %s: %w", finalizer, err)
	}
	return true, nil
}

// RemoveFinalizer removes finalizer from obj if it is there, with the same optimistic lock.
func RemoveFinalizer(ctx context.Context, c client.Client, obj client.Object, finalizer string) error {
	if !controllerutil.ContainsFinalizer(obj, finalizer) {
		return nil
	}
	before, ok := obj.DeepCopyObject().(client.Object)
	if !ok {
		return fmt.Errorf("reconciler: %T is not a client.Object", obj)
	}
	controllerutil.RemoveFinalizer(obj, finalizer)
	if err := c.Patch(ctx, obj, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("removing finalizer %s: %w", finalizer, err)
	}
	return nil
}

// isStale: the object changed or went since it was read; the next event reconciles.
func isStale(err error) bool { return apierrors.IsConflict(err) || apierrors.IsNotFound(err) }

func ignoreStale(err error) error {
	if err != nil && isStale(err) {
		return nil
	}
	return err
}
