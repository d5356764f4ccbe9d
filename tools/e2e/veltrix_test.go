package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	veltrixv1 "github.com/opsuite/suite/api/veltrix/v1alpha1"
)

var vcGVR = schema.GroupVersionResource{Group: "veltrix.io", Version: "v1alpha1", Resource: "veltrixclusters"}

// The sample's cluster, as deploy/samples/veltrix.yaml names it.
const (
	vxNamespace = "default"
	vxName      = "demo"
)

// TestVeltrixSample applies deploy/samples/veltrix.yaml verbatim on the local cluster, where
// the node agents prepare each node's loop devices: the cluster becomes Ready with 3
// search-ready members on prepared disks; keys written before a scale 3 -> 4 -> 3 are all
// read back after it.
func TestVeltrixSample(t *testing.T) {
	needRunner(t, "ghcr.io/veltrixdb/veltrixdb pods run as bin/veltrix-sim processes, the node agents use loop devices")
	needInstalled(t, "node-agent", "veltrix-operator")
	ctx := t.Context()
	if d, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Add(-time.Minute))
		defer cancel()
	}
	// The suite's agents have a PV root per node (see installArgs): tell the operator.
	op := serviceByName("veltrix-operator")
	pvRoot := filepath.Join(env.workDir, "node-agent", "pv", "$(NODE_NAME)")
	if _, err := helm(ctx, "upgrade", op.name, filepath.Join(env.root, "charts", op.name), "--namespace", op.namespace(),
		"--reuse-values", "--set", "pvRoot="+pvRoot, "--wait", "--timeout", "3m"); err != nil {
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

	// Keys written before the scaling are all there after it.
	keys := map[string]string{}
	for i := range 200 {
		keys[fmt.Sprintf("k%03d", i)] = fmt.Sprintf("v%03d", i)
	}
	addr := vxMemberAddr(ctx, t, 0)
	for k, v := range keys {
		if got := vxCommand(t, addr, "PUT "+k+" "+v); got != "OK" {
			t.Fatalf("PUT %s: %q", k, got)
		}
	}
	for _, size := range []int32{4, 3} {
		began := time.Now()
		if _, err := kubectl(ctx, "patch", "vc", vxName, "-n", vxNamespace, "--type", "merge", "-p", fmt.Sprintf(`{"spec":{"size":%d}}`, size)); err != nil {
			t.Fatal(err)
		}
		waitVeltrix(ctx, t, size, 6*time.Minute)
		t.Logf("scale to %d: %s", size, since(began))
	}
	vxReadAll(ctx, t, keys, "3 -> 4 -> 3")

	// Upgrade: the pods roll one at a time to the new image; status.version follows once
	// every member runs it.
	began := time.Now()
	if _, err := kubectl(ctx, "patch", "vc", vxName, "-n", vxNamespace, "--type", "merge", "-p", `{"spec":{"version":"1.17.1"}}`); err != nil {
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
	for o := range 3 {
		pod, err := env.client.CoreV1().Pods(vxNamespace).Get(ctx, fmt.Sprintf("%s-%d", vxName, o), metav1.GetOptions{})
		if err != nil || pod.Spec.Containers[0].Image != "ghcr.io/veltrixdb/veltrixdb:1.17.1" {
			t.Errorf("pod %d after the upgrade: %v %v", o, err, pod.Spec.Containers)
		}
	}
	vxReadAll(ctx, t, keys, "the upgrade")

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
}

// vxReadAll reads every key back from a member and counts the lost ones.
func vxReadAll(ctx context.Context, t *testing.T, keys map[string]string, after string) {
	t.Helper()
	addr := vxMemberAddr(ctx, t, 1)
	lost := 0
	for k, v := range keys {
		if got := vxCommand(t, addr, "GET "+k); got != v {
			lost++
			t.Errorf("GET %s = %q, want %q", k, got, v)
		}
	}
	t.Logf("keys lost across %s: %d of %d", after, lost, len(keys))
}

func vxCluster(ctx context.Context) (*veltrixv1.VeltrixCluster, error) {
	u, err := env.dyn.Resource(vcGVR).Namespace(vxNamespace).Get(ctx, vxName, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	var c veltrixv1.VeltrixCluster
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &c); err != nil {
		return nil, err
	}
	return &c, nil
}

// waitVeltrix waits until the cluster is Running with size ready members, for its current
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
			c.Status.ReadyMembers == size && c.Status.Size == size, nil
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

// vxCommand sends one text-protocol command and returns the answer line.
func vxCommand(t *testing.T, addr, cmd string) string {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintf(conn, "%s\n", cmd); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		t.Fatalf("%s to %s: %v", cmd, addr, err)
	}
	return strings.TrimSpace(line)
}
