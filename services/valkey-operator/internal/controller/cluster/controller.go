// Package cluster is the ValkeyCluster controller: it writes the cluster's Service,
// Secrets, ConfigMap, PodDisruptionBudget, with the exporter its metrics Service and
// ServiceMonitor (monitoring.go), and one ValkeyNode per member, then drives the
// members' cluster topology (meet, slots, replicas, rebalancing, draining, forgetting)
// through the pure planner, rolls spec changes one member at a time, and reports status
// and events as the product document describes them.
package cluster

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	"github.com/opsuite/suite/services/valkey-operator/internal/connect"
	"github.com/opsuite/suite/services/valkey-operator/internal/executor"
	"github.com/opsuite/suite/services/valkey-operator/internal/resources"
	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
	"github.com/opsuite/suite/shared/children"
	"github.com/opsuite/suite/shared/metrics"
	"github.com/opsuite/suite/shared/reconciler"
	"github.com/opsuite/suite/shared/ssa"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Name is the controller's name: events come from it, metrics are named after the operator.
const Name = "valkeycluster-controller"

// +kubebuilder:rbac:groups=valkey.io,resources=valkeyclusters,verbs=list;watch
// +kubebuilder:rbac:groups=valkey.io,resources=valkeyclusters/status,verbs=patch
// Owner references with blockOwnerDeletion need update on the owner's finalizers where
// OwnerReferencesPermissionEnforcement is on.
// +kubebuilder:rbac:groups=valkey.io,resources=valkeyclusters/finalizers;valkeynodes/finalizers,verbs=update
// +kubebuilder:rbac:groups=valkey.io,resources=valkeynodes,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=services;configmaps;secrets,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=list;watch
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Dialer opens an admin connection to one member.
type Dialer func(addr string, o valkey.Options) (valkey.Conn, error)

// Config is what the controller needs besides the manager; zero fields take the defaults.
type Config struct {
	// Operator names the metrics (valkey-operator -> valkey_operator_reconcile_total).
	Operator string
	// Dial opens member connections (default valkey.Dial).
	Dial Dialer
	// Addr is the address of a member (default <status.podIP>:6379).
	Addr func(n *valkeyv1.ValkeyNode) string
	// BusPort is a member's cluster bus port (default 0: the server's, client port + 10000).
	BusPort func(n *valkeyv1.ValkeyNode) int
	// Options are the credentials for cluster's members (default: the operator's user,
	// password from the internal Secret).
	Options func(ctx context.Context, c *valkeyv1.ValkeyCluster) (valkey.Options, error)
	// FailoverTimeout bounds a proactive failover before a primary's pod is replaced.
	FailoverTimeout time.Duration
	// Poll is how soon a pass that waits for the data plane looks again.
	Poll time.Duration
	// ReplicaAckGrace is how long slot moves may keep being refused because a primary's
	// replicas did not acknowledge CLUSTER SETSLOT in time (Valkey 8.0+; a replica loading
	// a sync, a congested link) before the cluster is Degraded (default 2 minutes). Within
	// it each pass tries again and the cluster reports that it waits for them.
	ReplicaAckGrace time.Duration
	// MonitorRecheck is how soon a cluster whose ServiceMonitor CRD was missing looks
	// for it again (default 3 minutes).
	MonitorRecheck time.Duration
	// Namespaces are those the manager watches (empty: all); the users' Secrets are
	// watched there.
	Namespaces []string
}

func (cfg *Config) defaults(c client.Reader) {
	if cfg.Operator == "" {
		cfg.Operator = "valkey-operator"
	}
	if cfg.Dial == nil {
		cfg.Dial = valkey.Dial
	}
	if cfg.Addr == nil {
		cfg.Addr = PodAddr
	}
	if cfg.BusPort == nil {
		cfg.BusPort = func(*valkeyv1.ValkeyNode) int { return 0 }
	}
	if cfg.Options == nil {
		cfg.Options = func(ctx context.Context, vc *valkeyv1.ValkeyCluster) (valkey.Options, error) {
			return connect.Options(ctx, c, vc.Namespace, vc.Name, TLSSecretName(vc))
		}
	}
	if cfg.FailoverTimeout <= 0 {
		cfg.FailoverTimeout = 60 * time.Second
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 2 * time.Second
	}
	if cfg.ReplicaAckGrace <= 0 {
		cfg.ReplicaAckGrace = 2 * time.Minute
	}
	if cfg.MonitorRecheck <= 0 {
		cfg.MonitorRecheck = 3 * time.Minute
	}
}

// TLSSecretName is the Secret with the certificate and CA of c's members; "" without TLS.
func TLSSecretName(c *valkeyv1.ValkeyCluster) string {
	t := c.Spec.EffectiveTLS()
	switch {
	case !t.Enabled:
		return ""
	case t.SecretName != "":
		return t.SecretName
	default:
		return resources.SelfSignedTLSSecretName(c.Name)
	}
}

// PodAddr is a member's address: its pod IP and the client port; empty before the pod has one.
func PodAddr(n *valkeyv1.ValkeyNode) string {
	if n.Status.PodIP == "" {
		return ""
	}
	return fmt.Sprintf("%s:%d", n.Status.PodIP, resources.ClientPort)
}

// Controller reconciles ValkeyClusters.
type Controller struct {
	cfg    Config
	client client.Client
	// reader reads from the cache, then from the API server when the cache misses (the
	// cache holds only the Secrets and ConfigMaps with the operator's label).
	reader client.Reader
	// api reads from the API server, for what the operator does not cache (volumes).
	api     client.Reader
	apply   ssa.Applier
	metrics *metrics.Objects

	mu sync.Mutex
	// volumeHosts caches the host each PersistentVolume is pinned to ("" for none), by
	// volume name: a volume's node affinity never changes.
	volumeHosts sync.Map
	// clusters is what the controller keeps of each cluster between passes, dropped
	// through the kit's OnGone when the cluster is found gone.
	clusters map[types.UID]*clusterState
}

// clusterState is one cluster's memory: its connections, kept across passes because the
// executor remembers since when a node is failing (the planner's takeover clock) and
// reconnecting every pass would cost each member a login; and whether a rolling update
// is under way (a member just updated is not ready for a while, and that is
// UpdatingNodes, not AddingNodes).
type clusterState struct {
	// exec dials with opts, read at each dial so changed credentials apply to new
	// connections; nil until the first pass that talks to the members.
	exec    *executor.Executor
	opts    valkey.Options
	rolling bool
	// replicasBehindSince is when slot moves were first refused for replicas that did not
	// acknowledge them, in the run of passes refused so (zero: the last pass was not).
	replicasBehindSince time.Time
}

// stateOf returns c's memory, made empty on first use. Callers hold ctl.mu.
func (ctl *Controller) stateOf(c *valkeyv1.ValkeyCluster) *clusterState {
	st, ok := ctl.clusters[c.UID]
	if !ok {
		st = &clusterState{}
		ctl.clusters[c.UID] = st
	}
	return st
}

// setRolling records whether c has a rolling update under way.
func (ctl *Controller) setRolling(c *valkeyv1.ValkeyCluster, on bool) {
	ctl.mu.Lock()
	defer ctl.mu.Unlock()
	ctl.stateOf(c).rolling = on
}

func (ctl *Controller) isRolling(c *valkeyv1.ValkeyCluster) bool {
	ctl.mu.Lock()
	defer ctl.mu.Unlock()
	st, ok := ctl.clusters[c.UID]
	return ok && st.rolling
}

// replicasBehindSince returns since when c's passes have had slot moves refused for
// replicas that did not acknowledge them, now if this pass is the first.
func (ctl *Controller) replicasBehindSince(c *valkeyv1.ValkeyCluster, now time.Time) time.Time {
	ctl.mu.Lock()
	defer ctl.mu.Unlock()
	st := ctl.stateOf(c)
	if st.replicasBehindSince.IsZero() {
		st.replicasBehindSince = now
	}
	return st.replicasBehindSince
}

// replicasCaughtUp ends c's run of passes refused for unacknowledged slot moves.
func (ctl *Controller) replicasCaughtUp(c *valkeyv1.ValkeyCluster) {
	ctl.mu.Lock()
	defer ctl.mu.Unlock()
	if st, ok := ctl.clusters[c.UID]; ok {
		st.replicasBehindSince = time.Time{}
	}
}

// forget closes the connections of the cluster of uid and drops what the controller keeps
// about it: the reconciler found it gone.
func (ctl *Controller) forget(uid types.UID) {
	ctl.mu.Lock()
	defer ctl.mu.Unlock()
	if st, ok := ctl.clusters[uid]; ok && st.exec != nil {
		st.exec.Close()
	}
	delete(ctl.clusters, uid)
}

// executorFor returns c's executor dialling with opts.
func (ctl *Controller) executorFor(c *valkeyv1.ValkeyCluster, opts valkey.Options) *executor.Executor {
	ctl.mu.Lock()
	defer ctl.mu.Unlock()
	st := ctl.stateOf(c)
	if st.exec == nil {
		st.exec = executor.New(func(addr string) (valkey.Conn, error) { return ctl.cfg.Dial(addr, st.opts) })
	}
	if st.opts.Username != opts.Username || st.opts.Password != opts.Password || (st.opts.TLS == nil) != (opts.TLS == nil) {
		st.exec.Close() // connections logged in otherwise: dial again
	}
	st.opts = opts
	return st.exec
}

// Setup adds the controller to mgr.
func Setup(mgr ctrl.Manager, cfg Config) error {
	reader := connect.CacheThenAPI(mgr.GetClient(), mgr.GetAPIReader())
	cfg.defaults(reader)
	m, err := newMetrics(cfg.Operator)
	if err != nil {
		return err
	}
	ctl := &Controller{
		cfg:      cfg,
		client:   mgr.GetClient(),
		reader:   reader,
		api:      mgr.GetAPIReader(),
		apply:    ssa.Applier{Client: mgr.GetClient(), FieldManager: resources.ClusterFieldManager},
		metrics:  m,
		clusters: map[types.UID]*clusterState{},
	}
	r, err := reconciler.New(reconciler.Config[*valkeyv1.ValkeyCluster]{
		Name:     cfg.Operator,
		Client:   mgr.GetClient(),
		Recorder: mgr.GetEventRecorder(Name),
		New:      func() *valkeyv1.ValkeyCluster { return &valkeyv1.ValkeyCluster{} },
		Run:      ctl.run,
		// Events are the documented ones, not one per condition transition (that would add
		// reasons the document does not list): actions recorded as they happen, states
		// once the status write that carries them succeeded.
		Conditions: func(c *valkeyv1.ValkeyCluster) []metav1.Condition { return c.Status.Conditions },
		OwnEvents:  true,
		ObserveGeneration: func(c *valkeyv1.ValkeyCluster, generation int64) {
			c.Status.ObservedGeneration = generation
		},
		// A gone cluster's series, state and connections go with it; the kit keeps its
		// last status.
		OnGone: func(key types.NamespacedName, uid types.UID) {
			m.Forget(key.Namespace, key.Name)
			ctl.forget(uid)
		},
	})
	if err != nil {
		return err
	}
	userSecrets, err := secretMetadata(mgr, cfg.Namespaces, handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, o *metav1.PartialObjectMetadata) []reconcile.Request {
		return ctl.secretToClusters(ctx, o)
	}))
	if err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("valkeycluster").
		For(&valkeyv1.ValkeyCluster{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Owns(&valkeyv1.ValkeyNode{}).
		Owns(&corev1.Service{}).
		Owns(&corev1.ConfigMap{}).
		Owns(&corev1.Secret{}).
		Owns(&policyv1.PodDisruptionBudget{}).
		// A pod that cannot be scheduled shows on the cluster (PodUnschedulable).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(children.OwnerByLabel(resources.LabelCluster, map[string]string{resources.LabelManagedBy: resources.ManagedBy}))).
		// A user's password Secret changing re-renders the ACL file.
		WatchesRawSource(userSecrets).
		Complete(r)
}

// secretToClusters maps a user's password Secret to the clusters whose users name it.
func (ctl *Controller) secretToClusters(ctx context.Context, o client.Object) []reconcile.Request {
	if o.GetLabels()[resources.LabelManagedBy] == resources.ManagedBy {
		return nil // our own Secrets come through Owns
	}
	var list valkeyv1.ValkeyClusterList
	if err := ctl.client.List(ctx, &list, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		c := &list.Items[i]
		if slices.Contains(resources.PasswordSecretNames(c), o.GetName()) {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: c.Namespace, Name: c.Name}})
		}
	}
	return out
}
