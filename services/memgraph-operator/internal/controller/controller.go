// Package controller is the MemgraphCluster controller: it writes each role's StatefulSet
// and headless Service, the client Service and the PodDisruptionBudgets by server-side
// apply, checks vm.max_map_count on the cluster's nodes through the node agent, drives the
// HA membership through one registration call per pass once every pod is ready, shrinks a
// StatefulSet only after the registration has retired its highest members, and reports
// status, conditions, events and metrics.
package controller

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/services/memgraph-operator/internal/planner"
	"github.com/opsuite/suite/services/memgraph-operator/internal/resources"
	"github.com/opsuite/suite/shared/children"
	"github.com/opsuite/suite/shared/conditions"
	"github.com/opsuite/suite/shared/metrics"
	"github.com/opsuite/suite/shared/reconciler"
	"github.com/opsuite/suite/shared/ssa"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// Name is the controller's name; its events come from it.
const Name = "memgraphcluster-controller"

// +kubebuilder:rbac:groups=memgraph.com,resources=memgraphclusters,verbs=list;watch
// +kubebuilder:rbac:groups=memgraph.com,resources=memgraphclusters/status,verbs=patch
// Owner references with blockOwnerDeletion need update on the owner's finalizers where
// OwnerReferencesPermissionEnforcement is on.
// +kubebuilder:rbac:groups=memgraph.com,resources=memgraphclusters/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=services,verbs=list;watch;create;patch;delete
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=list;watch
// +kubebuilder:rbac:groups="",resources=pods/status,verbs=patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Registrar brings the cluster's HA membership towards want: one call per pass, only when
// every pod of both StatefulSets is ready. It reads the leader's SHOW INSTANCES, issues
// what is missing (ADD COORDINATOR, REGISTER INSTANCE, SET MAIN only without a MAIN,
// retirements) and reports what it saw.
type Registrar interface {
	Register(ctx context.Context, c *memgraphv1.MemgraphCluster, creds Credentials, want planner.Desired) (Registration, error)
}

// Registration is what one registration pass observed and did.
type Registration struct {
	// Leader and Main are names as SHOW INSTANCES shows them; empty when there is none.
	Leader, Main string
	// MainBolt is where the operator reaches the MAIN, its pod's DNS name (not the
	// bolt_server it advertises to clients; "" when there is no MAIN): where the admin
	// credentials are checked and changed.
	MainBolt string
	// Coordinators and DataInstances count the registered members.
	Coordinators, DataInstances int32
	// Converged: membership equals want and nothing retiring is left in it.
	Converged bool
	// Reason and Message say why not converged (a ReasonXxx of the API), "" when converged.
	Reason, Message string
	// RetiredCoordinators (ids) and RetiredData (names) have left the membership: their
	// StatefulSet may now shed them.
	RetiredCoordinators []int
	RetiredData         []string
	// Executed are the commands run this pass.
	Executed []string
	// LagRead says SHOW REPLICATION LAG was read this pass; Lagging then names the
	// replicas that have not caught up with the MAIN.
	LagRead bool
	Lagging []string
	// CoordinatorsBehind names the coordinators whose own view of the cluster did not
	// match the leader's this pass (not caught up with the Raft log, or not answering).
	CoordinatorsBehind []string
	// Unanswered names the members that did not answer the operator this pass while the
	// leader shows them up (all that did not answer when no leader was found),
	// each as "name (cause)": Converged=False MembersUnreachable, and the pass changed
	// nothing in the cluster.
	Unanswered []string
	// DataRoles are the data instances the leader's SHOW INSTANCES shows up, by name, with
	// their role (main or replica); nil when no leader answered this pass, and then the
	// role-assigned gates are left as they are.
	DataRoles map[string]string
	// View is what the failover watch compares (executor.ViewKey): the leader and each
	// member's role and health; "" from a Registrar that does not say.
	View string
}

// Observer reads the leader's SHOW INSTANCES and changes nothing. A Registrar that is one
// keeps status.main and status.leader current where the registration does not run (pods
// not all ready) and, through the failover watch (watch.go), between the resyncs of a
// steady cluster: the coordinators' failover makes no Kubernetes event.
type Observer interface {
	Observe(ctx context.Context, c *memgraphv1.MemgraphCluster, creds Credentials, want planner.Desired) (Registration, error)
}

// SysctlChecker asks a node's agent for vm.max_map_count against a minimum (raising it
// where the agent is allowed to).
type SysctlChecker interface {
	MaxMapCount(ctx context.Context, node string, minimum int64) (SysctlReport, error)
}

// SysctlReport is a node's vm.max_map_count after the check.
type SysctlReport struct {
	Value, Minimum int64
	Met, Raised    bool
}

// Config is what the controller needs besides the manager; zero fields take defaults.
type Config struct {
	// Operator names the metrics (memgraph-operator -> memgraph_operator_reconcile_total).
	Operator string
	// Registrar drives the HA membership; nil leaves Converged Unknown (no data plane).
	Registrar Registrar
	// Sysctls checks the nodes; nil leaves NodesPrepared Unknown (no node agent).
	Sysctls SysctlChecker
	// Credentials applies a changed spec.auth Secret to the MAIN; nil takes the
	// Registrar when it is one, else the credentials are not checked.
	Credentials CredentialSyncer
	// Poll is how soon a pass that waits for the data plane or the workloads looks again.
	Poll time.Duration
	// Resync is how often a converged cluster is re-registered: a registration a pod lost
	// (wiped storage, a restart) makes no watch event.
	Resync time.Duration
	// Watch is how often the failover watch reads the coordinators' view of each steady
	// cluster between resyncs (one SHOW INSTANCES per coordinator, no API call), starting
	// a pass when the leader, a MAIN or a member's health changed. Only with a Registrar
	// that is an Observer.
	Watch time.Duration
	// SysctlRecheck is how long a node's met vm.max_map_count is trusted.
	SysctlRecheck time.Duration
	// SysctlRetry is how soon a node found unmet, or whose agent did not answer, is asked again.
	SysctlRetry time.Duration
	// OperatorImage is the operator's own image, which every member runs as the metrics
	// exporter and data-instance pods as the backup agent sidecar and the restore init
	// container; empty leaves them out (spec.metricsExporter, spec.backup and
	// spec.bootstrap then do nothing).
	OperatorImage string
}

func (cfg *Config) defaults() {
	if cs, ok := cfg.Registrar.(CredentialSyncer); ok && cfg.Credentials == nil {
		cfg.Credentials = cs
	}
	if cfg.Operator == "" {
		cfg.Operator = "memgraph-operator"
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 3 * time.Second
	}
	if cfg.Resync <= 0 {
		cfg.Resync = 30 * time.Second
	}
	if cfg.Watch <= 0 {
		cfg.Watch = 5 * time.Second
	}
	if cfg.SysctlRecheck <= 0 {
		cfg.SysctlRecheck = 10 * time.Minute
	}
	if cfg.SysctlRetry <= 0 {
		cfg.SysctlRetry = time.Minute
	}
}

// Controller reconciles MemgraphClusters.
type Controller struct {
	cfg    Config
	client client.Client
	// secrets reads the spec's Secrets straight from the API server: a cached client
	// would keep every Secret of the cluster in memory to serve a few reads per pass
	// (their changes are watched by metadata only: secretwatch.go).
	secrets  client.Reader
	apply    ssa.Applier
	recorder events.EventRecorder
	metrics  *metrics.Objects
	// mains is each cluster's MAIN as the last pass saw it (main_changes_total).
	mains *mainTracker
	// watch reads the coordinators of steady clusters between passes (watch.go).
	watch *failoverWatch

	// volumeHosts caches the host each PersistentVolume is pinned to (lost.go).
	volumeHosts sync.Map

	mu sync.Mutex
	// nodes remembers each node's last check, so passes do not call the agents each time.
	nodes map[string]nodeCheck
}

// Setup adds the controller to mgr.
func Setup(mgr ctrl.Manager, cfg Config) error {
	cfg.defaults()
	m, err := newMetrics(cfg.Operator)
	if err != nil {
		return err
	}
	ctl := &Controller{
		cfg:      cfg,
		client:   mgr.GetClient(),
		secrets:  mgr.GetAPIReader(),
		apply:    ssa.Applier{Client: mgr.GetClient(), FieldManager: resources.FieldManager},
		recorder: mgr.GetEventRecorder(Name),
		metrics:  m,
		mains:    newMainTracker(),
		nodes:    map[string]nodeCheck{},
	}
	ctl.watch = newFailoverWatch(cfg)
	r, err := reconciler.New(reconciler.Config[*memgraphv1.MemgraphCluster]{
		Name:   cfg.Operator,
		Client: mgr.GetClient(),
		// The kit records an event per condition transition, reason = the condition's.
		Recorder: mgr.GetEventRecorder(Name),
		New:      func() *memgraphv1.MemgraphCluster { return &memgraphv1.MemgraphCluster{} },
		Run:      ctl.run,
		Conditions: func(c *memgraphv1.MemgraphCluster) []metav1.Condition {
			return c.Status.Conditions
		},
		ObserveGeneration: func(c *memgraphv1.MemgraphCluster, gen int64) { c.Status.ObservedGeneration = gen },
		// MemberLost True is an issue: its events are Warnings.
		Summary: []conditions.SummaryOption{conditions.NegativePolarity(append(slices.Clone(conditions.DefaultNegativePolarity), memgraphv1.ConditionMemberLost)...)},
		// A gone cluster's series are deleted.
		OnGone: func(key types.NamespacedName, _ types.UID) {
			m.Forget(key.Namespace, key.Name)
			ctl.mains.forget(key)
			ctl.watch.forget(key)
		},
	})
	if err != nil {
		return err
	}
	if ctl.watch.observer != nil {
		if err := mgr.Add(ctl.watch); err != nil {
			return err
		}
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("memgraphcluster").
		For(&memgraphv1.MemgraphCluster{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Owns(&appsv1.StatefulSet{}).
		Owns(&corev1.Service{}).
		Owns(&policyv1.PodDisruptionBudget{}).
		WatchesMetadata(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(secretToClusters(mgr.GetClient())), builder.WithPredicates(secretChanged)).
		// A pod landing on a node is when that node's vm.max_map_count is checked.
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(children.OwnerByLabel(resources.LabelCluster, map[string]string{resources.LabelManagedBy: resources.ManagedBy})),
			builder.WithPredicates(predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
				return e.ObjectOld.(*corev1.Pod).Spec.NodeName != e.ObjectNew.(*corev1.Pod).Spec.NodeName
			}})).
		// The failover watch's wake-ups: the coordinators' view of a steady cluster changed.
		WatchesRawSource(source.Channel(ctl.watch.wake, &handler.EnqueueRequestForObject{})).
		Complete(r)
}

// CacheByObject restricts the manager's pod cache to the operator's own pods, and keeps
// of the Secrets (watched by metadata only: the operator writes none, every one it reads
// is the user's) their names, labels and versions: no annotations, where kubectl's
// last-applied-configuration holds a Secret's data, no managed fields.
func CacheByObject() map[client.Object]cache.ByObject {
	return map[client.Object]cache.ByObject{
		&corev1.Pod{}:    {Label: labels.SelectorFromSet(labels.Set{resources.LabelManagedBy: resources.ManagedBy})},
		&corev1.Secret{}: {Transform: namesOnly},
	}
}

// ManagerOptions applies CacheByObject and keeps Secrets and ConfigMaps out of the
// cache-backed client: a read of one goes to the API server instead of starting an
// informer that would hold every Secret (or ConfigMap) of the watched namespaces.
func ManagerOptions(mo *ctrl.Options) {
	if mo.Cache.ByObject == nil {
		mo.Cache.ByObject = map[client.Object]cache.ByObject{}
	}
	maps.Copy(mo.Cache.ByObject, CacheByObject())
	if mo.Client.Cache == nil {
		mo.Client.Cache = &client.CacheOptions{}
	}
	mo.Client.Cache.DisableFor = append(mo.Client.Cache.DisableFor, &corev1.Secret{}, &corev1.ConfigMap{})
}

// namesOnly drops a cached object's annotations and managed fields.
func namesOnly(in any) (any, error) {
	if o, ok := in.(client.Object); ok {
		o.SetAnnotations(nil)
		o.SetManagedFields(nil)
	}
	return in, nil
}
