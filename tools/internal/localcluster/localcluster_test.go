package localcluster_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/opsuite/suite/shared/testenv"
	"github.com/opsuite/suite/tools/internal/localcluster"
)

// The test binary doubles as the cluster daemon and the pod helper, as the localcluster
// command does.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "podexit" {
		os.Exit(3)
	}
	if len(os.Args) > 1 && os.Args[1] == "podecho" {
		if err := podEcho(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if len(os.Args) > 1 && os.Args[1] == "podapp" {
		if err := podApp(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if handled, err := localcluster.Dispatch(os.Args[1:]); handled {
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// freeInstance returns the first cluster instance from 5 on whose ports are all free.
func freeInstance(t testing.TB) int {
	for i := 5; i < 60; i++ {
		if testenv.PortsFree(localcluster.InstanceOptions("/", i).PortBase, 6) == nil {
			return i
		}
	}
	t.Fatal("no free cluster instance (ports 36493-37038 all taken)")
	return 0
}

func repoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for d := dir; d != "/"; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.work")); err == nil {
			return d
		}
	}
	t.Fatal("no go.work above the test directory")
	return ""
}

// TestLocalCluster brings a cluster up in a temporary directory on its own ports and
// checks nodes, a StatefulSet with claims, and a Redis pod run as a real process.
func TestLocalCluster(t *testing.T) {
	root := repoRoot(t)
	// Instance 5 or the next free one: its own ports (36493-36498 for 5) and address ranges
	// (pods 127.21.0.0/16, services 127.22.0.0/16 for 5), so the test runs beside a
	// developer's `make up` cluster and beside another run of itself.
	o := localcluster.InstanceOptions(root, freeInstance(t))
	o.Dir = filepath.Join(t.TempDir(), "cluster")
	o.PoolLabelPrefix = "pool.test.opsuite.io"
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	o.ImageRules = append(o.ImageRules, podAppRule(self))
	o.ObjectStore = true // as `make up` runs it

	if os.Geteuid() != 0 {
		t.Fatal("the local cluster's process runner needs root (private mount namespaces per pod); run the tests as root, as CI does")
	}
	// Binaries up builds itself when missing (kwok, etcd, the control plane through
	// tools/build-controlplane.sh); redis-server is a Debian package.
	if _, err := os.Stat("/usr/bin/redis-server"); err != nil {
		t.Fatalf("redis-server is missing (%v): install the Debian package redis-server, listed in .ci/apt-packages.txt", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var out strings.Builder
	begin := time.Now()
	if err := localcluster.Up(ctx, o, self, &out); err != nil {
		t.Fatalf("up: %v\n%s", err, out.String())
	}
	t.Logf("up (fresh state, binaries built): %s", time.Since(begin).Round(10*time.Millisecond))
	downDone := false
	t.Cleanup(func() {
		if !downDone {
			dumpLogs(t, o)
			_ = localcluster.Down(o, false, &out)
		}
	})

	// A second up finds the running cluster and changes nothing.
	begin = time.Now()
	if err := localcluster.Up(ctx, o, self, &out); err != nil {
		t.Fatalf("second up: %v", err)
	}
	t.Logf("second up (already running): %s", time.Since(begin).Round(10*time.Millisecond))

	cfg, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	client := kubernetes.NewForConfigOrDie(cfg)

	t.Run("nodes", func(t *testing.T) { checkNodes(ctx, t, client, o) })
	t.Run("statefulset with claims", func(t *testing.T) { checkStatefulSet(ctx, t, client) })
	t.Run("kwok pod waits for its readiness gate", func(t *testing.T) { checkKwokReadinessGate(ctx, t, client, o) })
	t.Run("object store", func(t *testing.T) { checkObjectStore(ctx, t, client, o) })
	t.Run("redis pod runs as a process", func(t *testing.T) { checkRedis(ctx, t, client, o) })
	t.Run("pod environment, volumes, token, names, probes", func(t *testing.T) { checkPodApp(ctx, t, client, o) })
	t.Run("crashing container restarts in place", func(t *testing.T) { checkCrashLoop(ctx, t, client) })
	t.Run("securityContext and file modes", func(t *testing.T) { checkSecurityContext(ctx, t, client) })
	t.Run("hostPath /dev is the node's own", func(t *testing.T) { checkNodeDev(ctx, t, client, o) })
	t.Run("audit log of ServiceAccounts' requests", func(t *testing.T) { checkAudit(ctx, t, client, cfg, o) })
	t.Run("killed kube-scheduler restarts", func(t *testing.T) { checkSchedulerRestarts(ctx, t, client, o) })
	t.Run("node deletion takes its pods", func(t *testing.T) {
		redis, err := client.CoreV1().Pods("default").Get(ctx, "redis", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range o.Nodes {
			if n.Name != redis.Spec.NodeName {
				checkNodeDeletion(ctx, t, client, n.Name)
				return
			}
		}
	})

	// Restart on the kept state: the warm start a developer sees after `down --keep`.
	storeID, storeSecret := storeKeys(ctx, t, client)
	pids := localcluster.ProcessIDs(o)
	if err := localcluster.Down(o, true, &out); err != nil {
		t.Fatalf("down --keep: %v", err)
	}
	begin = time.Now()
	if err := localcluster.Up(ctx, o, self, &out); err != nil {
		t.Fatalf("up on kept state: %v\n%s", err, out.String())
	}
	t.Logf("up on kept state: %s", time.Since(begin).Round(10*time.Millisecond))
	checkObjectStoreKept(ctx, t, client, o, storeID, storeSecret)
	waitFor(ctx, t, "redis pod Ready again after the restart", func() (bool, string) {
		pod, err := client.CoreV1().Pods("default").Get(ctx, "redis", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return podReady(pod), string(pod.Status.Phase)
	})

	// Deleting the claim deletes its volume and the volume's directory.
	pvc, err := client.CoreV1().PersistentVolumeClaims("default").Get(ctx, "redis-data", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	volumeDir := filepath.Join(o.VolumeDir(), pvc.Spec.VolumeName)
	if _, err := os.Stat(volumeDir); err != nil {
		t.Errorf("volume directory of the redis claim: %v", err)
	}
	if err := client.CoreV1().Pods("default").Delete(ctx, "redis", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := client.CoreV1().PersistentVolumeClaims("default").Delete(ctx, "redis-data", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "the deleted claim's volume directory removed", func() (bool, string) {
		_, err := os.Stat(volumeDir)
		return os.IsNotExist(err), fmt.Sprint(err)
	})

	pids = append(pids, localcluster.ProcessIDs(o)...)
	if t.Failed() {
		dumpLogs(t, o)
	}
	if err := localcluster.Down(o, false, &out); err != nil {
		t.Fatalf("down: %v", err)
	}
	downDone = true
	for _, pid := range pids {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
			stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			if !strings.Contains(string(stat), ") Z ") {
				t.Errorf("process %d still runs after down", pid)
			}
		}
	}
	if _, err := os.Stat(o.StateDir()); !os.IsNotExist(err) {
		t.Errorf("state directory %s not removed by down: %v", o.StateDir(), err)
	}
	if mounts, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(mounts), o.Dir) {
		t.Errorf("mounts under %s left behind", o.Dir)
	}
	if disks, err := localcluster.NodeDisks(o); err != nil || len(disks) != 0 {
		t.Errorf("loop devices left attached after down: %v (%v)", disks, err)
	}
}

func checkNodes(ctx context.Context, t *testing.T, client kubernetes.Interface, o localcluster.Options) {
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) < 4 {
		t.Fatalf("want at least 4 nodes, got %d", len(nodes.Items))
	}
	types := map[string]int{}
	for _, n := range nodes.Items {
		ready := false
		for _, c := range n.Status.Conditions {
			ready = ready || (c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue)
		}
		if !ready {
			t.Errorf("node %s not Ready", n.Name)
		}
		if n.Labels[o.PoolLabelPrefix+"/namespace"] != "default" {
			t.Errorf("node %s: label %s/namespace = %q", n.Name, o.PoolLabelPrefix, n.Labels[o.PoolLabelPrefix+"/namespace"])
		}
		types[n.Labels[o.PoolLabelPrefix+"/type"]]++
		if n.Status.Capacity.Cpu().IsZero() || n.Status.Capacity.Memory().IsZero() {
			t.Errorf("node %s has no cpu/memory capacity: %v", n.Name, n.Status.Capacity)
		}
		for _, a := range n.Status.Addresses {
			if ip := net.ParseIP(a.Address); ip != nil && !ip.IsLoopback() {
				t.Errorf("node %s has non-loopback address %s", n.Name, a.Address)
			}
		}
	}
	if types["general"] == 0 || types["agent"] == 0 {
		t.Errorf("want general and agent nodes, got %v", types)
	}
}

func checkStatefulSet(ctx context.Context, t *testing.T, client kubernetes.Interface) {
	replicas := int32(3)
	labels := map[string]string{"app": "sim"}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "sim"},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    &replicas,
			ServiceName: "sim",
			Selector:    &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "app", Image: "registry.example/simulated:1",
					VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
				}}},
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
						corev1.ResourceStorage: resource.MustParse("1Gi"),
					}},
				},
			}},
		},
	}
	if _, err := client.AppsV1().StatefulSets("default").Create(ctx, sts, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "StatefulSet sim with 3 ready replicas", func() (bool, string) {
		got, err := client.AppsV1().StatefulSets("default").Get(ctx, "sim", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return got.Status.ReadyReplicas == replicas, fmt.Sprintf("ready %d", got.Status.ReadyReplicas)
	})
	for i := range 3 {
		name := fmt.Sprintf("data-sim-%d", i)
		pvc, err := client.CoreV1().PersistentVolumeClaims("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if pvc.Status.Phase != corev1.ClaimBound {
			t.Errorf("claim %s is %s, want Bound", name, pvc.Status.Phase)
		}
	}
	// The default class allows expansion and the pvc-resize stage plays the resizer: a
	// grown request becomes the claim's capacity.
	sc, err := client.StorageV1().StorageClasses().Get(ctx, "kwok-volume", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sc.AllowVolumeExpansion == nil || !*sc.AllowVolumeExpansion {
		t.Errorf("StorageClass kwok-volume allowVolumeExpansion %v, want true", sc.AllowVolumeExpansion)
	}
	grow := []byte(`{"spec":{"resources":{"requests":{"storage":"2Gi"}}}}`)
	if _, err := client.CoreV1().PersistentVolumeClaims("default").Patch(ctx, "data-sim-0", types.MergePatchType, grow, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "claim data-sim-0 expanded to 2Gi", func() (bool, string) {
		pvc, err := client.CoreV1().PersistentVolumeClaims("default").Get(ctx, "data-sim-0", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		got := pvc.Status.Capacity[corev1.ResourceStorage]
		return got.Cmp(resource.MustParse("2Gi")) == 0 && pvc.Status.Phase == corev1.ClaimBound, fmt.Sprintf("capacity %s, phase %s", got.String(), pvc.Status.Phase)
	})
	if pvc, err := client.CoreV1().PersistentVolumeClaims("default").Get(ctx, "data-sim-1", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	} else if got := pvc.Status.Capacity[corev1.ResourceStorage]; got.Cmp(resource.MustParse("1Gi")) != 0 {
		t.Errorf("claim data-sim-1, not grown, has capacity %s", got.String())
	}
	pods, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=sim"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if ip := net.ParseIP(p.Status.PodIP); ip == nil || !ip.IsLoopback() {
			t.Errorf("pod %s has address %q, want one in 127.0.0.0/8", p.Name, p.Status.PodIP)
		}
	}
}

func checkRedis(ctx context.Context, t *testing.T, client kubernetes.Interface, o localcluster.Options) {
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "redis-data"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if _, err := client.CoreV1().PersistentVolumeClaims("default").Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "redis", Labels: map[string]string{"app": "redis"}},
		Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "redis-data"}}}},
			Containers: []corev1.Container{{
				Name: "redis", Image: "redis:7",
				Args:         []string{"--save", "", "--appendonly", "no"},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
				Ports:        []corev1.ContainerPort{{Name: "redis", ContainerPort: 6379}},
				Env: []corev1.EnvVar{{Name: "MY_POD", ValueFrom: &corev1.EnvVarSource{
					FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("redis")}},
					PeriodSeconds: 1,
				},
			}}},
	}
	if _, err := client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var ip string
	waitFor(ctx, t, "redis pod Ready", func() (bool, string) {
		got, err := client.CoreV1().Pods("default").Get(ctx, "redis", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		ip = got.Status.PodIP
		return podReady(got), fmt.Sprintf("phase %s, statuses %v", got.Status.Phase, got.Status.ContainerStatuses)
	})
	if parsed := net.ParseIP(ip); parsed == nil || !parsed.IsLoopback() {
		t.Fatalf("redis pod address %q not in 127.0.0.0/8", ip)
	}
	reply, err := redisCommand(net.JoinHostPort(ip, "6379"), "PING")
	if err != nil || reply != "+PONG" {
		t.Fatalf("PING to redis-server at %s: reply %q, err %v", ip, reply, err)
	}
	// Written to the claim's directory (redis' working directory is /data).
	for _, cmd := range []string{"SET greeting hello", "SAVE"} {
		if reply, err := redisCommand(net.JoinHostPort(ip, "6379"), cmd); err != nil || reply != "+OK" {
			t.Fatalf("%s: reply %q, err %v", cmd, reply, err)
		}
	}
	if _, err := os.Stat(filepath.Join(o.LogDir(), "default_redis_redis.log")); err != nil {
		t.Errorf("container log: %v", err)
	}
	// The server is bound to its pod address only, not to every loopback address.
	if c, err := net.DialTimeout("tcp", "127.9.9.9:6379", time.Second); err == nil {
		c.Close()
		t.Errorf("redis-server also answers on 127.9.9.9: not bound to its pod address")
	}

	// Deleting a pod stops its process.
	if err := client.CoreV1().Pods("default").Delete(ctx, "redis", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "redis pod gone and its server stopped", func() (bool, string) {
		_, err := client.CoreV1().Pods("default").Get(ctx, "redis", metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return false, fmt.Sprintf("pod still there (%v)", err)
		}
		c, err := net.DialTimeout("tcp", net.JoinHostPort(ip, "6379"), time.Second)
		if err == nil {
			c.Close()
			return false, "server still answers"
		}
		return true, ""
	})
	// Recreate it for the restart check.
	if _, err := client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "recreated redis pod Ready", func() (bool, string) {
		got, err := client.CoreV1().Pods("default").Get(ctx, "redis", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		ip = got.Status.PodIP
		return podReady(got), string(got.Status.Phase)
	})
	// The claim's data outlived the pod.
	if reply, err := redisCommand(net.JoinHostPort(ip, "6379"), "GET greeting"); err != nil || reply != "hello" {
		t.Fatalf("GET after the pod was recreated: reply %q, err %v; the claim's data did not survive", reply, err)
	}
}

// redisCommand sends one inline command and returns the status line, or the value of a
// bulk reply.
func redisCommand(addr, cmd string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte(cmd + "\r\n")); err != nil {
		return "", err
	}
	rd := bufio.NewReader(c)
	line, err := rd.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSpace(line)
	if strings.HasPrefix(line, "$") && line != "$-1" {
		value, err := rd.ReadString('\n')
		return strings.TrimSpace(value), err
	}
	return line, nil
}

// checkKwokReadinessGate: a pod kwok simulates, with a readiness gate, runs but is not Ready
// until the gate's owner patches its condition True through pods/status, and is not Ready
// again once it patches it False; kwok never writes the gate's condition itself.
func checkKwokReadinessGate(ctx context.Context, t *testing.T, client kubernetes.Interface, o localcluster.Options) {
	const gate = "example.test/warm"
	pods := client.CoreV1().Pods("default")
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "gated"},
		Spec: corev1.PodSpec{NodeName: o.Nodes[0].Name, ReadinessGates: []corev1.PodReadinessGate{{ConditionType: gate}},
			Containers: []corev1.Container{{Name: "app", Image: "registry.example/simulated:1"}}},
	}
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = pods.Delete(context.Background(), pod.Name, metav1.DeleteOptions{}) }()
	state := func(want corev1.ConditionStatus, reason string) func() (bool, string) {
		return func() (bool, string) {
			p, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady {
					return p.Status.Phase == corev1.PodRunning && c.Status == want && c.Reason == reason,
						fmt.Sprintf("%s Ready=%s %s: %s", p.Status.Phase, c.Status, c.Reason, c.Message)
				}
			}
			return false, string(p.Status.Phase) + " without Ready"
		}
	}
	waitFor(ctx, t, "the gated pod Running, Ready=False ReadinessGatesNotReady", state(corev1.ConditionFalse, "ReadinessGatesNotReady"))
	time.Sleep(time.Second)
	p, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range p.Status.Conditions {
		if c.Type == gate || (c.Type == corev1.PodReady && c.Status != corev1.ConditionFalse) {
			t.Fatalf("before the gate's owner spoke: %s=%s (kwok must not set the gate, nor Ready without it)", c.Type, c.Status)
		}
	}
	setGate := func(s corev1.ConditionStatus) {
		patch := fmt.Sprintf(`{"status":{"conditions":[{"type":%q,"status":%q,"reason":"Owner"}]}}`, gate, s)
		if _, err := pods.Patch(ctx, pod.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
			t.Fatal(err)
		}
	}
	setGate(corev1.ConditionTrue)
	waitFor(ctx, t, "the gated pod Ready once its gate is True", state(corev1.ConditionTrue, ""))
	setGate(corev1.ConditionFalse)
	waitFor(ctx, t, "the gated pod not Ready once its gate is False", state(corev1.ConditionFalse, "ReadinessGatesNotReady"))
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func waitFor(ctx context.Context, t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	var last string
	for time.Now().Before(deadline) && ctx.Err() == nil {
		var ok bool
		if ok, last = cond(); ok {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s; last: %s", what, last)
}

func dumpLogs(t *testing.T, o localcluster.Options) {
	entries, _ := os.ReadDir(o.LogDir())
	for _, e := range entries {
		data, _ := os.ReadFile(filepath.Join(o.LogDir(), e.Name()))
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		n := 15
		if e.Name() == "localcluster.log" {
			n = 120
		}
		if len(lines) > n {
			lines = lines[len(lines)-n:]
		}
		t.Logf("--- %s (last lines)\n%s", e.Name(), strings.Join(lines, "\n"))
	}
}

// BenchmarkIdleRSS starts a cluster (every component, the runner, the nodes' disks) and
// reports the resident memory of all its processes once idle, in MiB (`make bench`).
func BenchmarkIdleRSS(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Fatal("the local cluster's process runner needs root; run the benchmarks as root, as CI does")
	}
	root := repoRoot(b)
	o := localcluster.InstanceOptions(root, freeInstance(b))
	o.Dir = filepath.Join(b.TempDir(), "cluster")
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var out strings.Builder
	if err := localcluster.Up(ctx, o, self, &out); err != nil {
		b.Fatalf("up: %v\n%s", err, out.String())
	}
	defer func() {
		if err := localcluster.Down(o, false, &out); err != nil {
			b.Errorf("down: %v", err)
		}
	}()
	time.Sleep(5 * time.Second)
	var total int64
	var parts []string
	for b.Loop() {
		total, parts = 0, parts[:0]
		for _, pid := range localcluster.ProcessIDs(o) {
			comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
			rss := localcluster.RSS(pid)
			total += rss
			parts = append(parts, fmt.Sprintf("%s=%dMiB", strings.TrimSpace(string(comm)), rss>>20))
		}
	}
	if total == 0 {
		b.Fatal("no cluster process found to measure")
	}
	b.ReportMetric(float64(total)/(1<<20), "MiB-RSS")
	b.Logf("idle RSS of all cluster processes: %d MiB (%s)", total>>20, strings.Join(parts, " "))
}

// checkSchedulerRestarts kills kube-scheduler, as it kills itself when its cache disagrees
// with the API: the daemon starts it again, as a kubelet restarts a static pod, and a new
// pod is scheduled.
func checkSchedulerRestarts(ctx context.Context, t *testing.T, client kubernetes.Interface, o localcluster.Options) {
	pidFile := filepath.Join(o.PidDir(), "kube-scheduler.pid")
	readPid := func() int {
		data, _ := os.ReadFile(pidFile)
		pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
		return pid
	}
	old := readPid()
	if old == 0 {
		t.Fatalf("no pid in %s", pidFile)
	}
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "a new kube-scheduler process", func() (bool, string) {
		pid := readPid()
		return pid != 0 && pid != old && syscall.Kill(pid, 0) == nil, fmt.Sprintf("pid %d", pid)
	})
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "after-scheduler-restart", Namespace: "default"},
		Spec: corev1.PodSpec{
			Containers:  []corev1.Container{{Name: "c", Image: "registry.example/simulated:1"}},
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
		},
	}
	if _, err := client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.CoreV1().Pods("default").Delete(context.Background(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	})
	waitFor(ctx, t, "the new pod scheduled by the restarted kube-scheduler", func() (bool, string) {
		p, err := client.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Spec.NodeName != "", string(p.Status.Phase)
	})
	log, _ := os.ReadFile(filepath.Join(o.LogDir(), "localcluster.log"))
	if !strings.Contains(string(log), "Control-plane component exited; restarting it") {
		t.Error("the daemon's log does not say it restarted kube-scheduler")
	}
}
