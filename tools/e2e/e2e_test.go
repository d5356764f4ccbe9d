package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"
)

// Tests run in file order and build on each other: install, then look, then change.

func installArgs(s service) []string {
	args := []string{"install", s.name, filepath.Join(env.root, "charts", s.name),
		"--namespace", s.namespace(), "--create-namespace"}
	// A plain install: on the local cluster the process runner binds the charts' host-less
	// listen addresses to each pod's own address, as a pod's network namespace would.
	// E2E_HELM_SET: more --set values for every chart (other clusters' needs);
	// E2E_HELM_SET_<CHART> (NODE_AGENT, VALD_OPERATOR, ...) for one chart.
	perChart := "E2E_HELM_SET_" + strings.ToUpper(strings.ReplaceAll(s.name, "-", "_"))
	for _, kv := range strings.Fields(os.Getenv("E2E_HELM_SET") + " " + os.Getenv(perChart)) {
		args = append(args, "--set", kv)
	}
	switch s.name {
	case "vald-operator":
		// No Vald Helm Operator here: the chart brings the ValdRelease CRD.
		args = append(args, "--set", "installValdReleaseCRD=true")
	case "veltrix-operator", "memgraph-operator":
		// They call the node agent (nodeAgent.enabled): one RoleBinding goes into its namespace.
		args = append(args, "--set", "nodeAgent.namespace="+serviceByName("node-agent").namespace())
	case "node-agent":
		if env.local != nil {
			// Every simulated node is this host: each agent gets its own state and PV tree
			// (the later --agent-root/--pv-root win; $(NODE_NAME) is expanded per pod). Its
			// disks are the node's own loop devices: the runner's image rule adds
			// --allow-loop-devices and --device-allow with them.
			base := filepath.Join(env.workDir, "node-agent")
			args = append(args,
				"--set", "agentRoot="+filepath.Join(base, "agent"),
				"--set", "pvRoot="+filepath.Join(base, "pv"),
				"--set", "extraArgs={--agent-root="+filepath.Join(base, "agent", "$(NODE_NAME)")+",--pv-root="+filepath.Join(base, "pv", "$(NODE_NAME)")+"}")
		}
	}
	return args
}

func TestInstall(t *testing.T) {
	needCluster(t)
	ctx := t.Context()
	if env.local != nil {
		nodes, err := env.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes.Items {
			for _, d := range []string{"agent", "pv"} {
				if err := os.MkdirAll(filepath.Join(env.workDir, "node-agent", d, n.Name), 0o755); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	// The node agent's namespace first: the charts that call the agent bind a role in it,
	// and the installs below run in parallel.
	agentNS := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: serviceByName("node-agent").namespace()}}
	if _, err := env.client.CoreV1().Namespaces().Create(ctx, agentNS, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(services))
	took := make([]time.Duration, len(services))
	for i, s := range services {
		wg.Go(func() {
			begin := time.Now()
			_, errs[i] = helm(ctx, installArgs(s)...)
			took[i] = since(begin)
		})
	}
	wg.Wait()
	for i, s := range services {
		if errs[i] != nil {
			t.Errorf("install %s: %v", s.name, errs[i])
			continue
		}
		installed.Store(s.name, true)
		t.Logf("helm install %s -n %s: %s", s.name, s.namespace(), took[i])
	}
}

func TestControllersReady(t *testing.T) {
	for _, s := range operators() {
		needInstalled(t, s.name)
	}
	ctx := t.Context()
	begin := time.Now()
	pending := map[string]bool{}
	for _, s := range operators() {
		pending[s.name] = true
	}
	err := poll(ctx, t, "every controller Deployment Ready", 4*time.Minute, func(ctx context.Context) (bool, error) {
		for _, s := range operators() {
			if !pending[s.name] {
				continue
			}
			d, err := controllerDeployment(ctx, s)
			if err != nil {
				return false, err
			}
			if deploymentReady(d) {
				delete(pending, s.name)
				t.Logf("%s Deployment %s Ready after %s", s.name, d.Name, since(begin))
			}
		}
		return len(pending) == 0, nil
	})
	if err != nil {
		for _, s := range operators() {
			if pending[s.name] {
				diagnose(ctx, t, s)
			}
		}
		t.Fatal(err)
	}
}

// TestPlainInstallSettles: after plain installs (no --set for the local cluster's sake)
// every pod of every release runs without a single restart, and none has failed: no two
// processes fought over a port, nothing crash-loops.
func TestPlainInstallSettles(t *testing.T) {
	for _, s := range services {
		needInstalled(t, s.name)
	}
	ctx := t.Context()
	for _, s := range services {
		pods, err := env.client.CoreV1().Pods(s.namespace()).List(ctx, metav1.ListOptions{LabelSelector: selector(s.name)})
		if err != nil {
			t.Fatal(err)
		}
		if len(pods.Items) == 0 {
			t.Errorf("%s: no pods", s.name)
		}
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodFailed {
				t.Errorf("%s: pod %s Failed: %s", s.name, p.Name, p.Status.Message)
			}
			for _, c := range p.Status.ContainerStatuses {
				if c.RestartCount > 0 {
					t.Errorf("%s: pod %s container %s restarted %d times (last: %+v); log:\n%s",
						s.name, p.Name, c.Name, c.RestartCount, c.LastTerminationState.Terminated, podLogTail(&p, 20))
				}
			}
		}
	}
}

// leaseOf returns the leader-election Lease of a controller: named by the Deployment's
// --leader-election-id, in the pod's namespace (the chart sets no other).
func leaseOf(ctx context.Context, s service) (*coordinationv1.Lease, error) {
	d, err := controllerDeployment(ctx, s)
	if err != nil {
		return nil, err
	}
	c := d.Spec.Template.Spec.Containers[0]
	id := argValue(c.Args, "leader-election-id")
	if id == "" {
		return nil, fmt.Errorf("%s: the Deployment has no --leader-election-id (args %q)", s.name, c.Args)
	}
	ns := argValue(c.Args, "leader-election-namespace")
	if ns == "" {
		ns = s.namespace()
	}
	return env.client.CoordinationV1().Leases(ns).Get(ctx, id, metav1.GetOptions{})
}

// holderPod returns the pod (among ps) whose name prefixes the Lease holder identity
// (controller-runtime uses "<hostname>_<uuid>", the hostname being the pod name).
func holderPod(l *coordinationv1.Lease, ps []corev1.Pod) (string, bool) {
	h := ""
	if l.Spec.HolderIdentity != nil {
		h = *l.Spec.HolderIdentity
	}
	for _, p := range ps {
		if h == p.Name || strings.HasPrefix(h, p.Name+"_") {
			return p.Name, true
		}
	}
	return h, false
}

func TestLeaderElection(t *testing.T) {
	for _, s := range operators() {
		needInstalled(t, s.name)
	}
	for _, s := range operators() {
		t.Run(s.name, func(t *testing.T) {
			ctx := t.Context()
			var lease *coordinationv1.Lease
			err := poll(ctx, t, s.name+" holds its Lease", 2*time.Minute, func(ctx context.Context) (bool, error) {
				l, err := leaseOf(ctx, s)
				if apierrors.IsNotFound(err) {
					return false, nil
				}
				if err != nil {
					return false, err
				}
				lease = l
				return l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "", nil
			})
			if err != nil {
				diagnose(ctx, t, s)
				t.Fatal(err)
			}
			ps, err := readyPods(ctx, s)
			if err != nil {
				t.Fatal(err)
			}
			name, ok := holderPod(lease, ps)
			if !ok {
				t.Fatalf("Lease %s/%s holder %q is none of the ready pods:\n%s", lease.Namespace, lease.Name, name, describePods(ctx, s))
			}
			t.Logf("Lease %s/%s held by pod %s (%s)", lease.Namespace, lease.Name, name, *lease.Spec.HolderIdentity)
		})
	}
}

func TestMetrics(t *testing.T) {
	for _, s := range operators() {
		needInstalled(t, s.name)
	}
	for _, s := range operators() {
		t.Run(s.name, func(t *testing.T) {
			ctx := t.Context()
			d, err := controllerDeployment(ctx, s)
			if err != nil {
				t.Fatal(err)
			}
			port := metricsPort(d)
			if port == 0 {
				t.Fatalf("%s: the Deployment names no metrics port", s.name)
			}
			sa := d.Spec.Template.Spec.ServiceAccountName
			token, err := saToken(ctx, s.namespace(), sa)
			if err != nil {
				t.Fatalf("TokenRequest for ServiceAccount %s/%s: %v", s.namespace(), sa, err)
			}
			ps, err := readyPods(ctx, s)
			if err != nil || len(ps) == 0 {
				t.Fatalf("no ready pod of %s (%v):\n%s", s.name, err, describePods(ctx, s))
			}
			p := &ps[0]
			// The endpoint serves only tokens RBAC allows to get /metrics: bind the chart's
			// metrics-reader ClusterRole to the controller's own ServiceAccount.
			bindMetricsReader(ctx, t, s.name, s.name, s.namespace(), sa)
			var code int
			var body string
			var lastErr error
			err = poll(ctx, t, fmt.Sprintf("%s metrics at %s:%d with the %s token", s.name, p.Status.PodIP, port, sa), time.Minute, func(ctx context.Context) (bool, error) {
				code, body, lastErr = scrape(ctx, p, port, token)
				return lastErr == nil && code == 200 && strings.Contains(body, "controller_runtime_"), nil
			})
			if err != nil {
				t.Fatalf("%v (last error %v, status %d, body starts %q)", err, lastErr, code, head(body, 300))
			}
			if direct(p) {
				if code, _, err := scrape(ctx, p, port, ""); err != nil || code != 401 {
					t.Errorf("%s metrics without a token: HTTP %d (%v), want 401", s.name, code, err)
				}
				other, err := saToken(ctx, s.namespace(), "default")
				if err != nil {
					t.Fatal(err)
				}
				if code, _, err := scrape(ctx, p, port, other); err != nil || code != 403 {
					t.Errorf("%s metrics with an unauthorized token: HTTP %d (%v), want 403", s.name, code, err)
				}
			}
			n := strings.Count(body, "\ncontroller_runtime_")
			t.Logf("%s: %d controller_runtime_ samples", s.name, n)
		})
	}
}

// bindMetricsReader lets a ServiceAccount read a release's metrics until the test ends,
// through a ClusterRoleBinding named after binding.
func bindMetricsReader(ctx context.Context, t *testing.T, binding, release, ns, sa string) {
	t.Helper()
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-" + binding + "-metrics"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: release + "-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: sa}},
	}
	_, err := env.client.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		// Bound earlier in this test (one check per sample); that call's cleanup unbinds.
		return
	}
	if err != nil {
		t.Fatalf("binding %s to %s/%s: %v", crb.RoleRef.Name, ns, sa, err)
	}
	t.Cleanup(func() {
		_ = env.client.RbacV1().ClusterRoleBindings().Delete(context.Background(), crb.Name, metav1.DeleteOptions{})
	})
}

func metricsPort(d *appsv1.Deployment) int {
	for _, p := range d.Spec.Template.Spec.Containers[0].Ports {
		if p.Name == "metrics" {
			return int(p.ContainerPort)
		}
	}
	return 0
}

func head(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

var (
	vorGVR = schema.GroupVersionResource{Group: "vald.vdaas.org", Version: "v1", Resource: "valdoperatorreleases"}
	vrGVR  = schema.GroupVersionResource{Group: "vald.vdaas.org", Version: "v1", Resource: "valdreleases"}
)

func TestValdSample(t *testing.T) {
	needInstalled(t, "vald-operator")
	ctx := t.Context()
	sample := filepath.Join(env.root, "deploy", "samples", "vald.yaml")
	if out, err := kubectl(ctx, "apply", "-f", sample); err != nil {
		t.Fatal(err)
	} else {
		t.Logf("%s", strings.TrimSpace(out))
	}
	const ns, name = valdSampleNamespace, "my-vor"
	t.Cleanup(func() {
		_ = env.client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	})
	// Completed means every ValdRelease is Deployed by the Vald Helm Operator. Where none
	// runs (or its stand-in is slower), the test writes the status it would.
	var vor *unstructured.Unstructured
	var vrList []unstructured.Unstructured
	err := poll(ctx, t, "the vor's two ValdReleases", 3*time.Minute, func(ctx context.Context) (bool, error) {
		u, err := env.dyn.Resource(vorGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		vor = u // read before the ValdReleases: Deployed never goes back to False here
		list, err := env.dyn.Resource(vrGVR).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: "vald.vdaas.org/operator-release=" + name})
		if err != nil {
			return false, err
		}
		vrList = list.Items
		return len(vrList) == 2, nil
	})
	if err != nil {
		if vor != nil {
			st, _ := yaml.Marshal(vor.Object["status"])
			t.Logf("vor status:\n%s", st)
		}
		diagnose(ctx, t, serviceByName("vald-operator"))
		t.Fatal(err)
	}
	for _, vr := range vrList {
		if conditionTrue(&vr, "Deployed") {
			continue
		}
		if conditionTrue(vor, "Completed") {
			t.Fatalf("vor Completed while ValdRelease %s is not Deployed", vr.GetName())
		}
		if err := markDeployed(ctx, &vr); err != nil {
			t.Fatal(err)
		}
	}
	err = poll(ctx, t, "vor Completed=True and state Ready", 3*time.Minute, func(ctx context.Context) (bool, error) {
		u, err := env.dyn.Resource(vorGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		vor = u
		state, _, _ := unstructured.NestedString(u.Object, "status", "state")
		return conditionTrue(u, "Completed") && state == "Ready", nil
	})
	if err != nil {
		if vor != nil {
			st, _ := yaml.Marshal(vor.Object["status"])
			t.Logf("vor status:\n%s", st)
		}
		diagnose(ctx, t, serviceByName("vald-operator"))
		t.Fatal(err)
	}
	phase, _, _ := unstructured.NestedString(vor.Object, "status", "phase")
	t.Logf("vor %s/%s: phase %s, state Ready, Completed=True", ns, name, phase)
	wantObjectMetrics(ctx, t, "vald-operator", ns, name, "vald_operator_release_state")

	owned := func(ctx context.Context) ([]string, error) {
		list, err := env.dyn.Resource(vrGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		var names []string
		for _, vr := range list.Items {
			for _, ref := range vr.GetOwnerReferences() {
				if ref.UID == vor.GetUID() {
					names = append(names, vr.GetName())
				}
			}
		}
		return names, nil
	}
	vrs, err := owned(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The sample's active entry has two clusters.
	if len(vrs) != 2 {
		t.Fatalf("ValdReleases owned by the vor: %q, want 2 (one per cluster of the active entry)", vrs)
	}
	t.Logf("ValdReleases owned by the vor: %q", vrs)

	// A cluster taken out of the active entry: the operator deletes its ValdRelease (the
	// prune, which the RBAC audit wants exercised: delete on valdreleases).
	var pruned string
	for _, n := range vrs {
		if strings.HasSuffix(n, "-cluster-b") {
			pruned = n
		}
	}
	if pruned == "" {
		t.Fatalf("no ValdRelease of cluster-b among %q", vrs)
	}
	removeB := []byte(`[{"op":"test","path":"/spec/infrastructure/0/clusters/1/name","value":"cluster-b"},{"op":"remove","path":"/spec/infrastructure/0/clusters/1"}]`)
	if _, err := env.dyn.Resource(vorGVR).Namespace(ns).Patch(ctx, name, types.JSONPatchType, removeB, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	err = poll(ctx, t, "the ValdRelease of the removed cluster pruned", 2*time.Minute, func(ctx context.Context) (bool, error) {
		_, err := env.dyn.Resource(vrGVR).Namespace(ns).Get(ctx, pruned, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
	if err != nil {
		diagnose(ctx, t, serviceByName("vald-operator"))
		t.Fatal(err)
	}

	// Delete the vor only: kube-controller-manager's garbage collector removes what it owns.
	if err := env.dyn.Resource(vorGVR).Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err = poll(ctx, t, "ValdReleases garbage-collected after the vor was deleted", 2*time.Minute, func(ctx context.Context) (bool, error) {
		left := 0
		for _, n := range vrs {
			_, err := env.dyn.Resource(vrGVR).Namespace(ns).Get(ctx, n, metav1.GetOptions{})
			if err == nil {
				left++
			} else if !apierrors.IsNotFound(err) {
				return false, err
			}
		}
		return left == 0, nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func conditionTrue(u *unstructured.Unstructured, typ string) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ {
			return m["status"] == "True"
		}
	}
	return false
}

func TestNodeAgentOnEveryNode(t *testing.T) {
	needInstalled(t, "node-agent")
	s := serviceByName("node-agent")
	ctx := t.Context()
	nodes, err := env.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := len(nodes.Items)
	if env.local != nil && want < 4 {
		t.Errorf("the local cluster has %d nodes, want at least 4", want)
	}
	readyOn := map[string]string{}
	err = poll(ctx, t, fmt.Sprintf("node-agent Ready on all %d nodes", want), 3*time.Minute, func(ctx context.Context) (bool, error) {
		ps, err := readyAgents(ctx, s)
		if err != nil {
			return false, err
		}
		readyOn = map[string]string{}
		for _, p := range ps {
			readyOn[p.Spec.NodeName] = p.Name
		}
		return len(readyOn) == want, nil
	})
	for _, n := range nodes.Items {
		if p, ok := readyOn[n.Name]; ok {
			t.Logf("node %s: agent pod %s Ready", n.Name, p)
		} else {
			t.Logf("node %s: no Ready agent pod", n.Name)
		}
	}
	if err != nil {
		diagnose(ctx, t, s)
		t.Fatalf("%v: Ready on %d of %d nodes", err, len(readyOn), want)
	}
	if env.local != nil {
		// Every simulated node is this host: each agent must have its own state and PV
		// tree, or they would share one state file. Look at the running processes.
		ps, err := readyAgents(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		for i := range ps {
			p := &ps[i]
			pid, err := containerPID(p)
			if err != nil {
				t.Errorf("pod %s: %v", p.Name, err)
				continue
			}
			cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			if err != nil {
				t.Errorf("pod %s: pid %d: %v", p.Name, pid, err)
				continue
			}
			want := "--agent-root=" + filepath.Join(env.workDir, "node-agent", "agent", p.Spec.NodeName) + "\x00"
			if !bytes.Contains(cmdline, []byte(want)) {
				t.Errorf("pod %s on %s: process %d lacks %q: %q", p.Name, p.Spec.NodeName, pid, strings.TrimSuffix(want, "\x00"), cmdline)
			}
		}
	}
	ds, err := env.client.AppsV1().DaemonSets(s.namespace()).List(ctx, metav1.ListOptions{LabelSelector: selector(s.name)})
	if err == nil && len(ds.Items) == 1 {
		st := ds.Items[0].Status
		t.Logf("DaemonSet %s: desired %d, ready %d, available %d", ds.Items[0].Name, st.DesiredNumberScheduled, st.NumberReady, st.NumberAvailable)
	}
}

const upgradeRelease = "valkey-operator"

func TestUpgradeRestartsOnlyThatController(t *testing.T) {
	needInstalled(t, upgradeRelease)
	tag := os.Getenv("E2E_UPGRADE_TAG")
	if tag == "" {
		if env.local == nil {
			t.Skipf("skipped against E2E_KUBECONFIG=%s: set E2E_UPGRADE_TAG to a second tag of ghcr.io/opsuite/%s the cluster can pull (the local runner maps every tag to bin/%s)", env.kubeconfig, upgradeRelease, upgradeRelease)
		}
		tag = "e2e-upgrade"
	}
	s := serviceByName(upgradeRelease)
	ctx := t.Context()
	before, err := podUIDs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	if _, err := helm(ctx, "upgrade", s.name, filepath.Join(env.root, "charts", s.name), "-n", s.namespace(), "--reuse-values", "--set", "image.tag="+tag); err != nil {
		t.Fatal(err)
	}
	t.Logf("helm upgrade %s --set image.tag=%s: %s", s.name, tag, since(begin))
	err = poll(ctx, t, s.name+" rolled out with tag "+tag, 3*time.Minute, func(ctx context.Context) (bool, error) {
		d, err := controllerDeployment(ctx, s)
		if err != nil {
			return false, err
		}
		if !strings.HasSuffix(d.Spec.Template.Spec.Containers[0].Image, ":"+tag) || !deploymentReady(d) {
			return false, nil
		}
		ps, err := pods(ctx, s)
		if err != nil {
			return false, err
		}
		for _, p := range ps {
			if _, old := before[s.namespace()+"/"+p.Name]; old {
				return false, nil // the old pod is still terminating
			}
		}
		return true, nil
	})
	if err != nil {
		diagnose(ctx, t, s)
		t.Fatal(err)
	}
	after, err := podUIDs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for key, uid := range before {
		ns := strings.SplitN(key, "/", 2)[0]
		if ns == s.namespace() {
			if _, ok := after[key]; ok {
				t.Errorf("%s: pod %s was not replaced by the upgrade", s.name, key)
			}
			continue
		}
		if after[key] != uid {
			t.Errorf("pod %s (uid %s) of another release changed to %q by upgrading %s", key, uid, after[key], s.name)
		}
	}
	t.Logf("upgrade replaced %s's pod; %d pods of the other releases kept their UIDs", s.name, len(before)-1)
	// The new pod takes over the Lease (at once if the old one released it, else once it
	// expires).
	err = poll(ctx, t, "the upgraded "+s.name+" pod holds the Lease", 2*time.Minute, func(ctx context.Context) (bool, error) {
		l, err := leaseOf(ctx, s)
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		ps, err := readyPods(ctx, s)
		if err != nil {
			return false, err
		}
		_, ok := holderPod(l, ps)
		return ok, nil
	})
	if err != nil {
		diagnose(ctx, t, s)
		t.Fatal(err)
	}
}

const scaleRelease = "memgraph-operator"

var leaderMetric = regexp.MustCompile(`(?m)^leader_election_master_status\{[^}]*\} (\S+)$`)

func TestTwoReplicasOneLeader(t *testing.T) {
	needInstalled(t, scaleRelease)
	s := serviceByName(scaleRelease)
	ctx := t.Context()
	if _, err := helm(ctx, "upgrade", s.name, filepath.Join(env.root, "charts", s.name), "-n", s.namespace(), "--reuse-values", "--set", "replicaCount=2"); err != nil {
		t.Fatal(err)
	}
	err := poll(ctx, t, s.name+" at 2 ready replicas", 3*time.Minute, func(ctx context.Context) (bool, error) {
		d, err := controllerDeployment(ctx, s)
		if err != nil {
			return false, err
		}
		return *d.Spec.Replicas == 2 && deploymentReady(d), nil
	})
	if err != nil {
		diagnose(ctx, t, s)
		t.Fatal(err)
	}
	ps, err := readyPods(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 2 {
		t.Fatalf("%d ready pods, want 2:\n%s", len(ps), describePods(ctx, s))
	}
	// Watch a few renewals: the holder stays one of the two pods, and the pods' own
	// leader_election_master_status agrees that exactly one of them leads.
	d, _ := controllerDeployment(ctx, s)
	bindMetricsReader(ctx, t, s.name+"-leader", s.name, s.namespace(), d.Spec.Template.Spec.ServiceAccountName)
	token, err := saToken(ctx, s.namespace(), d.Spec.Template.Spec.ServiceAccountName)
	if err != nil {
		t.Fatal(err)
	}
	var holder string
	deadline := time.Now().Add(15 * time.Second)
	for {
		l, err := leaseOf(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		name, ok := holderPod(l, ps)
		if !ok {
			t.Fatalf("Lease holder %q is neither pod:\n%s", name, describePods(ctx, s))
		}
		if holder != "" && holder != name {
			t.Errorf("leadership moved from %s to %s while both pods ran", holder, name)
		}
		holder = name
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(3 * time.Second)
	}
	leaders := 0
	for i := range ps {
		var code int
		var body string
		var lastErr error
		err := poll(ctx, t, "metrics of "+ps[i].Name, 30*time.Second, func(ctx context.Context) (bool, error) {
			code, body, lastErr = scrape(ctx, &ps[i], metricsPort(d), token)
			return lastErr == nil && code == 200, nil
		})
		if err != nil {
			t.Fatalf("metrics of %s: %d %v", ps[i].Name, code, lastErr)
		}
		m := leaderMetric.FindStringSubmatch(body)
		if m == nil {
			t.Logf("%s: no leader_election_master_status sample (not leading)", ps[i].Name)
			continue
		}
		if v, _ := strconv.ParseFloat(m[1], 64); v == 1 {
			leaders++
			if ps[i].Name != holder {
				t.Errorf("pod %s says it leads, the Lease says %s", ps[i].Name, holder)
			}
		}
	}
	if leaders != 1 {
		t.Errorf("%d pods report leader_election_master_status 1, want exactly 1", leaders)
	}
	t.Logf("2 ready replicas; Lease held by %s; %d pod(s) report leading by metric", holder, leaders)
}

const killRelease = "veltrix-operator"

// TestKilledProcessRecovers kills a controller's process: its pod turns unready and recovers,
// on the local cluster by a restart in place (restartCount grows), as on a kubelet.
func TestKilledProcessRecovers(t *testing.T) {
	needRunner(t, "killing a container's process by pid")
	needInstalled(t, killRelease)
	s := serviceByName(killRelease)
	ctx := t.Context()
	ps, err := readyPods(ctx, s)
	if err != nil || len(ps) != 1 {
		t.Fatalf("want 1 ready pod of %s (%v):\n%s", s.name, err, describePods(ctx, s))
	}
	victim := ps[0]
	pid, err := containerPID(&victim)
	if err != nil {
		t.Fatal(err)
	}
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	t.Logf("pod %s: process %d: %s", victim.Name, pid, strings.ReplaceAll(string(bytes.TrimRight(cmdline, "\x00")), "\x00", " "))
	if !bytes.Contains(cmdline, []byte(s.name)) {
		t.Fatalf("pid %d is not %s (cmdline %q)", pid, s.name, cmdline)
	}
	restarts := int32(0)
	for _, c := range victim.Status.ContainerStatuses {
		restarts += c.RestartCount
	}
	begin := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill %d: %v", pid, err)
	}
	sawUnready := false
	err = poll(ctx, t, "killed pod "+victim.Name+" unready", time.Minute, func(ctx context.Context) (bool, error) {
		p, err := env.client.CoreV1().Pods(s.namespace()).Get(ctx, victim.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		if !podReady(p) {
			t.Logf("pod %s: phase %s, ready false, after %s", p.Name, p.Status.Phase, since(begin))
			sawUnready = true
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		diagnose(ctx, t, s)
		t.Fatal(err)
	}
	var how string
	err = poll(ctx, t, s.name+" ready again after the kill", 3*time.Minute, func(ctx context.Context) (bool, error) {
		ps, err := readyPods(ctx, s)
		if err != nil {
			return false, err
		}
		for _, p := range ps {
			if p.UID != victim.UID {
				how = "replaced by pod " + p.Name
				return true, nil
			}
			var r int32
			for _, c := range p.Status.ContainerStatuses {
				r += c.RestartCount
			}
			if r > restarts {
				how = fmt.Sprintf("restarted in place (restarts %d)", r)
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		diagnose(ctx, t, s)
		t.Fatal(err)
	}
	t.Logf("after SIGKILL of pid %d: unready seen=%v, %s, %s in all", pid, sawUnready, how, since(begin))
	if env.local != nil && !strings.HasPrefix(how, "restarted in place") {
		t.Errorf("the local cluster's runner %s; a kubelet restarts the container in place", how)
	}
}

// containerPID finds the process of a pod's first container: the runner reports it as
// the container ID (localcluster://<pid>) and writes a pidfile.
func containerPID(p *corev1.Pod) (int, error) {
	for _, c := range p.Status.ContainerStatuses {
		if v, ok := strings.CutPrefix(c.ContainerID, "localcluster://"); ok {
			if pid, err := strconv.Atoi(v); err == nil {
				return pid, nil
			}
		}
	}
	path := filepath.Join(env.local.PidDir(), fmt.Sprintf("pod_%s_%s_%s.pid", p.Namespace, p.Name, p.Spec.Containers[0].Name))
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("no container ID with a pid and no pidfile: %w", err)
	}
	return strconv.Atoi(strings.TrimSpace(string(data)))
}

// valdSampleNamespace is where deploy/samples/vald.yaml puts its vor.
const valdSampleNamespace = "vald-demo"
