// Package node reconciles a ValkeyNode into its workload (one pod) and data PVC,
// reports the pod's and the server's state in the node's status, and applies the
// cluster's live config (CONFIG SET) and ACL users (ACL SETUSER) to the running server.
package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	"github.com/opsuite/suite/services/valkey-operator/internal/resources"
	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
	"github.com/opsuite/suite/shared/reconciler"
	"github.com/opsuite/suite/shared/ssa"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Name is the operator's name: the metrics prefix and the events' reporting controller.
const Name = "valkey-operator"

// EventUsersACLApplyFailed is the Warning event of a failed ACL SETUSER or ACL DELUSER on
// a node. The product document lists no ACL event for nodes and no condition; this one
// follows LiveConfigApplyFailed's naming.
const EventUsersACLApplyFailed = "UsersACLApplyFailed"

// Field indexes on ValkeyNodes, to find the nodes a ConfigMap or Secret change concerns.
const (
	indexConfigMap = "valkeynode.spec.serverConfigMapName"
	indexACLSecret = "valkeynode.spec.usersACLSecretName"
)

// Config configures the controller.
type Config struct {
	// Dial opens an admin connection to a member; default valkey.DialNodeAdmin.
	Dial func(addr string, o valkey.Options) (valkey.NodeAdmin, error)
	// Addr is where a node's server listens; default status.podIP:6379.
	Addr func(*valkeyv1.ValkeyNode) string
	// Options are the credentials (and TLS) to log in as the operator's user. Required.
	Options func(ctx context.Context, n *valkeyv1.ValkeyNode) (valkey.Options, error)
	// Build configures the workload builder.
	Build resources.NodeOptions
	// RequeueAfter is how soon a node that is not ready yet is looked at again when no
	// watch event comes first; default 10s.
	RequeueAfter time.Duration
	// Resync is how often a ready node is looked at again, to notice a role change
	// (failover) that no Kubernetes event announces; default 30s.
	Resync time.Duration
	// RetryBase and RetryMax bound the back-off of failed CONFIG SET and ACL applies;
	// defaults 2s and 5m.
	RetryBase, RetryMax time.Duration
	// CommandTimeout bounds the talk to one server in a pass; default 10s.
	CommandTimeout time.Duration
	// MaxConcurrentReconciles is the number of nodes reconciled at once; default 4.
	MaxConcurrentReconciles int

	// wrapClient wraps the manager's client (tests count writes with it).
	wrapClient func(client.Client) client.Client
}

func (c *Config) defaults() error {
	if c.Options == nil {
		return errors.New("valkeynode controller: Config.Options is required (how the operator logs in to its members)")
	}
	if c.Dial == nil {
		c.Dial = valkey.DialNodeAdmin
	}
	if c.Addr == nil {
		c.Addr = func(n *valkeyv1.ValkeyNode) string {
			return net.JoinHostPort(n.Status.PodIP, strconv.Itoa(resources.ClientPort))
		}
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.RequeueAfter, 10*time.Second)
	def(&c.Resync, 30*time.Second)
	def(&c.RetryBase, 2*time.Second)
	def(&c.RetryMax, 5*time.Minute)
	def(&c.CommandTimeout, 10*time.Second)
	if c.MaxConcurrentReconciles < 1 {
		c.MaxConcurrentReconciles = 4
	}
	return nil
}

// Reconciler is the ValkeyNode controller.
type Reconciler struct {
	client   client.Client
	applier  ssa.Applier
	recorder events.EventRecorder
	cfg      Config
	pass     *reconciler.Reconciler[*valkeyv1.ValkeyNode]

	mu    sync.Mutex
	state map[types.NamespacedName]*nodeState
}

// +kubebuilder:rbac:groups=valkey.io,resources=valkeynodes,verbs=list;watch
// +kubebuilder:rbac:groups=valkey.io,resources=valkeynodes/status,verbs=patch
// +kubebuilder:rbac:groups=apps,resources=statefulsets;deployments,verbs=list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=list;watch;create;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=list;watch
// +kubebuilder:rbac:groups="",resources=services,verbs=list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=nodes,verbs=list;watch
// +kubebuilder:rbac:groups="",resources=configmaps;secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Setup registers the ValkeyNode controller with mgr.
func Setup(mgr ctrl.Manager, cfg Config) error {
	_, err := setup(mgr, cfg)
	return err
}

func setup(mgr ctrl.Manager, cfg Config) (*Reconciler, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	c := mgr.GetClient()
	if cfg.wrapClient != nil {
		c = cfg.wrapClient(c)
	}
	r := &Reconciler{
		client:   c,
		applier:  ssa.Applier{Client: c, FieldManager: resources.NodeFieldManager},
		recorder: mgr.GetEventRecorder(Name),
		cfg:      cfg,
		state:    map[types.NamespacedName]*nodeState{},
	}
	pass, err := reconciler.New(reconciler.Config[*valkeyv1.ValkeyNode]{
		Name:   Name,
		Client: c,
		// No Recorder: the kit would announce every condition transition under the
		// condition's reason, and the product's events are a fixed list.
		New: func() *valkeyv1.ValkeyNode { return &valkeyv1.ValkeyNode{} },
		Run: r.run,
		ObserveGeneration: func(n *valkeyv1.ValkeyNode, generation int64) {
			n.Status.ObservedGeneration = generation
		},
		// A node found gone, or its name found holding a new node, takes what the
		// controller remembers of it along.
		OnGone: r.forget,
	})
	if err != nil {
		return nil, err
	}
	r.pass = pass

	ctx := context.Background()
	idx := mgr.GetFieldIndexer()
	if err := idx.IndexField(ctx, &valkeyv1.ValkeyNode{}, indexConfigMap, func(o client.Object) []string {
		return nonEmpty(o.(*valkeyv1.ValkeyNode).Spec.ServerConfigMapName)
	}); err != nil {
		return nil, fmt.Errorf("valkeynode controller: indexing ValkeyNodes by ConfigMap: %w", err)
	}
	if err := idx.IndexField(ctx, &valkeyv1.ValkeyNode{}, indexACLSecret, func(o client.Object) []string {
		return nonEmpty(o.(*valkeyv1.ValkeyNode).Spec.UsersACLSecretName)
	}); err != nil {
		return nil, fmt.Errorf("valkeynode controller: indexing ValkeyNodes by ACL Secret: %w", err)
	}

	byLabel := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		name := o.GetLabels()[resources.LabelNode]
		if name == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
	})
	return r, ctrl.NewControllerManagedBy(mgr).
		Named("valkeynode").
		For(&valkeyv1.ValkeyNode{}).
		Owns(&appsv1.StatefulSet{}).
		Owns(&appsv1.Deployment{}).
		// The node's own Service (spec.external): its load balancer address arrives in
		// its status.
		Owns(&corev1.Service{}).
		// PVCs and pods by label: a retained PVC has no owner, a pod's owner is the workload.
		Watches(&corev1.PersistentVolumeClaim{}, byLabel).
		Watches(&corev1.Pod{}, byLabel).
		Watches(&corev1.ConfigMap{}, r.referencing(indexConfigMap)).
		Watches(&corev1.Secret{}, r.referencing(indexACLSecret)).
		// A failover changes roles without touching any Kubernetes object; the cluster
		// controller's status changes with each topology step, so its nodes look again
		// then instead of at the next resync.
		Watches(&valkeyv1.ValkeyCluster{}, handler.EnqueueRequestsFromMapFunc(r.clusterNodes)).
		WithOptions(controller.Options{MaxConcurrentReconciles: cfg.MaxConcurrentReconciles}).
		Complete(r)
}

// clusterNodes maps a ValkeyCluster to its ValkeyNodes.
func (r *Reconciler) clusterNodes(ctx context.Context, o client.Object) []reconcile.Request {
	var list valkeyv1.ValkeyNodeList
	if err := r.client.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.MatchingLabels{resources.LabelCluster: o.GetName()}); err != nil {
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for _, n := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: n.Namespace, Name: n.Name}})
	}
	return out
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

// referencing maps a ConfigMap or Secret to the nodes whose spec names it.
func (r *Reconciler) referencing(index string) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		var list valkeyv1.ValkeyNodeList
		if err := r.client.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.MatchingFields{index: o.GetName()}); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "listing ValkeyNodes that reference", "object", o.GetName())
			return nil
		}
		out := make([]reconcile.Request, 0, len(list.Items))
		for _, n := range list.Items {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: n.Namespace, Name: n.Name}})
		}
		return out
	})
}

// Reconcile runs one pass for a ValkeyNode.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	return r.pass.Reconcile(ctx, req)
}

// forget drops what the controller remembers of the node at key: the kit found it gone.
func (r *Reconciler) forget(key types.NamespacedName, _ types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.state, key)
}

// remembered is how many nodes the controller keeps state of.
func (r *Reconciler) remembered() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.state)
}

// clusterRef is the ValkeyCluster a node belongs to, as an event's related object.
func clusterRef(n *valkeyv1.ValkeyNode) *valkeyv1.ValkeyCluster {
	c := &valkeyv1.ValkeyCluster{
		TypeMeta:   metav1.TypeMeta{APIVersion: valkeyv1.GroupVersion.String(), Kind: "ValkeyCluster"},
		ObjectMeta: metav1.ObjectMeta{Namespace: n.Namespace, Name: n.Spec.ClusterName},
	}
	for _, o := range n.OwnerReferences {
		if o.Kind == "ValkeyCluster" && o.Name == n.Spec.ClusterName {
			c.UID = o.UID
		}
	}
	return c
}
