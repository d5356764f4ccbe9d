package cluster_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	clustercontroller "github.com/opsuite/suite/services/valkey-operator/internal/controller/cluster"
	nodecontroller "github.com/opsuite/suite/services/valkey-operator/internal/controller/node"
	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
	"github.com/opsuite/suite/services/valkey-operator/internal/valkeytest"
	"github.com/opsuite/suite/shared/conditions"
	"github.com/opsuite/suite/shared/testenv"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// fleet plays the node controller and the kubelet for the ValkeyNodes of one namespace.
type fleet struct {
	t  testing.TB
	c  client.Client
	ns string

	mu      sync.Mutex
	servers map[string]*valkeytest.Server // ValkeyNode name -> its server
	served  map[string]int64              // generation each server runs
	// Restarts counts servers restarted for a new generation (rolled pods).
	restarts int
	// unreachable ValkeyNodes report an address nothing listens on.
	unreachable map[string]string
	// held ValkeyNodes are left as they are by sync: their pod is gone with its node.
	held map[string]bool
	// specs are the specs the servers run; a change of spec.external alone restarts no
	// pod (the node controller announces it live).
	specs map[string]valkeyv1.ValkeyNodeSpec
}

// externalOnly: n's spec differs from the one its server runs in spec.external alone.
func (f *fleet) externalOnly(n *valkeyv1.ValkeyNode) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	old, ok := f.specs[n.Name]
	if !ok {
		return false
	}
	cur := *n.Spec.DeepCopy()
	old.External, cur.External = nil, nil
	return equality.Semantic.DeepEqual(old, cur)
}

func newFleet(t testing.TB, c client.Client, ns string) *fleet {
	return &fleet{t: t, c: c, ns: ns, servers: map[string]*valkeytest.Server{}, served: map[string]int64{}, unreachable: map[string]string{}, held: map[string]bool{},
		specs: map[string]valkeyv1.ValkeyNodeSpec{}}
}

// addr is the controller's Addr: the ValkeyNode's server, once the fleet started it.
func (f *fleet) addr(n *valkeyv1.ValkeyNode) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if addr, ok := f.unreachable[n.Name]; ok {
		return addr
	}
	if s, ok := f.servers[n.Name]; ok && n.Status.Ready {
		return s.Addr
	}
	return ""
}

// busPort is the controller's BusPort: the ValkeyNode's server's.
func (f *fleet) busPort(n *valkeyv1.ValkeyNode) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s, ok := f.servers[n.Name]; ok {
		return s.BusPort
	}
	return 0
}

// server returns the server of a ValkeyNode.
func (f *fleet) server(name string) *valkeytest.Server {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.servers[name]
}

// sync starts a server for every new ValkeyNode, restarts the one whose generation
// changed, stops those of deleted nodes, and reports every node ready. It runs on the
// test goroutine (inside Eventually), so a server that fails to start fails the test.
func (f *fleet) sync(ctx context.Context) {
	f.t.Helper()
	var list valkeyv1.ValkeyNodeList
	if err := f.c.List(ctx, &list, client.InNamespace(f.ns)); err != nil {
		f.t.Fatalf("listing ValkeyNodes: %v", err)
	}
	seen := map[string]bool{}
	for i := range list.Items {
		n := &list.Items[i]
		seen[n.Name] = true
		f.mu.Lock()
		if f.held[n.Name] {
			f.mu.Unlock()
			continue
		}
		s, ok := f.servers[n.Name]
		served := f.served[n.Name]
		f.mu.Unlock()
		switch {
		case !ok:
			s = f.start(ctx, n)
		case served != n.Generation && !f.externalOnly(n):
			s.Restart()
			f.restarts++
		}
		f.mu.Lock()
		f.specs[n.Name] = *n.Spec.DeepCopy()
		f.mu.Unlock()
		f.mu.Lock()
		f.servers[n.Name], f.served[n.Name] = s, n.Generation
		f.mu.Unlock()
		f.report(ctx, n, s)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for name, s := range f.servers {
		if !seen[name] {
			s.Stop()
			delete(f.servers, name)
		}
	}
}

// down reports a node not ready, as the node controller does when its pod goes away; the
// next sync reports it ready again.
func (f *fleet) down(ctx context.Context, name string) {
	f.t.Helper()
	var n valkeyv1.ValkeyNode
	if err := f.c.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: name}, &n); err != nil {
		f.t.Fatal(err)
	}
	n.Status.Ready = false
	conditions.Set(&n.Status.Conditions, metav1.Condition{Type: valkeyv1.NodeConditionReady, Status: metav1.ConditionFalse, Reason: valkeyv1.NodeReasonPodNotReady, Message: "Pod is being replaced"}, n.Generation)
	if err := f.c.Status().Update(ctx, &n); err != nil {
		f.t.Fatal(err)
	}
}

// report writes a node's status as the node controller would.
func (f *fleet) report(ctx context.Context, n *valkeyv1.ValkeyNode, s *valkeytest.Server) {
	want := n.DeepCopy()
	if conn, err := valkey.Dial(s.Addr, valkey.Options{DialTimeout: time.Second}); err == nil {
		if v, err := conn.ClusterNodes(ctx); err == nil {
			if me, ok := v.Myself(); ok {
				want.Status.ValkeyNodeID = me.ID
			}
		}
		conn.Close()
	}
	want.Status.Ready = true
	want.Status.PodIP = "127.0.0.1"
	want.Status.PodName = n.Name + "-0"
	// Three simulated hosts; a shard's members on different ones where possible.
	want.Status.NodeName = fmt.Sprintf("host-%d", (n.Spec.ShardIndex+n.Spec.NodeIndex)%3)
	want.Status.ObservedGeneration = n.Generation
	// The node controller announces the address of the node's own Service.
	want.Status.ExternalAddress = ""
	if n.Spec.External != nil {
		want.Status.ExternalAddress = s.Addr
	}
	conditions.Set(&want.Status.Conditions, metav1.Condition{Type: valkeyv1.NodeConditionReady, Status: metav1.ConditionTrue, Reason: valkeyv1.NodeReasonPodRunning, Message: "Pod is running"}, n.Generation)
	if equalStatus(n.Status, want.Status) {
		return
	}
	if err := f.c.Status().Update(ctx, want); err != nil {
		f.t.Logf("reporting %s: %v", n.Name, err) // a conflict: the next sync writes it
	}
}

func equalStatus(a, b valkeyv1.ValkeyNodeStatus) bool {
	ra, rb := conditions.Get(a.Conditions, valkeyv1.NodeConditionReady), conditions.Get(b.Conditions, valkeyv1.NodeConditionReady)
	if (ra == nil) != (rb == nil) || (ra != nil && ra.Status != rb.Status) {
		return false
	}
	return a.Ready == b.Ready && a.ValkeyNodeID == b.ValkeyNodeID && a.PodIP == b.PodIP && a.NodeName == b.NodeName && a.ObservedGeneration == b.ObservedGeneration && a.ExternalAddress == b.ExternalAddress && len(a.Conditions) == len(b.Conditions)
}

// startController runs the cluster controller against the fleet, without credentials
// (the fleet's servers have the default user open); more changes its manager.
func startController(t *testing.T, f *fleet, more ...testenv.ManagerOption) {
	startControllerWith(t, f, nil, more...)
}

// startControllerWith starts the controller with the tests' configuration changed by tune.
func startControllerWith(t *testing.T, f *fleet, tune func(*clustercontroller.Config), more ...testenv.ManagerOption) {
	env.StartManager(t, func(mgr ctrl.Manager) error {
		cfg := clustercontroller.Config{
			Addr:            f.addr,
			BusPort:         f.busPort,
			Options:         func(context.Context, *valkeyv1.ValkeyCluster) (valkey.Options, error) { return valkey.Options{}, nil },
			Poll:            300 * time.Millisecond,
			FailoverTimeout: 60 * time.Second, // the operator's default: a loaded 2-core host took over 30 s
			Namespaces:      []string{f.ns},
		}
		if tune != nil {
			tune(&cfg)
		}
		return clustercontroller.Setup(mgr, cfg)
		// tests run in parallel, each with its own controller; the cache as the operator's
		// (its own Secrets and ConfigMaps only).
	}, append([]testenv.ManagerOption{testenv.InNamespaces(f.ns), func(o *ctrl.Options) { o.Cache.ByObject = nodecontroller.CacheByObject() }}, more...)...)
}

// movesTimeout bounds a wait that moves slots: Valkey 8 answers each SETSLOT only once the
// primary's replicas have it, and a 2-core host running the whole suite (load 30) took
// over 3 minutes for a shard's worth of slots.
const movesTimeout = 5 * time.Minute

// waitReady drives the fleet until the cluster is Ready for its current generation.
func waitReady(t testing.TB, f *fleet, name string, timeout time.Duration) *valkeyv1.ValkeyCluster {
	t.Helper()
	ctx := context.Background()
	var vc valkeyv1.ValkeyCluster
	testenv.Eventually(t, timeout, name+" Ready", func() (bool, string) {
		f.sync(ctx)
		if err := f.c.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: name}, &vc); err != nil {
			return false, err.Error()
		}
		r := conditions.Get(vc.Status.Conditions, valkeyv1.ConditionReady)
		state := fmt.Sprintf("state %s reason %s: %s (shards %d ready %d)", vc.Status.State, vc.Status.Reason, vc.Status.Message, vc.Status.Shards, vc.Status.ReadyShards)
		return r != nil && r.Status == metav1.ConditionTrue && r.ObservedGeneration == vc.Generation, state
	})
	return &vc
}

// eventReasons counts the distinct events recorded about the cluster, by reason.
func eventReasons(t testing.TB, c client.Client, ns, name string) map[string]int {
	t.Helper()
	var list eventsv1.EventList
	if err := c.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatalf("listing events: %v", err)
	}
	out := map[string]int{}
	for _, e := range list.Items {
		// Repeats of one event (same reason about the same objects) fold into a series
		// whose count the API server learns late; distinct events are what a test can count.
		if e.Regarding.Name == name && e.Regarding.Kind == "ValkeyCluster" {
			out[e.Reason]++
		}
	}
	return out
}

func describe(m map[string]int) string {
	var keys []string
	for k, v := range m {
		keys = append(keys, fmt.Sprintf("%s=%d", k, v))
	}
	sort.Strings(keys)
	return strings.Join(keys, " ")
}

// startCluster starts a controller on a fresh namespace with its fleet and creates a
// ValkeyCluster there.
func startCluster(t *testing.T, prefix, name string, spec valkeyv1.ValkeyClusterSpec) (*fleet, *valkeyv1.ValkeyCluster) {
	t.Helper()
	ns := testenv.NewNamespace(t, env.Client, prefix)
	f := newFleet(t, env.Client, ns)
	startController(t, f)
	vc := &valkeyv1.ValkeyCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: spec}
	if err := env.Client.Create(context.Background(), vc); err != nil {
		t.Fatal(err)
	}
	return f, vc
}
