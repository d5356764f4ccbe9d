// Package controller reconciles ValdOperatorReleases into ValdReleases.
package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	valdv1 "github.com/opsuite/suite/api/vald/v1"
	"github.com/opsuite/suite/services/vald-operator/internal/lifecycle"
	"github.com/opsuite/suite/services/vald-operator/internal/resources"
	"github.com/opsuite/suite/shared/conditions"
	"github.com/opsuite/suite/shared/reconciler"
	"github.com/opsuite/suite/shared/ssa"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
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
	// RequireDeployed makes WaitingCreateVrs wait until the Vald Helm Operator reports every
	// ValdRelease Deployed; without it, existing with the current generation is enough.
	RequireDeployed bool
	// HelmStatusWait is how long a ValdRelease may go without any Vald Helm Operator status
	// before the condition asks whether that operator runs.
	HelmStatusWait time.Duration
	// NodePoolLossGrace is how long the ValdReleases of an entry whose node-pool match was
	// lost are kept before they are pruned; zero prunes them at once.
	NodePoolLossGrace time.Duration
	// CRDPollInterval is how often discovery is asked whether the ValdRelease CRD is
	// served, until it is.
	CRDPollInterval time.Duration
	// Build is the builder's configuration.
	Build resources.Config

	// retryBaseDelay is the first retry of a pass halted by an API error or a name held by
	// something else; each further failure doubles it up to RequeueAfter.
	retryBaseDelay time.Duration
	// wrapClient wraps the manager's client (tests and benchmarks count writes with it).
	wrapClient func(client.Client) client.Client
	// cacheUntracked keeps the kit's copy of each status write until the release's next
	// pass rather than until the cache holds it: for tests whose wrapped client lags
	// behind the cache it reads (testenv.StaleReads), which the cache's own events would
	// show caught up.
	cacheUntracked bool
}

// DefaultOptions are the options without flags or environment. A pass spends most of its
// time waiting on three round trips to the API server (two applies, a status write), so 16
// passes in flight keep it busy, as 16 parallel clients do.
func DefaultOptions() Options {
	return Options{RequeueAfter: 30 * time.Second, MaxConcurrentReconciles: 16, CRDPollInterval: 10 * time.Second, NodePoolLossGrace: 10 * time.Minute, RequireDeployed: true, HelmStatusWait: 2 * time.Minute, retryBaseDelay: 500 * time.Millisecond, Build: resources.DefaultConfig()}
}

// Validate reports every invalid option at once.
func (o Options) Validate() error {
	var errs []error
	if o.RequeueAfter <= 0 {
		errs = append(errs, fmt.Errorf("requeue interval %s must be positive", o.RequeueAfter))
	}
	if o.HelmStatusWait <= 0 {
		errs = append(errs, fmt.Errorf("helm status wait %s must be positive", o.HelmStatusWait))
	}
	if o.NodePoolLossGrace < 0 {
		errs = append(errs, fmt.Errorf("node-pool loss grace %s must not be negative", o.NodePoolLossGrace))
	}
	if o.CRDPollInterval <= 0 {
		errs = append(errs, fmt.Errorf("CRD poll interval %s must be positive", o.CRDPollInterval))
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

	// retry spaces the retries of passes halted by API errors, per release.
	retry workqueue.TypedRateLimiter[client.ObjectKey]
	// waiting are the releases waiting for a ValdRelease name held by something else.
	waiting nameWaiters
	// index narrows the cache's lists of ValdReleases to one release's.
	index *valdReleaseIndex
	// metrics are the controller's own series (metrics.go).
	metrics *controllerMetrics

	// pass is the shared skeleton around run: get, deep copy, one status write, events,
	// requeue mapping and the vald_operator_reconcile_* metrics.
	pass *reconciler.Reconciler[*valdv1.ValdOperatorRelease]
}

// +kubebuilder:rbac:groups=vald.vdaas.org,resources=valdoperatorreleases,verbs=list;watch
// +kubebuilder:rbac:groups=vald.vdaas.org,resources=valdoperatorreleases/status,verbs=patch
// +kubebuilder:rbac:groups=vald.vdaas.org,resources=valdoperatorreleases/finalizers,verbs=update
// +kubebuilder:rbac:groups=vald.vdaas.org,resources=valdreleases,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=nodes,verbs=list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// SetupWithManager builds the reconciler from mgr and registers it: it watches releases,
// the ValdReleases they own and, with the node-pool match on, the labels of Nodes.
func SetupWithManager(mgr ctrl.Manager, opts Options) (*Reconciler, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	m, err := newControllerMetrics()
	if err != nil {
		return nil, err
	}
	index := &valdReleaseIndex{}
	var c client.Client = indexedClient{Client: mgr.GetClient(), index: index}
	if opts.wrapClient != nil {
		c = opts.wrapClient(c)
	}
	r := &Reconciler{
		Client:   c,
		Applier:  ssa.Applier{Client: createFirstClient{Client: c, live: mgr.GetAPIReader(), metrics: m}, FieldManager: resources.FieldManager},
		Recorder: mgr.GetEventRecorder(Name),
		Options:  opts,
		retry:    workqueue.NewTypedItemExponentialFailureRateLimiter[client.ObjectKey](opts.retryBaseDelay, opts.RequeueAfter),
		index:    index,
		metrics:  m,
	}
	// observedGeneration is stamped by run itself: a pass that met an API error reports it
	// in the conditions and retries without one, yet did not apply its generation.
	pass, err := reconciler.New(reconciler.Config[*valdv1.ValdOperatorRelease]{
		Name:       Name,
		Client:     c,
		Recorder:   r.Recorder,
		New:        func() *valdv1.ValdOperatorRelease { return &valdv1.ValdOperatorRelease{} },
		Run:        r.run,
		Conditions: func(v *valdv1.ValdOperatorRelease) []metav1.Condition { return v.Status.Conditions },
		// A hold of ValdReleases is announced as a Warning (it ends in a prune); it does not
		// change status.state, which summarises the phases.
		Summary: []conditions.SummaryOption{conditions.NegativePolarity(append(slices.Clone(conditions.DefaultNegativePolarity), valdv1.ConditionNodePoolMatchLost)...)},
		// A release that converges at once passes all three phases in one pass: one event
		// for them (named after the last) instead of three, each an API server write.
		// Failures keep their own Warning; Switchover and NodePoolMatchLost their own events.
		FoldNormalEvents: []string{valdv1.ConditionWaitingClusterCreate, valdv1.ConditionWaitingCreateVrs, valdv1.ConditionCompleted},
		OnGone:           r.forget,
	})
	if err != nil {
		return nil, err
	}
	r.pass = pass
	// Releases converge in one pass and their status writes bring no other (see
	// specOrMetaChanged): the kit keeps its copy of each write only until the cache has it.
	if !opts.cacheUntracked {
		if err := pass.TrackCache(context.Background(), mgr.GetCache(), &valdv1.ValdOperatorRelease{}); err != nil {
			return nil, err
		}
	}
	// The ValdRelease watch is not registered here but by valdReleaseWatch once the CRD is
	// served (see there why).
	wake := make(chan event.GenericEvent)
	b := ctrl.NewControllerManagedBy(mgr).
		Named("valdoperatorrelease").
		For(&valdv1.ValdOperatorRelease{}, builder.WithPredicates(predicate.Funcs{UpdateFunc: specOrMetaChanged})).
		WatchesRawSource(source.Channel(wake, &handler.EnqueueRequestForObject{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: opts.MaxConcurrentReconciles})
	if opts.RequireNodePoolMatch {
		b = b.WatchesMetadata(nodeMetadata(), nodePoolHandler(mgr.GetClient(), opts.Build),
			builder.WithPredicates(predicate.LabelChangedPredicate{}))
	}
	ctl, err := b.Build(r)
	if err != nil {
		return nil, err
	}
	return r, mgr.Add(&valdReleaseWatch{
		mapper:   mgr.GetRESTMapper(),
		cache:    mgr.GetCache(),
		ctrl:     ctl,
		handler:  handler.EnqueueRequestsFromMapFunc(r.valdReleaseRequests),
		releases: mgr.GetClient(),
		wake:     wake,
		interval: opts.CRDPollInterval,
		index:    index,
	})
}

// specOrMetaChanged passes the updates of a release that can change what a pass does: its
// spec (generation), labels, annotations or deletion. Not the status-only updates, which
// are the controller's own writes: each would bring one more pass that writes nothing (a
// third of the passes while 1,000 releases converge).
func specOrMetaChanged(e event.UpdateEvent) bool {
	o, n := e.ObjectOld, e.ObjectNew
	return o.GetGeneration() != n.GetGeneration() || !n.GetDeletionTimestamp().IsZero() ||
		!maps.Equal(o.GetLabels(), n.GetLabels()) || !maps.Equal(o.GetAnnotations(), n.GetAnnotations())
}

// forget drops what the reconciler keeps per release (retry back-off, a name it waits for)
// once the release is gone.
func (r *Reconciler) forget(key types.NamespacedName, _ types.UID) {
	r.retry.Forget(key)
	r.waiting.done(key)
	r.metrics.releases.Forget(key.Namespace, key.Name)
}

// valdReleaseRequests maps a ValdRelease event to the releases it concerns: the one that
// controls it, the one its label names (which may adopt it), and those waiting for its
// name (a deletion or a released controller frees it).
func (r *Reconciler) valdReleaseRequests(_ context.Context, vr client.Object) []reconcile.Request {
	var reqs []reconcile.Request
	add := func(key client.ObjectKey) { reqs = append(reqs, reconcile.Request{NamespacedName: key}) }
	if ref := metav1.GetControllerOf(vr); ref != nil && ref.Kind == "ValdOperatorRelease" && ref.APIVersion == valdv1.GroupVersion.String() {
		add(types.NamespacedName{Namespace: vr.GetNamespace(), Name: ref.Name})
	}
	if name := vr.GetLabels()[valdv1.LabelOperatorRelease]; name != "" {
		add(types.NamespacedName{Namespace: vr.GetNamespace(), Name: name})
	}
	for _, release := range r.waiting.waitingFor(client.ObjectKeyFromObject(vr)) {
		add(release)
	}
	return reqs
}

// Reconcile runs one pass of the lifecycle and writes status once. A release being
// deleted needs nothing: the garbage collector removes its ValdReleases through their
// owner references.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	return r.pass.Reconcile(ctx, req)
}

// run evaluates the lifecycle on vor (the skeleton's deep copy) and fills its status.
func (r *Reconciler) run(ctx context.Context, vor *valdv1.ValdOperatorRelease) (reconciler.Result, error) {
	key := client.ObjectKeyFromObject(vor)
	st := &passState{applied: map[client.ObjectKey]client.Object{}, kept: map[client.ObjectKey]bool{}}
	out, err := r.phases(vor, st).Run(ctx, &vor.Status.Conditions, vor.Generation, time.Now())
	if st.matched && err == nil {
		setHoldCondition(vor, st.hold)
		setSwitchoverCondition(vor, st.switchover)
	}
	vor.Status.Phase = out.Phase
	vor.Status.Progress = valdv1.Progress{Total: out.Total, Completed: out.Completed}
	vor.Status.ProgressText = fmt.Sprintf("%d/%d", out.Completed, out.Total)
	vor.Status.State = string(conditions.Summarize(vor.Status.Conditions))
	r.metrics.observe(vor, out)
	if err != nil {
		// Transient (an API error): the conditions say so, observedGeneration stays where
		// it was, and the pass is retried with back-off; not returned as an error, which
		// would only log a stack and back off again.
		var external *lifecycle.RetryError
		if errors.As(err, &external) && external.External {
			log.FromContext(ctx).Info("Waiting for a cause outside the release to go", "reason", err.Error())
		} else {
			log.FromContext(ctx).Error(err, "Failed to reconcile ValdOperatorRelease; retrying")
		}
		return reconciler.Wait(r.retry.When(key)), nil
	}
	vor.Status.ObservedGeneration = vor.Generation
	r.retry.Forget(key)
	// Held ValdReleases are pruned when their grace ends, with or without an event.
	var holdLeft time.Duration
	if len(st.hold.Roles) > 0 {
		holdLeft = max(time.Until(st.hold.Until), time.Second)
	}
	switch {
	case out.Halt != nil && out.Halt.Reason == valdv1.ReasonFailed:
		// No retry helps: the condition, the event and this error say what to change.
		return reconciler.Terminal(fmt.Errorf("phase %s failed: %s", out.Phase, out.Halt.Message)), nil
	case out.Halt == nil && st.switchover != nil && st.switchover.Keeping:
		// The new entries became ready within this pass (after the build kept the old
		// ones): the next pass prunes them; their own events usually bring it first.
		return reconciler.Wait(r.Options.retryBaseDelay), nil
	case out.Halt == nil && holdLeft == 0:
		return reconciler.Done(), nil
	case out.Halt == nil:
		return reconciler.Wait(holdLeft), nil
	case holdLeft > 0:
		return reconciler.Wait(min(holdLeft, r.Options.RequeueAfter)), nil
	default:
		// Pending or Progressing: look again later; watch events usually come first.
		return reconciler.Wait(r.Options.RequeueAfter), nil
	}
}
