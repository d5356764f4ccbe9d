package controller_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	veltrixv1 "github.com/opsuite/suite/api/veltrix/v1alpha1"
	nodeagentv1 "github.com/opsuite/suite/proto/nodeagent/v1"
	"github.com/opsuite/suite/services/node-agent/agenttest"
	"github.com/opsuite/suite/services/veltrix-operator/internal/controller"
	"github.com/opsuite/suite/services/veltrix-operator/internal/disks"
	"github.com/opsuite/suite/shared/nodeagent"
	"github.com/opsuite/suite/shared/testenv"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// env is the real kube-apiserver and etcd every test runs against.
var env *testenv.Env

// TestMain runs the tests in a private mount namespace (the in-process node agents attach
// loop devices, make XFS filesystems and mount them) against a real control plane with the
// VeltrixCluster CRD.
func TestMain(m *testing.M) {
	agenttest.PrivateMountNamespace()
	root, err := testenv.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testenv.MainWith(m, &env, testenv.Options{
		CRDDirs:      []string{filepath.Join(root, "deploy", "crds", "veltrix.io_veltrixclusters.yaml")},
		AddToSchemes: []func(*runtime.Scheme) error{veltrixv1.AddToScheme},
	})
}

const operatorNS = "veltrix-operator"

var identityOnce sync.Once

// operatorTokens mints node-agent tokens for a ServiceAccount of the operator's namespace;
// with preparer, the ServiceAccount is bound to a ClusterRole like the node-agent chart's
// <release>-preparer, otherwise it has no access to the agents.
func operatorTokens(t testing.TB, name string, preparer bool) nodeagent.TokenSource {
	t.Helper()
	ctx := context.Background()
	c := env.Client
	identityOnce.Do(func() {
		must(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNS}}))
		must(t, c.Create(ctx, &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: "node-agent-preparer"},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{"nodeagent.opsuite.io"}, Resources: []string{"nodes"}, Verbs: []string{"get"}},
				{APIGroups: []string{"nodeagent.opsuite.io"}, Resources: []string{"nodes/disks", "nodes/sysctls"}, Verbs: []string{"update"}},
			},
		}))
	})
	must(t, c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: operatorNS}}))
	if preparer {
		must(t, c.Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-preparer"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "node-agent-preparer"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: operatorNS}},
		}))
	}
	tokens, err := nodeagent.NewTokenRequester(env.Config, operatorNS, name)
	if err != nil {
		t.Fatal(err)
	}
	return tokens
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// nodeNames are the Kubernetes nodes the tests pretend to have; each test starts agents on
// some of them.
var nodeNames = []string{"node-a", "node-b", "node-c"}

var createdNodes sync.Map

// createNodes creates the nodes not made yet (nodeNames, and more for a benchmark).
func createNodes(t testing.TB, names ...string) {
	t.Helper()
	ctx := context.Background()
	for _, n := range append(append([]string(nil), nodeNames...), names...) {
		if _, done := createdNodes.LoadOrStore(n, true); done {
			continue
		}
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{"kubernetes.io/hostname": n}}}
		must(t, env.Client.Create(ctx, node))
		// The API server taints a new node not-ready until its kubelet reports; these
		// nodes have no kubelet, so they are made ready by hand.
		node.Spec.Taints = nil
		must(t, env.Client.Update(ctx, node))
	}
}

// fleet is the agents of one test: real node agents with their loop devices, reached through
// a shared/nodeagent Pool with the given tokens; nodes without an agent are unreachable.
type fleet struct {
	agents map[string]*agenttest.Agent
	pool   *nodeagent.Pool
	calls  *countingAgents
}

// startFleet runs an agent on each node of withDisks (one loop device of diskSize each) and
// of withoutDisks (no device); the agents see no node labels.
func startFleet(t testing.TB, tokens nodeagent.TokenSource, diskSize int64, withDisks, withoutDisks []string) *fleet {
	t.Helper()
	return startFleetLabels(t, tokens, diskSize, withDisks, withoutDisks, false)
}

// startFleetLabels is startFleet whose agents, with readLabels, read their Node's labels
// from the API server as deployed agents do (the node-pool labels).
func startFleetLabels(t testing.TB, tokens nodeagent.TokenSource, diskSize int64, withDisks, withoutDisks []string, readLabels bool) *fleet {
	t.Helper()
	createNodes(t, append(append([]string(nil), withDisks...), withoutDisks...)...)
	f := &fleet{agents: map[string]*agenttest.Agent{}}
	var list []*agenttest.Agent
	for _, n := range append(append([]string(nil), withDisks...), withoutDisks...) {
		opts := agenttest.Options{Node: n, REST: env.Config, ReviewCacheTTL: time.Second, Labels: map[string]string{}}
		if readLabels {
			opts.Labels = nil
		}
		a := agenttest.Start(t, opts)
		f.agents[n] = a
		list = append(list, a)
	}
	for _, n := range withDisks {
		f.agents[n].AttachLoop(diskSize)
	}
	f.pool = agenttest.Pool(t, tokens, list...)
	f.calls = &countingAgents{inner: disks.PoolAgents{Pool: f.pool}, prepare: map[string]int{}}
	return f
}

// pvRoot is each agent's own PV root (agenttest gives each agent a directory of its own).
func (f *fleet) pvRoot(node string) string {
	if a, ok := f.agents[node]; ok {
		return a.PVRoot
	}
	return "/mnt/opsuite"
}

// prepared is what a node's agent reports as prepared.
func (f *fleet) prepared(t testing.TB, node string) []*nodeagentv1.PreparedDisk {
	t.Helper()
	r, err := f.pool.Node(node).GetNodeReport(context.Background(), &nodeagentv1.GetNodeReportRequest{})
	if err != nil {
		t.Fatalf("report of %s: %v", node, err)
	}
	return r.GetPrepared()
}

// countingAgents counts PrepareDisks calls per node, to prove a failing agent is not called
// in a hot loop.
type countingAgents struct {
	inner   disks.Agents
	mu      sync.Mutex
	prepare map[string]int
}

func (c *countingAgents) Node(name string) disks.Agent {
	return countingAgent{Agent: c.inner.Node(name), node: name, parent: c}
}

func (c *countingAgents) count(node string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.prepare[node]
}

type countingAgent struct {
	disks.Agent
	node   string
	parent *countingAgents
}

func (a countingAgent) PrepareDisks(ctx context.Context, req *nodeagentv1.PrepareDisksRequest) (*nodeagentv1.PrepareDisksResponse, error) {
	a.parent.mu.Lock()
	a.parent.prepare[a.node]++
	a.parent.mu.Unlock()
	return a.Agent.PrepareDisks(ctx, req)
}

// startController runs the controller against the fleet, in a manager of its own that
// watches the test's namespace only (and cluster-scoped objects).
func startController(t testing.TB, f *fleet, ns string, mut ...func(*controller.Config, ctrl.Manager)) {
	t.Helper()
	env.StartManager(t, func(mgr ctrl.Manager) error {
		cfg := controller.Config{Agents: f.calls, PVRoot: f.pvRoot, Poll: 500 * time.Millisecond, Backoff: 500 * time.Millisecond, MaxBackoff: 4 * time.Second, CheckpointTimeout: 3 * time.Second}
		for _, m := range mut {
			m(&cfg, mgr)
		}
		return controller.Setup(mgr, cfg)
	}, testenv.InNamespaces(ns))
}

// newCluster creates a VeltrixCluster in ns, with the schema's defaults and the test's
// changes.
func newCluster(t testing.TB, ns string, mut func(*veltrixv1.VeltrixCluster)) *veltrixv1.VeltrixCluster {
	t.Helper()
	c := &veltrixv1.VeltrixCluster{ObjectMeta: metav1.ObjectMeta{Name: "vx", Namespace: ns}}
	mut(c)
	if err := env.Client.Create(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	return c
}

// condition waits until the cluster's condition has the status and reason.
func condition(t testing.TB, c *veltrixv1.VeltrixCluster, condType string, status metav1.ConditionStatus, reason string) metav1.Condition {
	t.Helper()
	var got metav1.Condition
	testenv.Eventually(t, 60*time.Second, fmt.Sprintf("%s=%s (%s)", condType, status, reason), func() (bool, string) {
		var live veltrixv1.VeltrixCluster
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(c), &live); err != nil {
			return false, err.Error()
		}
		for _, cond := range live.Status.Conditions {
			if cond.Type == condType {
				got = cond
				return cond.Status == status && cond.Reason == reason, fmt.Sprintf("%s=%s %s: %s", cond.Type, cond.Status, cond.Reason, cond.Message)
			}
		}
		return false, fmt.Sprintf("no %s condition in %v", condType, live.Status.Conditions)
	})
	return got
}

// eventReasons lists the reasons and types of the events about the cluster.
func eventReasons(t testing.TB, c *veltrixv1.VeltrixCluster) map[string]string {
	t.Helper()
	var list eventsv1.EventList
	if err := env.Client.List(context.Background(), &list, client.InNamespace(c.Namespace)); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range list.Items {
		if e.Regarding.Name == c.Name && e.Regarding.Kind == "VeltrixCluster" {
			out[e.Reason] = e.Type
		}
	}
	return out
}

// maxMapCount is vm.max_map_count as a node's agent reads it (the machine's: the
// in-process agents may not raise it).
func (f *fleet) maxMapCount(t testing.TB, node string) int64 {
	t.Helper()
	r, err := f.pool.Node(node).EnsureSysctl(context.Background(), &nodeagentv1.EnsureSysctlRequest{Name: "vm.max_map_count", ReportOnly: true})
	if err != nil {
		t.Fatalf("vm.max_map_count of %s: %v", node, err)
	}
	return r.GetStatus().GetValue()
}
