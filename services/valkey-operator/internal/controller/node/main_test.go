package node

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	"github.com/opsuite/suite/services/valkey-operator/internal/resources"
	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
	"github.com/opsuite/suite/services/valkey-operator/internal/valkeytest"
	"github.com/opsuite/suite/shared/testenv"
	"go.uber.org/zap/zapcore"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// env is the real kube-apiserver and etcd every integration test here runs against. There
// is no kube-controller-manager and no kubelet: the tests play them (pods, workload and
// PVC status), with real server processes (valkeytest.Bins) behind the pods' addresses.
var env *testenv.Env

// TestMain starts the control plane once; the controller logs only errors.
func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	testenv.Main(m, &env, valkeyv1.AddToScheme)
}

const operatorPassword = "operator-secret"

// server is one real server process in cluster mode, with the operator's user.
type server struct{ *valkeytest.Server }

func startServer(t *testing.T) server {
	t.Helper()
	return server{valkeytest.Start(t, "--user", resources.OperatorUser, "on", ">"+operatorPassword, "~*", "&*", "+@all")}
}

// myID is the server's id as its own CLUSTER NODES says.
func (s server) myID(t *testing.T) string {
	t.Helper()
	c, err := valkey.Dial(s.Addr, valkey.Options{Username: resources.OperatorUser, Password: operatorPassword})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	v, err := c.ClusterNodes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	me, ok := v.Myself()
	if !ok {
		t.Fatal("CLUSTER NODES lists no myself")
	}
	return me.ID
}

func (s server) admin() (valkey.NodeAdmin, error) {
	return valkey.DialNodeAdmin(s.Addr, valkey.Options{Username: resources.OperatorUser, Password: operatorPassword, DialTimeout: time.Second})
}

// configGet reads one parameter straight from the server, the test's own look.
func (s server) configGet(t *testing.T, key string) string {
	t.Helper()
	// CONFIG GET is no method of the operator's narrow interfaces: ask with the cli.
	out, err := exec.Command(valkeytest.Bins(t).CLI, "-h", "127.0.0.1", "-p", strconv.Itoa(s.Port),
		"--user", resources.OperatorUser, "--pass", operatorPassword, "--no-auth-warning", "CONFIG", "GET", key).Output()
	if err != nil {
		t.Fatalf("cli CONFIG GET %s: %v", key, err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 {
		t.Fatalf("CONFIG GET %s answered %q", key, out)
	}
	return lines[1]
}

// harness is one test's namespace and manager running the node controller, with the
// server each ValkeyNode's pod "runs".
type harness struct {
	t      *testing.T
	ns     string
	writes *testenv.WriteCounter

	mu       sync.Mutex
	servers  map[string]server // by ValkeyNode name
	password string            // what the operator logs in with
}

func (h *harness) setPassword(pw string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.password = pw
}

func start(t *testing.T) *harness {
	t.Helper()
	h := &harness{t: t, ns: testenv.NewNamespace(t, env.Client, "vkn-"), servers: map[string]server{}, writes: &testenv.WriteCounter{},
		password: operatorPassword}
	cfg := Config{
		Addr: func(n *valkeyv1.ValkeyNode) string {
			h.mu.Lock()
			defer h.mu.Unlock()
			if s, ok := h.servers[n.Name]; ok {
				return s.Addr
			}
			return "127.0.0.1:1" // nothing listens there
		},
		Options: func(context.Context, *valkeyv1.ValkeyNode) (valkey.Options, error) {
			h.mu.Lock()
			defer h.mu.Unlock()
			return valkey.Options{Username: resources.OperatorUser, Password: h.password, DialTimeout: time.Second}, nil
		},
		RequeueAfter: time.Second,
		Resync:       time.Second,
		RetryBase:    200 * time.Millisecond,
		RetryMax:     2 * time.Second,
		wrapClient:   h.writes.Wrap,
	}
	// The pod cache limited as cmd/main.go limits it.
	env.StartManager(t, func(mgr ctrl.Manager) error { return Setup(mgr, cfg) }, testenv.InNamespaces(h.ns),
		func(o *ctrl.Options) { o.Cache.ByObject = CacheByObject() })
	return h
}

func (h *harness) serve(node string, s server) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.servers[node] = s
}

func (h *harness) create(obj client.Object) {
	h.t.Helper()
	obj.SetNamespace(h.ns)
	if err := env.Client.Create(context.Background(), obj); err != nil {
		h.t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

// update changes the latest version of obj (by its key), retrying on conflicts.
func update[O client.Object](h *harness, obj O, change func(O)) {
	h.t.Helper()
	testenv.Eventually(h.t, 10*time.Second, "updating "+obj.GetName(), func() (bool, string) {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return false, err.Error()
		}
		change(obj)
		err := env.Client.Update(context.Background(), obj)
		return err == nil, fmt.Sprint(err)
	})
}

// updateStatus changes the status of the latest version of obj, as the controller that
// owns that status would.
func updateStatus[O client.Object](h *harness, obj O, change func(O)) {
	h.t.Helper()
	testenv.Eventually(h.t, 10*time.Second, "updating the status of "+obj.GetName(), func() (bool, string) {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return false, err.Error()
		}
		change(obj)
		err := env.Client.Status().Update(context.Background(), obj)
		return err == nil, fmt.Sprint(err)
	})
}

func (h *harness) key(name string) types.NamespacedName {
	return types.NamespacedName{Namespace: h.ns, Name: name}
}

// node is a ValkeyNode of cluster c as the cluster controller writes it.
func (h *harness) node(name string, mutate func(*valkeyv1.ValkeyNode)) *valkeyv1.ValkeyNode {
	n := &valkeyv1.ValkeyNode{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: h.ns},
		Spec: valkeyv1.ValkeyNodeSpec{
			ClusterName: "c", ShardIndex: 0, NodeIndex: 0, RoleHint: valkeyv1.RolePrimary,
			Image: "valkey/valkey:8.1", ServerConfigMapName: "c-config", UsersACLSecretName: "c-acl",
			ConfigHash: "r1",
		},
	}
	if mutate != nil {
		mutate(n)
	}
	n.Labels = resources.NodeLabels(n)
	return n
}

func (h *harness) configMap(live string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "c-config", Namespace: h.ns, Labels: resources.ClusterLabels("c")},
		Data:       map[string]string{resources.ConfigKeyServer: "port 6379\n", resources.ConfigKeyLive: live},
	}
}

func (h *harness) aclSecret(users string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "c-acl", Namespace: h.ns, Labels: resources.ClusterLabels("c")},
		Data:       map[string][]byte{resources.ACLKeyUsers: []byte(users)},
	}
}

func (h *harness) getNode(name string) *valkeyv1.ValkeyNode {
	h.t.Helper()
	n := &valkeyv1.ValkeyNode{}
	if err := env.Client.Get(context.Background(), h.key(name), n); err != nil {
		h.t.Fatal(err)
	}
	return n
}

// render is a node's status in one line: "Type=Status/Reason ..." in a fixed order, then
// ready and role.
func render(n *valkeyv1.ValkeyNode) string {
	var parts []string
	for _, t := range []string{valkeyv1.NodeConditionReady, valkeyv1.NodeConditionPersistentVolumeClaimReady,
		valkeyv1.NodeConditionPersistentVolumeClaimSizeReady, valkeyv1.NodeConditionLiveConfigApplied} {
		for _, c := range n.Status.Conditions {
			if c.Type == t {
				parts = append(parts, fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason))
			}
		}
	}
	return strings.Join(parts, " ")
}

func describe(n *valkeyv1.ValkeyNode) string {
	s := fmt.Sprintf("generation %d observed %d ready %v role %q pod %q ip %q id %q config %q acl %q",
		n.Generation, n.Status.ObservedGeneration, n.Status.Ready, n.Status.Role, n.Status.PodName, n.Status.PodIP,
		n.Status.ValkeyNodeID, n.Status.AppliedConfigHash, n.Status.AppliedACLHash)
	for _, c := range n.Status.Conditions {
		s += fmt.Sprintf("\n  %s=%s/%s (generation %d): %s", c.Type, c.Status, c.Reason, c.ObservedGeneration, c.Message)
	}
	return s
}

// waitNode waits until the node's status, of its current generation, satisfies ok.
func (h *harness) waitNode(name, what string, ok func(*valkeyv1.ValkeyNode) bool) *valkeyv1.ValkeyNode {
	h.t.Helper()
	return testenv.WaitForObject(h.t, env.Client, &valkeyv1.ValkeyNode{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: name}}, what,
		func(n *valkeyv1.ValkeyNode) bool { return n.Status.ObservedGeneration == n.Generation && ok(n) }, describe)
}

// waitConditions waits until render(node) is want.
func (h *harness) waitConditions(name, want string) *valkeyv1.ValkeyNode {
	h.t.Helper()
	return h.waitNode(name, "has "+want, func(n *valkeyv1.ValkeyNode) bool { return render(n) == want })
}

func condOf(n *valkeyv1.ValkeyNode, t string) metav1.Condition {
	for _, c := range n.Status.Conditions {
		if c.Type == t {
			return c
		}
	}
	return metav1.Condition{}
}

func (h *harness) statefulSet(name string) *appsv1.StatefulSet {
	h.t.Helper()
	var s *appsv1.StatefulSet
	testenv.WaitFor(h.t, "StatefulSet "+name+" created", func() bool {
		s = &appsv1.StatefulSet{}
		return env.Client.Get(context.Background(), h.key(name), s) == nil
	})
	return s
}

func (h *harness) pvc(name string) *corev1.PersistentVolumeClaim {
	h.t.Helper()
	var p *corev1.PersistentVolumeClaim
	testenv.WaitFor(h.t, "PVC "+name+" created", func() bool {
		p = &corev1.PersistentVolumeClaim{}
		return env.Client.Get(context.Background(), h.key(name), p) == nil
	})
	return p
}

// rollOut plays the StatefulSet controller: it has seen the current spec and runs
// revision rev everywhere.
func (h *harness) rollOut(name, rev string) {
	h.t.Helper()
	updateStatus(h, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: name}}, func(s *appsv1.StatefulSet) {
		s.Status.ObservedGeneration = s.Generation
		s.Status.Replicas, s.Status.ReadyReplicas, s.Status.CurrentReplicas, s.Status.UpdatedReplicas = 1, 1, 1, 1
		s.Status.CurrentRevision, s.Status.UpdateRevision = rev, rev
	})
}

// runPod plays the StatefulSet controller and the kubelet: the pod of the workload's
// template, of revision rev, scheduled on node-a, Running and Ready at 127.0.0.1.
func (h *harness) runPod(podName string, tmpl corev1.PodTemplateSpec, rev string, ready bool) *corev1.Pod {
	h.t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: podName, Namespace: h.ns, Labels: map[string]string{}}, Spec: *tmpl.Spec.DeepCopy()}
	for k, v := range tmpl.Labels {
		pod.Labels[k] = v
	}
	pod.Labels[appsv1.ControllerRevisionHashLabelKey] = rev
	pod.Spec.NodeName = "node-a"
	h.create(pod)
	h.setPodStatus(pod, ready, 0)
	return pod
}

func (h *harness) setPodStatus(pod *corev1.Pod, ready bool, restarts int32) {
	h.t.Helper()
	updateStatus(h, pod, func(p *corev1.Pod) {
		status := corev1.ConditionFalse
		if ready {
			status = corev1.ConditionTrue
		}
		p.Status.Phase = corev1.PodRunning
		p.Status.PodIP = "127.0.0.1"
		p.Status.PodIPs = []corev1.PodIP{{IP: "127.0.0.1"}}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: resources.ServerContainer, Ready: ready, RestartCount: restarts,
			Image: p.Spec.Containers[0].Image, ImageID: "sha256:0"}}
	})
}

// bind plays the PV controller: the claim is Bound with capacity.
func (h *harness) bind(name, capacity string, mutate func(*corev1.PersistentVolumeClaim)) {
	h.t.Helper()
	updateStatus(h, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: name}}, func(p *corev1.PersistentVolumeClaim) {
		p.Status.Phase = corev1.ClaimBound
		p.Status.AccessModes = p.Spec.AccessModes
		p.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(capacity)}
		p.Status.Conditions = nil
		p.Status.AllocatedResourceStatuses = nil
		if mutate != nil {
			mutate(p)
		}
	})
}

// warnings lists the Warning events of reason in the test's namespace.
func (h *harness) warnings(reason string) []eventsv1.Event {
	h.t.Helper()
	var list eventsv1.EventList
	if err := env.Client.List(context.Background(), &list, client.InNamespace(h.ns)); err != nil {
		h.t.Fatal(err)
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Reason == reason && e.Type == corev1.EventTypeWarning {
			out = append(out, e)
		}
	}
	return out
}
