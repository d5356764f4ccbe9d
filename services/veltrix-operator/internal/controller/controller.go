// Package controller is the VeltrixCluster controller. Each pass writes the children in
// the order the cluster needs them — the local-nvme StorageClass, the disks the node agents
// prepare (and vm.max_map_count), the local PersistentVolumes made from the agents'
// answers, the ServiceAccount, the headless and client Services, the admin token Secret,
// the ConfigMap of engine env, the ServiceMonitor (best-effort) and the StatefulSet — then
// drives membership one step at a time (internal/planner decides, internal/executor
// acts), sets each pod's veltrix.io/search-ready readiness gate from INFO, and reports
// conditions, events and metrics. Its finalizer checkpoints every member before the
// cluster goes and, with reclaim policy Delete, deletes the volumes and releases the disks
// through the agents.
package controller

import (
	"fmt"
	"sync"
	"time"

	veltrixv1 "github.com/opsuite/suite/api/veltrix/v1alpha1"
	"github.com/opsuite/suite/services/veltrix-operator/internal/disks"
	"github.com/opsuite/suite/services/veltrix-operator/internal/resources"
	"github.com/opsuite/suite/services/veltrix-operator/internal/veltrix"
	"github.com/opsuite/suite/shared/children"
	"github.com/opsuite/suite/shared/conditions"
	"github.com/opsuite/suite/shared/metrics"
	"github.com/opsuite/suite/shared/reconciler"
	"github.com/opsuite/suite/shared/ssa"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
)

// Name is the controller's name: events come from it.
const Name = "veltrixcluster-controller"

// +kubebuilder:rbac:groups=veltrix.io,resources=veltrixclusters,verbs=list;watch;patch
// +kubebuilder:rbac:groups=veltrix.io,resources=veltrixclusters/status,verbs=patch
// +kubebuilder:rbac:groups=veltrix.io,resources=veltrixclusters/finalizers,verbs=update
// +kubebuilder:rbac:groups=storage.k8s.io,resources=storageclasses,verbs=list;watch;create;patch
// +kubebuilder:rbac:groups="",resources=persistentvolumes,verbs=list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=list;delete
// +kubebuilder:rbac:groups="",resources=nodes,verbs=list;watch
// +kubebuilder:rbac:groups="",resources=services;configmaps;secrets;serviceaccounts,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=list;watch;delete
// +kubebuilder:rbac:groups="",resources=pods/status,verbs=patch
// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=monitoring.coreos.com,resources=servicemonitors,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Config is what the controller needs besides the manager; zero fields take the defaults.
type Config struct {
	// Operator names the metrics (veltrix-operator -> veltrix_operator_reconcile_total).
	Operator string
	// Agents reach the node agents; nil leaves every cluster waiting with a condition that
	// says the operator has no node agents configured.
	Agents disks.Agents
	// PVRoot is the agents' --pv-root (the node-agent chart's pvRoot); default /mnt/opsuite
	// on every node.
	PVRoot disks.PVRoot
	// PoolLabelPrefix is the agents' --pool-label-prefix: a node labelled
	// <prefix>/namespace=<ns> is used by the clusters of <ns> only. Default
	// disks.DefaultPoolLabelPrefix.
	PoolLabelPrefix string
	// Admin makes the admin API client for a token (default veltrix.New).
	Admin func(token string) veltrix.Admin
	// AdminAddr and TextAddr are a member's admin HTTP and text-protocol addresses (default
	// its pod IP with the metrics and server ports); "" while it has none.
	AdminAddr, TextAddr func(c *veltrixv1.VeltrixCluster, pod *corev1.Pod) string
	// MemberAddr is the text-protocol address a member advertises, given to POST
	// /admin/cluster/members when a member is added back (default its pod's
	// --advertise-addr, <pod FQDN>:<serverPort>).
	MemberAddr func(c *veltrixv1.VeltrixCluster, pod string) string
	// Resync is how often a settled cluster is looked at again (the document's 30 s).
	Resync time.Duration
	// Poll is how soon a cluster with work under way is looked at again.
	Poll time.Duration
	// Backoff is the first wait after a node agent problem, doubled per failing pass up to
	// MaxBackoff, so a broken agent is never called in a hot loop.
	Backoff, MaxBackoff time.Duration
	// CheckpointTimeout bounds how long deletion waits for members that do not answer the
	// checkpoint request before it goes on without them (with a Warning event).
	CheckpointTimeout time.Duration
	// Reader reads objects the cache does not hold (the user's Secrets); default the
	// manager's API reader.
	Reader client.Reader
	// RemovalStuckAfter is how long a member may be leaving before the removal is
	// RemovalStuck (default planner.DefaultStuckAfter).
	RemovalStuckAfter time.Duration
	// Client reads and writes everything else; default the manager's client (tests wrap it
	// to count writes).
	Client client.Client
}

func (cfg *Config) defaults(mgr ctrl.Manager) {
	if cfg.Operator == "" {
		cfg.Operator = "veltrix-operator"
	}
	if cfg.PVRoot == nil {
		cfg.PVRoot = disks.SamePVRoot("/mnt/opsuite")
	}
	if cfg.PoolLabelPrefix == "" {
		cfg.PoolLabelPrefix = disks.DefaultPoolLabelPrefix
	}
	if cfg.Admin == nil {
		cfg.Admin = func(token string) veltrix.Admin { return veltrix.New(veltrix.Options{Token: token}) }
	}
	if cfg.AdminAddr == nil {
		cfg.AdminAddr = func(c *veltrixv1.VeltrixCluster, p *corev1.Pod) string { return podAddr(p, c.Spec.MetricsPort) }
	}
	if cfg.TextAddr == nil {
		cfg.TextAddr = func(c *veltrixv1.VeltrixCluster, p *corev1.Pod) string { return podAddr(p, c.Spec.ServerPort) }
	}
	if cfg.MemberAddr == nil {
		cfg.MemberAddr = resources.AdvertiseAddr
	}
	if cfg.Resync <= 0 {
		cfg.Resync = 30 * time.Second
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 5 * time.Second
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = 10 * time.Second
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 5 * time.Minute
	}
	if cfg.CheckpointTimeout <= 0 {
		cfg.CheckpointTimeout = 2 * time.Minute
	}
	if cfg.Reader == nil {
		cfg.Reader = mgr.GetAPIReader()
	}
	if cfg.Client == nil {
		cfg.Client = mgr.GetClient()
	}
}

func podAddr(p *corev1.Pod, port int32) string {
	if p.Status.PodIP == "" {
		return ""
	}
	return fmt.Sprintf("%s:%d", p.Status.PodIP, port)
}

// Controller reconciles VeltrixClusters.
type Controller struct {
	cfg      Config
	client   client.Client
	apply    ssa.Applier
	recorder events.EventRecorder
	metrics  *metrics.Objects

	mu    sync.Mutex
	state map[types.UID]*memory
}

// memory is what the controller keeps about a cluster between passes.
type memory struct {
	// failures counts consecutive passes with a node agent problem (the back-off).
	failures int
}

func (ctl *Controller) memoryOf(c *veltrixv1.VeltrixCluster) *memory {
	ctl.mu.Lock()
	defer ctl.mu.Unlock()
	m, ok := ctl.state[c.UID]
	if !ok {
		m = &memory{}
		ctl.state[c.UID] = m
	}
	return m
}

// forget drops what the controller keeps about the cluster of uid, and its metric series
// (it is gone).
func (ctl *Controller) forget(key types.NamespacedName, uid types.UID) {
	ctl.metrics.Forget(key.Namespace, key.Name)
	ctl.mu.Lock()
	defer ctl.mu.Unlock()
	delete(ctl.state, uid)
}

// Summary is how the cluster's conditions read: MaxMapCountLow, MemberLost and
// DisksReturned are issues when True.
func Summary() []conditions.SummaryOption {
	return []conditions.SummaryOption{conditions.NegativePolarity(veltrixv1.ConditionMaxMapCountLow, veltrixv1.ConditionMemberLost, veltrixv1.ConditionDisksReturned)}
}

// Setup adds the controller to mgr.
func Setup(mgr ctrl.Manager, cfg Config) error {
	cfg.defaults(mgr)
	m, err := newMetrics(cfg.Operator)
	if err != nil {
		return err
	}
	ctl := &Controller{
		cfg:      cfg,
		client:   cfg.Client,
		apply:    ssa.Applier{Client: cfg.Client, FieldManager: resources.FieldManager},
		recorder: mgr.GetEventRecorder(Name),
		metrics:  m,
		state:    map[types.UID]*memory{},
	}
	r, err := reconciler.New(reconciler.Config[*veltrixv1.VeltrixCluster]{
		Name:       cfg.Operator,
		Client:     cfg.Client,
		Recorder:   ctl.recorder,
		New:        func() *veltrixv1.VeltrixCluster { return &veltrixv1.VeltrixCluster{} },
		Run:        ctl.run,
		Conditions: func(c *veltrixv1.VeltrixCluster) []metav1.Condition { return c.Status.Conditions },
		ObserveGeneration: func(c *veltrixv1.VeltrixCluster, g int64) {
			c.Status.ObservedGeneration = g
		},
		Finalizer: veltrixv1.Finalizer,
		Finalize:  ctl.finalize,
		Summary:   Summary(),
		OnGone:    ctl.forget,
	})
	if err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("veltrixcluster").
		For(&veltrixv1.VeltrixCluster{}).
		Owns(&appsv1.StatefulSet{}).
		Owns(&corev1.Service{}).
		Owns(&corev1.ConfigMap{}).
		Owns(&corev1.ServiceAccount{}).
		Owns(&corev1.Secret{}).
		// A member's pod becoming ready (or not) changes readiness gates and membership.
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(children.OwnerByLabel(resources.LabelCluster, map[string]string{resources.LabelManagedBy: resources.ManagedBy}))).
		Complete(r)
}
