package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	veltrixv1 "github.com/opsuite/suite/api/veltrix/v1alpha1"
)

// vxMirror is the image repository the upgrade moves to: a registry mirror.
const vxMirror = "registry.local:5000/veltrixdb/veltrixdb"

var vcGVR = schema.GroupVersionResource{Group: "veltrix.io", Version: "v1alpha1", Resource: "veltrixclusters"}

// The sample's cluster, as deploy/samples/veltrix.yaml names it.
const (
	vxNamespace = "default"
	vxName      = "veltrix-demo"
)

// TestVeltrixSample applies deploy/samples/veltrix.yaml verbatim on the local cluster, where
// the node agents prepare each node's loop devices: the cluster becomes Ready with 3
// search-ready members on prepared disks, one per node; keys written before a scale
// 3 -> 5 -> 3 (the operator killed during the scale-down) are all read back after each
// step; an upgrade holds each rolled member on its search-ready gate; deletion with either
// reclaim policy.
func TestVeltrixSample(t *testing.T) {
	needRunner(t, "ghcr.io/veltrixdb/veltrixdb pods run as bin/veltrix-sim processes, the node agents use loop devices")
	needInstalled(t, "node-agent", "veltrix-operator")
	ctx := scenarioContext(t)
	// The suite's agents have a PV root per node (see installArgs): tell the operator.
	if err := vxUseAgentsPVRoot(ctx); err != nil {
		t.Fatal(err)
	}

	sample := filepath.Join(env.root, "deploy", "samples", "veltrix.yaml")
	begin := time.Now()
	out, err := kubectl(ctx, "apply", "-f", sample)
	t.Logf("%s", strings.TrimSpace(out))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if out, err := kubectl(context.Background(), "delete", "-f", sample, "--wait=false", "--ignore-not-found"); err != nil {
			t.Logf("deleting the sample: %v\n%s", err, out)
		}
	})
	waitVeltrix(ctx, t, 3, 6*time.Minute)
	t.Logf("time to Ready for 3 members (disk preparation included): %s", since(begin))
	wantObjectMetrics(ctx, t, "veltrix-operator", vxNamespace, vxName, "veltrix_operator_cluster_state", "veltrix_operator_cluster_ready_members",
		"veltrix_operator_cluster_size", "veltrix_operator_member_removals_total")

	// Keys written before the scaling are all there after it: read back through a member
	// that joined (any member routes any key to its owners), and after the scale-down.
	keys := map[string]string{}
	for i := range 200 {
		keys[fmt.Sprintf("k%03d", i)] = fmt.Sprintf("v%03d", i)
	}
	vxWrite(t, vxMemberAddr(ctx, t, 0), keys)
	began := time.Now()
	vxResize(ctx, t, 5)
	waitVeltrix(ctx, t, 5, 6*time.Minute)
	t.Logf("scale 3 -> 5: %s", since(began))
	vxSpread(ctx, t, 5)
	vxReadAll(ctx, t, 4, keys, "3 -> 5")

	// Scale down 5 -> 3 with the operator killed while the first member leaves: enough keys
	// that their move takes seconds. The operator removes the highest ordinal first and
	// shrinks the StatefulSet only once its member is gone; the restarted operator finishes
	// that removal and the next one, nothing is lost.
	for i := range 6000 {
		keys[fmt.Sprintf("m%04d", i)] = fmt.Sprintf("w%04d", i)
	}
	vxWrite(t, vxMemberAddr(ctx, t, 0), keys)
	token := vxAdminToken(ctx, t)
	admin := vxAdminAddr(ctx, t, 0)
	began = time.Now()
	vxResize(ctx, t, 3)
	err = poll(ctx, t, vxName+"-4 leaving", 2*time.Minute, func(ctx context.Context) (bool, error) {
		return vxMemberState(ctx, admin, token, vxName+"-4") == "leaving", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	vxKillOperator(ctx, t, vxName+"-4")
	// Each member's time out of the membership (gone from GET /admin/cluster/members, its
	// partitions moved), counted from the resize: the benchmark's time per member.
	last := began
	for _, o := range []int{4, 3} {
		id := fmt.Sprintf("%s-%d", vxName, o)
		if o == 3 {
			// The second removal meets a control-plane outage: moves slowed so that it is
			// still leaving when kube-apiserver and etcd stop for 20 s; the operator loses
			// its lease and restarts, and must lower the StatefulSet once the member is gone.
			vxSetMoveRate(ctx, t, token, 4, 200)
			err := pollEvery(ctx, 50*time.Millisecond, 3*time.Minute, func(ctx context.Context) (bool, error) {
				return vxMemberState(ctx, admin, token, id) == "leaving", nil
			})
			if err != nil {
				t.Fatalf("%s never seen leaving: %v", id, err)
			}
			if err := controlPlaneOutage(ctx, t, 20*time.Second); err != nil {
				t.Fatal(err)
			}
			vxSetMoveRate(ctx, t, token, 4, 1000)
		}
		err := poll(ctx, t, id+" gone from the membership", 4*time.Minute, func(ctx context.Context) (bool, error) {
			// Unanswered (member 0 restarting, say): not gone, ask again.
			members, err := vxMembers(ctx, admin, token)
			_, in := members[id]
			return err == nil && !in, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("scale-down: %s gone from the membership %s after the resize (%s for this member)", id, since(began), since(last))
		last = time.Now()
	}
	waitVeltrix(ctx, t, 3, 6*time.Minute)
	t.Logf("scale 5 -> 3 with the operator killed during the first removal: %s", since(began))
	vxReadAll(ctx, t, 1, keys, "3 -> 5 -> 3 (operator killed during the scale-down)")

	// Upgrade: the pods roll one at a time to the new image; status.version follows once
	// every member runs it. A watch of the members records what the roll went through: the
	// readiness gate must hold (see vxCheckRoll).
	//
	// The simulator rebuilds its index for 3 s after a restart, shorter than the members'
	// 5 s readiness probe period, so /readyz would pass only after the rebuild and the gate
	// would never be seen holding. VeltrixCluster has no field for pod env; the members read
	// the operator's engine ConfigMap (envFrom) at start, and a key another field manager adds
	// survives the operator's server-side apply: the rolled members rebuild for 12 s.
	if out, err := kubectl(ctx, "patch", "configmap", vxName+"-env", "-n", vxNamespace, "--type", "merge",
		"-p", `{"data":{"VELTRIX_SIM_INDEX_REBUILD":"12s"}}`); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	roll := vxWatchRoll(ctx, t, 3)
	began = time.Now()
	// The upgrade also moves the cluster to a registry mirror (spec.image), as a user who
	// stops pulling from ghcr.io would: both fields reach the pods through the same roll.
	if _, err := kubectl(ctx, "patch", "vc", vxName, "-n", vxNamespace, "--type", "merge", "-p", `{"spec":{"version":"1.17.1","image":"`+vxMirror+`"}}`); err != nil {
		t.Fatal(err)
	}
	err = poll(ctx, t, "every member on 1.17.1", 6*time.Minute, func(ctx context.Context) (bool, error) {
		c, err := vxCluster(ctx)
		if err != nil {
			return transient(err)
		}
		ready := meta.FindStatusCondition(c.Status.Conditions, veltrixv1.ConditionReady)
		return c.Status.Version == "1.17.1" && ready != nil && ready.Status == metav1.ConditionTrue && ready.ObservedGeneration == c.Generation, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("upgrade of 3 members: %s", since(began))
	vxCheckRoll(t, roll())
	for o := range 3 {
		pod, err := env.client.CoreV1().Pods(vxNamespace).Get(ctx, fmt.Sprintf("%s-%d", vxName, o), metav1.GetOptions{})
		if err != nil || pod.Spec.Containers[0].Image != vxMirror+":1.17.1" {
			t.Errorf("pod %d after the upgrade: %v %v", o, err, pod.Spec.Containers)
		}
	}
	vxReadAll(ctx, t, 1, keys, "the upgrade")
	vxPartition(ctx, t, keys)
	vxCutOperatorOff(ctx, t, keys)

	// Deletion with the sample's reclaim policy Retain: the volumes stay.
	if _, err := kubectl(ctx, "delete", "-f", sample, "--wait=true", "--timeout=3m"); err != nil {
		t.Fatal(err)
	}
	pvs, err := env.client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{LabelSelector: "veltrix.io/cluster=" + vxName + ",veltrix.io/namespace=" + vxNamespace})
	if err != nil {
		t.Fatal(err)
	}
	kept := 0
	for _, pv := range pvs.Items {
		if pv.DeletionTimestamp == nil {
			kept++
		}
	}
	if kept < 3 {
		t.Errorf("reclaim policy Retain: %d volumes kept, want at least 3", kept)
	}

	// Reclaim policy Delete: a one-member cluster on the nodes' other loop devices, each
	// split by the agent (the sample's rawVLog) into an XFS partition and a raw one, which
	// the member gets as a Block volume named by partition GUID. Its raw VLog is its own
	// after a restart. Deleting the cluster deletes its claims and volumes and
	// releases (wipes) its disks through the agents.
	doomed := strings.Replace(strings.Replace(vxSampleOf(t, sample), "name: "+vxName, "name: doomed", 1), "reclaimPolicy: Retain", "reclaimPolicy: Delete", 1)
	doomed = strings.Replace(strings.Replace(doomed, "size: 3", "size: 1", 1), "replicationFactor: 3", "replicationFactor: 1", 1)
	if !strings.Contains(doomed, "  rawVLog:\n    enabled: true") {
		t.Fatal("the sample no longer enables rawVLog, which this step checks")
	}
	if out, err := kubectlStdin(ctx, doomed, "apply", "-f", "-"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	err = poll(ctx, t, "VeltrixCluster doomed Ready", 6*time.Minute, func(ctx context.Context) (bool, error) {
		c, err := vxClusterNamed(ctx, "doomed")
		if err != nil {
			return transient(err)
		}
		ready := meta.FindStatusCondition(c.Status.Conditions, veltrixv1.ConditionReady)
		return ready != nil && ready.Status == metav1.ConditionTrue && c.Status.ReadyMembers == 1, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	selector := "veltrix.io/cluster=doomed,veltrix.io/namespace=" + vxNamespace
	pvs, err = env.client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil || len(pvs.Items) == 0 {
		t.Fatalf("doomed has no volumes: %v", err)
	}
	modes := map[corev1.PersistentVolumeMode]int{}
	for _, pv := range pvs.Items {
		modes[*pv.Spec.VolumeMode]++
		if *pv.Spec.VolumeMode == corev1.PersistentVolumeBlock && !strings.HasPrefix(pv.Spec.Local.Path, "/dev/disk/by-partuuid/") {
			t.Errorf("Block volume %s at %s, want its partition GUID's path", pv.Name, pv.Spec.Local.Path)
		}
	}
	if modes[corev1.PersistentVolumeFilesystem] != 1 || modes[corev1.PersistentVolumeBlock] != 1 {
		t.Errorf("doomed's volumes by mode %v, want one Filesystem and one Block", modes)
	}
	vxRawVLogRestart(ctx, t, "doomed-0")
	if out, err := kubectl(ctx, "delete", "vc", "doomed", "-n", vxNamespace, "--wait=true", "--timeout=3m"); err != nil {
		ev, _ := kubectl(ctx, "get", "events", "-n", vxNamespace, "--field-selector", "involvedObject.name=doomed")
		left, _ := kubectl(ctx, "get", "statefulsets,pods,pvc,pv", "-o", "wide", "-A")
		t.Fatalf("%v\n%s\nevents:\n%s\nleft:\n%s", err, out, ev, left)
	}
	err = poll(ctx, t, "doomed's volumes gone (reclaim policy Delete)", 2*time.Minute, func(ctx context.Context) (bool, error) {
		pvs, err := env.client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return transient(err)
		}
		pvcs, err := env.client.CoreV1().PersistentVolumeClaims(vxNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=doomed"})
		if err != nil {
			return transient(err)
		}
		return len(pvs.Items) == 0 && len(pvcs.Items) == 0, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if ev, err := kubectl(ctx, "get", "events", "-n", vxNamespace, "--field-selector", "involvedObject.name=doomed", "-o", "jsonpath={range .items[*]}{.reason} {end}"); err != nil || !strings.Contains(ev, "DisksReleased") {
		t.Errorf("no DisksReleased event for doomed (%v): %s", err, ev)
	}
}

// vxRawVLogRestart checks a rawVLog member: its raw VLog device is open (INFO raw_vlogs=1),
// a key written survives the pod's deletion, and the restarted member finds its own raw
// VLog again with the clean shutdown recorded on the device (raw_vlog_checkpoints=1).
func vxRawVLogRestart(ctx context.Context, t *testing.T, pod string) {
	t.Helper()
	addr := func() string {
		p, err := env.client.CoreV1().Pods(vxNamespace).Get(ctx, pod, metav1.GetOptions{})
		if err != nil || p.Status.PodIP == "" {
			t.Fatalf("pod %s: %v", pod, err)
		}
		return net.JoinHostPort(p.Status.PodIP, "9000")
	}
	info := func(s *vxConn) map[string]string {
		f := map[string]string{}
		for _, kv := range strings.Fields(s.do(t, "INFO")) {
			k, v, _ := strings.Cut(kv, "=")
			f[k] = v
		}
		return f
	}
	s := vxSession(t, addr())
	if f := info(s); f["raw_vlogs"] != "1" {
		t.Errorf("INFO of %s: raw_vlogs=%q, want 1", pod, f["raw_vlogs"])
	}
	if got := s.do(t, "PUT raw-key raw-value"); got != "OK" {
		t.Fatalf("PUT on %s: %s", pod, got)
	}
	s.close()
	old, err := env.client.CoreV1().Pods(vxNamespace).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := env.client.CoreV1().Pods(vxNamespace).Delete(ctx, pod, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err = poll(ctx, t, pod+" back and ready", 3*time.Minute, func(ctx context.Context) (bool, error) {
		p, err := env.client.CoreV1().Pods(vxNamespace).Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			return transient(err)
		}
		return p.UID != old.UID && vxPodCondition(p, corev1.PodReady).Status == corev1.ConditionTrue, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	s = vxSession(t, addr())
	defer s.close()
	if f := info(s); f["raw_vlogs"] != "1" || f["raw_vlog_checkpoints"] != "1" {
		t.Errorf("INFO of %s after its restart: raw_vlogs=%q raw_vlog_checkpoints=%q, want 1 and 1 (its own raw VLog, one clean shutdown)", pod, f["raw_vlogs"], f["raw_vlog_checkpoints"])
	}
	if got := s.do(t, "GET raw-key"); got != "raw-value" {
		t.Errorf("GET raw-key on %s after its restart: %q", pod, got)
	}
}

// vxUseAgentsPVRoot tells the operator the suite's agents' PV root (one per node, see
// installArgs).
func vxUseAgentsPVRoot(ctx context.Context) error {
	op := serviceByName("veltrix-operator")
	pvRoot := filepath.Join(env.workDir, "node-agent", "pv", "$(NODE_NAME)")
	_, err := helm(ctx, "upgrade", op.name, filepath.Join(env.root, "charts", op.name), "--namespace", op.namespace(),
		"--reuse-values", "--set", "pvRoot="+pvRoot, "--wait", "--timeout", "3m")
	return err
}

func vxSampleOf(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// kubectlStdin runs kubectl with stdin.
func kubectlStdin(ctx context.Context, stdin string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, env.kubectl, append([]string{"--kubeconfig", env.kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// vxReadAll reads every key back through the member of that ordinal and counts the lost
// ones.
func vxReadAll(ctx context.Context, t *testing.T, ordinal int, keys map[string]string, after string) {
	t.Helper()
	s := vxSession(t, vxMemberAddr(ctx, t, ordinal))
	defer s.close()
	lost := 0
	for k, v := range keys {
		if got := s.do(t, "GET "+k); got != v {
			lost++
			if lost <= 10 {
				t.Errorf("GET %s = %q, want %q", k, got, v)
			}
		}
	}
	if lost > 0 {
		t.Errorf("keys lost across %s: %d of %d", after, lost, len(keys))
	}
	t.Logf("keys lost across %s (read through %s-%d): %d of %d", after, vxName, ordinal, lost, len(keys))
}

// vxSpread checks that the members 0..size-1 run on size different nodes, as the
// sample's required anti-affinity on kubernetes.io/hostname says, each on a node whose
// agent prepared its disk (the node is in status.nodes).
func vxSpread(ctx context.Context, t *testing.T, size int) {
	t.Helper()
	c, err := vxCluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	nodes := map[string]string{}
	for o := range size {
		pod, err := env.client.CoreV1().Pods(vxNamespace).Get(ctx, fmt.Sprintf("%s-%d", vxName, o), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if other, ok := nodes[pod.Spec.NodeName]; ok {
			t.Errorf("%s and %s both on node %s (anti-affinity per host)", other, pod.Name, pod.Spec.NodeName)
		}
		nodes[pod.Spec.NodeName] = pod.Name
		if !slices.Contains(c.Status.Nodes, pod.Spec.NodeName) {
			t.Errorf("%s runs on %s, not among the nodes with prepared disks %v", pod.Name, pod.Spec.NodeName, c.Status.Nodes)
		}
	}
	t.Logf("%d members on %d nodes: %v", size, len(nodes), nodes)
}

// vxWrite PUTs every key through one connection.
func vxWrite(t *testing.T, addr string, keys map[string]string) {
	t.Helper()
	s := vxSession(t, addr)
	defer s.close()
	for k, v := range keys {
		if got := s.do(t, "PUT "+k+" "+v); got != "OK" {
			t.Fatalf("PUT %s: %q", k, got)
		}
	}
}

func vxResize(ctx context.Context, t *testing.T, size int32) {
	t.Helper()
	if _, err := kubectl(ctx, "patch", "vc", vxName, "-n", vxNamespace, "--type", "merge", "-p", fmt.Sprintf(`{"spec":{"size":%d}}`, size)); err != nil {
		t.Fatal(err)
	}
}

// vxAdminToken is the admin token the operator generated for the sample.
func vxAdminToken(ctx context.Context, t *testing.T) string {
	t.Helper()
	s, err := env.client.CoreV1().Secrets(vxNamespace).Get(ctx, vxName+"-admin-token", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return string(s.Data["token"])
}

// vxAdminAddr is the admin HTTP address of a member's pod.
func vxAdminAddr(ctx context.Context, t *testing.T, ordinal int) string {
	t.Helper()
	host, _, err := net.SplitHostPort(vxMemberAddr(ctx, t, ordinal))
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort(host, "2112")
}

// vxMembers is GET /admin/cluster/members of a member: each member's state by id.
func vxMembers(ctx context.Context, admin, token string) (map[string]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+admin+"/admin/cluster/members", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /admin/cluster/members on %s: %s", admin, resp.Status)
	}
	var members []struct{ ID, State string }
	if err := json.NewDecoder(resp.Body).Decode(&members); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, m := range members {
		out[m.ID] = m.State
	}
	return out, nil
}

// vxMemberState is a member's state in GET /admin/cluster/members ("" when absent or
// unanswered).
func vxMemberState(ctx context.Context, admin, token, id string) string {
	members, err := vxMembers(ctx, admin, token)
	if err != nil {
		return ""
	}
	return members[id]
}

// vxSetMoveRate sets the simulator's data-movement rate (keys per second) on members
// 0..n-1 through its fault knob.
func vxSetMoveRate(ctx context.Context, t *testing.T, token string, n, rate int) {
	t.Helper()
	for o := range n {
		body := strings.NewReader(fmt.Sprintf(`{"move_rate":%d}`, rate))
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+vxAdminAddr(ctx, t, o)+"/admin/sim/faults", body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("setting move_rate %d on member %d: %v", rate, o, err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("setting move_rate %d on member %d: %s", rate, o, resp.Status)
		}
	}
}

// vxKillOperator SIGKILLs the veltrix-operator's process; the local cluster restarts it in
// place.
func vxKillOperator(ctx context.Context, t *testing.T, leaving string) {
	t.Helper()
	ps, err := readyPods(ctx, serviceByName("veltrix-operator"))
	if err != nil || len(ps) == 0 {
		t.Fatalf("no ready veltrix-operator pod: %v", err)
	}
	pid, err := containerPID(&ps[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill %d: %v", pid, err)
	}
	t.Logf("killed the operator (pod %s, pid %d) while %s was leaving", ps[0].Name, pid, leaving)
}

func vxCluster(ctx context.Context) (*veltrixv1.VeltrixCluster, error) {
	return vxClusterNamed(ctx, vxName)
}

// vxClusterNamed reads the VeltrixCluster of that name in the sample's namespace.
func vxClusterNamed(ctx context.Context, name string) (*veltrixv1.VeltrixCluster, error) {
	u, err := env.dyn.Resource(vcGVR).Namespace(vxNamespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	var c veltrixv1.VeltrixCluster
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &c); err != nil {
		return nil, err
	}
	return &c, nil
}

// waitVeltrix waits until the cluster is Ready with size ready members, for its current
// generation, and logs the states it went through.
func waitVeltrix(ctx context.Context, t *testing.T, size int32, timeout time.Duration) {
	t.Helper()
	var states []string
	err := poll(ctx, t, fmt.Sprintf("VeltrixCluster %s Ready with %d members", vxName, size), timeout, func(ctx context.Context) (bool, error) {
		c, err := vxCluster(ctx)
		if err != nil {
			return transient(err)
		}
		ready := meta.FindStatusCondition(c.Status.Conditions, veltrixv1.ConditionReady)
		line := fmt.Sprintf("%s %d/%d", c.Status.State, c.Status.ReadyMembers, c.Status.Size)
		if ready != nil {
			line += fmt.Sprintf(" Ready=%s %s: %s", ready.Status, ready.Reason, ready.Message)
		}
		if len(states) == 0 || states[len(states)-1] != line {
			states = append(states, line)
		}
		return ready != nil && ready.Status == metav1.ConditionTrue && ready.ObservedGeneration == c.Generation &&
			c.Status.State == veltrixv1.StateReady && c.Status.ReadyMembers == size && c.Status.Size == size, nil
	})
	t.Logf("states seen: %s", strings.Join(states, " -> "))
	if err != nil {
		if c, gerr := vxCluster(ctx); gerr == nil {
			for _, cond := range c.Status.Conditions {
				t.Logf("%s=%s %s: %s", cond.Type, cond.Status, cond.Reason, cond.Message)
			}
		}
		if out, kerr := kubectl(ctx, "get", "pods,pvc,pv", "-o", "wide", "-A"); kerr == nil {
			t.Logf("%s", out)
		}
		// Each member's own view of the membership, and the end of its log.
		if s, serr := env.client.CoreV1().Secrets(vxNamespace).Get(ctx, vxName+"-admin-token", metav1.GetOptions{}); serr == nil {
			list, _ := env.client.CoreV1().Pods(vxNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + vxName})
			for i := range list.Items {
				p := &list.Items[i]
				if p.Status.PodIP == "" {
					continue
				}
				view, merr := vxMembers(ctx, net.JoinHostPort(p.Status.PodIP, "2112"), string(s.Data["token"]))
				t.Logf("%s (%s) sees members %v (err %v); log tail:\n%s", p.Name, p.Status.PodIP, view, merr, podLogTail(p, 30))
			}
		}
		t.Fatal(err)
	}
}

// vxMemberAddr is the text-protocol address of a member's pod.
func vxMemberAddr(ctx context.Context, t *testing.T, ordinal int) string {
	t.Helper()
	pod, err := env.client.CoreV1().Pods(vxNamespace).Get(ctx, fmt.Sprintf("%s-%d", vxName, ordinal), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Status.Phase != corev1.PodRunning || pod.Status.PodIP == "" {
		t.Fatalf("pod %s is %s at %q", pod.Name, pod.Status.Phase, pod.Status.PodIP)
	}
	return net.JoinHostPort(pod.Status.PodIP, "9000")
}

// vxConn is one text-protocol connection: one command and one answer per line.
type vxConn struct {
	conn net.Conn
	r    *bufio.Reader
}

func vxSession(t *testing.T, addr string) *vxConn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return &vxConn{conn: conn, r: bufio.NewReader(conn)}
}

func (c *vxConn) close() { _ = c.conn.Close() }

func (c *vxConn) do(t *testing.T, cmd string) string {
	t.Helper()
	_ = c.conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintf(c.conn, "%s\n", cmd); err != nil {
		t.Fatal(err)
	}
	line, err := c.r.ReadString('\n')
	if err != nil {
		t.Fatalf("%s to %s: %v", cmd, c.conn.RemoteAddr(), err)
	}
	return strings.TrimSpace(line)
}

// vxRollSeen is what a watch of the members saw during a rolling update.
type vxRollSeen struct {
	// events counts the pod events seen.
	events int
	// gateIgnored: a member Ready while its veltrix.io/search-ready condition was not True.
	gateIgnored []string
	// held: a member whose containers were ready and whose gate was False with the
	// operator's IndexRebuilding (INFO search_ready=0 after the restart), not Ready.
	held []string
	// maxDown is the most members not serving (missing, terminating, not Ready or not
	// search-ready) at once, and when.
	maxDown  int
	downWhen string
	// cut: the watch ended before the roll did, so the record is incomplete.
	cut bool
}

// vxWatchRoll watches the members <vxName>-0..size-1 from now on; the returned function stops
// the watch and tells what it saw.
func vxWatchRoll(ctx context.Context, t *testing.T, size int) func() vxRollSeen {
	t.Helper()
	pods := env.client.CoreV1().Pods(vxNamespace)
	list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + vxName})
	if err != nil {
		t.Fatal(err)
	}
	w, err := pods.Watch(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + vxName, ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	members := map[string]*corev1.Pod{}
	for i := range list.Items {
		members[list.Items[i].Name] = &list.Items[i]
	}
	var seen vxRollSeen
	look := func() {
		down := 0
		var states []string
		for o := range size {
			p := members[fmt.Sprintf("%s-%d", vxName, o)]
			if p == nil {
				down++
				states = append(states, fmt.Sprintf("%s-%d missing", vxName, o))
				continue
			}
			ready, containers := vxPodCondition(p, corev1.PodReady), vxPodCondition(p, corev1.ContainersReady)
			gate := vxPodCondition(p, veltrixv1.SearchReadyGate)
			state := fmt.Sprintf("%s Ready=%s ContainersReady=%s gate=%s/%s", p.Name, ready.Status, containers.Status, gate.Status, gate.Reason)
			if p.DeletionTimestamp != nil {
				state += " terminating"
			}
			states = append(states, state)
			if p.DeletionTimestamp != nil {
				down++
				continue
			}
			if ready.Status == corev1.ConditionTrue && gate.Status != corev1.ConditionTrue {
				seen.gateIgnored = append(seen.gateIgnored, state)
			}
			// The operator's reason for search_ready=0 (services/veltrix-operator members.go).
			if ready.Status == corev1.ConditionFalse && containers.Status == corev1.ConditionTrue &&
				gate.Status == corev1.ConditionFalse && gate.Reason == "IndexRebuilding" {
				seen.held = append(seen.held, state)
			}
			if ready.Status != corev1.ConditionTrue || gate.Status != corev1.ConditionTrue {
				down++
			}
		}
		if down > seen.maxDown {
			seen.maxDown, seen.downWhen = down, strings.Join(states, "; ")
		}
	}
	look()
	done, stopping := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			select {
			case <-stopping:
			default:
				seen.cut = true
			}
		}()
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			seen.events++
			if ev.Type == watch.Deleted {
				delete(members, p.Name)
			} else {
				members[p.Name] = p
			}
			look()
		}
	}()
	return func() vxRollSeen {
		close(stopping)
		w.Stop()
		<-done
		return seen
	}
}

// vxPodCondition is a pod's condition of that type, or an empty one (status "").
func vxPodCondition(p *corev1.Pod, typ corev1.PodConditionType) corev1.PodCondition {
	for _, c := range p.Status.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return corev1.PodCondition{}
}

// vxCheckRoll: during the roll no member was Ready without its search-ready gate, never
// were two members out of service at once (the StatefulSet waited for the gate, not just for
// /readyz), and the gate was seen holding a restarted member whose containers were ready.
func vxCheckRoll(t *testing.T, seen vxRollSeen) {
	t.Helper()
	t.Logf("roll: %d pod events, at most %d member(s) out of service at once (%s), %d observation(s) of a member held by the gate",
		seen.events, seen.maxDown, seen.downWhen, len(seen.held))
	if seen.cut {
		t.Error("the watch of the members ended before the roll did: what it saw is incomplete")
	}
	for i, s := range seen.gateIgnored {
		if i < 5 {
			t.Errorf("Ready although the search-ready gate is not True: %s", s)
		}
	}
	if seen.maxDown > 1 {
		t.Errorf("%d members out of service at once during the roll (maxUnavailable 1): %s", seen.maxDown, seen.downWhen)
	}
	if len(seen.held) == 0 {
		t.Error("no member was seen Ready=False with ContainersReady=True and veltrix.io/search-ready False (IndexRebuilding): the gate's hold was not observed")
	} else {
		t.Logf("held by the gate, e.g.: %s", seen.held[0])
	}
}

// vxPartition cuts member 2 off from members 0 and 1 for at least 20 s (issue "Faults across the
// suite", item 2) while keys are written through member 0 and through member 2 itself:
// each write is acknowledged once one owner stored it (replication factor 3: every member
// owns every key), the unreachable owners get it from hints after healing. Every
// acknowledged key reads back through each member, member 2 ends up holding as many keys as
// member 0, and the cluster is Ready again; what the operator reported meanwhile is logged.
func vxPartition(ctx context.Context, t *testing.T, keys map[string]string) {
	t.Helper()
	var ips []string
	for o := range 3 {
		host, _, err := net.SplitHostPort(vxMemberAddr(ctx, t, o))
		if err != nil {
			t.Fatal(err)
		}
		ips = append(ips, host)
	}
	cut := partitionPods(t, ips[2], ips[:2], 2*time.Minute)
	begin := time.Now()
	written := map[string]string{}
	var reported []string
	observe := func() {
		c, err := vxCluster(ctx)
		if err != nil {
			return
		}
		if r := meta.FindStatusCondition(c.Status.Conditions, veltrixv1.ConditionReady); r != nil {
			line := fmt.Sprintf("%s %d/%d Ready=%s %s: %s", c.Status.State, c.Status.ReadyMembers, c.Spec.Size, r.Status, r.Reason, r.Message)
			if len(reported) == 0 || reported[len(reported)-1] != line {
				reported = append(reported, line)
				t.Logf("+%.1fs operator reports: %s", time.Since(begin).Seconds(), line)
			}
		}
	}
	// Small batches through member 0 and member 2 in turn for 20 s, the operator watched
	// between them: each write waits for the owners it cannot reach (a fraction of a second
	// each on a loaded machine), so the number of keys follows the machine.
	for i := 0; time.Since(begin) < 20*time.Second; i++ {
		for _, o := range []int{0, 2} {
			batch := map[string]string{}
			for k := range 5 {
				batch[fmt.Sprintf("p%d-%03d-%d", o, i, k)] = fmt.Sprintf("w%d-%03d-%d", o, i, k)
			}
			vxWrite(t, vxMemberAddr(ctx, t, o), batch)
			maps.Copy(written, batch)
		}
		observe()
	}
	t.Logf("partition: %d keys acknowledged through members 0 and 2 in %s", len(written), since(begin))
	observe()
	lasted := cut.Heal()
	t.Logf("partition healed after %s", lasted.Round(100*time.Millisecond))
	if lasted >= 2*time.Minute-time.Second {
		t.Errorf("the partition reached its 2-minute bound and healed itself while the writes were still running: it did not hold what it measured")
	}
	waitVeltrix(ctx, t, 3, 3*time.Minute)
	maps.Copy(keys, written)
	for o := range 3 {
		vxReadAll(ctx, t, o, keys, fmt.Sprintf("a partition of member 2 (read through member %d)", o))
	}
	count := func(o int) string {
		s := vxSession(t, vxMemberAddr(ctx, t, o))
		defer s.close()
		for _, kv := range strings.Fields(s.do(t, "INFO")) {
			if v, ok := strings.CutPrefix(kv, "keys="); ok {
				return v
			}
		}
		return ""
	}
	err := poll(ctx, t, "member 2 holding as many keys as member 0", time.Minute, func(context.Context) (bool, error) {
		return count(2) != "" && count(2) == count(0), nil
	})
	if err != nil {
		t.Errorf("after the partition: member 2 holds %s keys, member 0 %s", count(2), count(0))
	}
}
