package e2e

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	veltrixv1 "github.com/opsuite/suite/api/veltrix/v1alpha1"
)

// TestVeltrixLostNode deletes the node of a member of a cluster with
// spec.lostNodes.replace Automatic, on the local cluster (real scheduler, StatefulSet,
// garbage and volume controllers; the node's pods stop with it): the operator removes the
// member from membership at once (status.lastFailoverTime dates it), deletes its claims
// and pod, releases the lost node's volumes and prepares a spare node's disk; the
// StatefulSet's new pod binds a volume there, joins, and every key written before is read
// back once the cluster is Ready again. The node then comes back: its disk is reported
// (DisksReturned) and not made into a volume until the annotation veltrix.io/reoffer-node
// offers it.
func TestVeltrixLostNode(t *testing.T) {
	needRunner(t, "ghcr.io/veltrixdb/veltrixdb pods run as bin/veltrix-sim processes, the node agents use loop devices")
	needInstalled(t, "node-agent", "veltrix-operator")
	ctx := scenarioContext(t)
	if err := vxUseAgentsPVRoot(ctx); err != nil {
		t.Fatal(err)
	}
	const name = "lost"
	manifest := vxSampleOf(t, filepath.Join(env.root, "deploy", "samples", "veltrix.yaml"))
	for old, repl := range map[string]string{
		"name: " + vxName:          "name: " + name,
		"replicationFactor: 3":     "replicationFactor: 2",
		"reclaimPolicy: Retain":    "reclaimPolicy: Delete",
		"  indexMapFallback: true": "  indexMapFallback: true\n  lostNodes:\n    replace: Automatic",
	} {
		if !strings.Contains(manifest, old) {
			t.Fatalf("the sample no longer holds %q", old)
		}
		manifest = strings.Replace(manifest, old, repl, 1)
	}
	if out, err := kubectlStdin(ctx, manifest, "apply", "-f", "-"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := kubectl(context.Background(), "delete", "vc", name, "-n", vxNamespace, "--wait=true", "--timeout=3m", "--ignore-not-found"); err != nil {
			t.Logf("deleting VeltrixCluster %s: %v\n%s", name, err, out)
		}
	})
	cluster := func(ctx context.Context) (*veltrixv1.VeltrixCluster, error) { return vxClusterNamed(ctx, name) }
	waitReady := func(what string) {
		t.Helper()
		var last string
		err := poll(ctx, t, what, 6*time.Minute, func(ctx context.Context) (bool, error) {
			c, err := cluster(ctx)
			if err != nil {
				return transient(err)
			}
			ready := meta.FindStatusCondition(c.Status.Conditions, veltrixv1.ConditionReady)
			if ready != nil {
				last = fmt.Sprintf("%s %s: %s", ready.Status, ready.Reason, ready.Message)
			}
			return ready != nil && ready.Status == metav1.ConditionTrue && ready.ObservedGeneration == c.Generation && c.Status.ReadyMembers == 3, nil
		})
		if err != nil {
			out, _ := kubectl(ctx, "get", "pods,pvc,pv", "-o", "wide", "-n", vxNamespace)
			t.Fatalf("%v (Ready %s)\n%s", err, last, out)
		}
	}
	waitReady("VeltrixCluster lost Ready with 3 members")

	podOf := func(o int) *corev1.Pod {
		t.Helper()
		p, err := env.client.CoreV1().Pods(vxNamespace).Get(ctx, fmt.Sprintf("%s-%d", name, o), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	keys := map[string]string{}
	for i := range 1000 {
		keys[fmt.Sprintf("lost%04d", i)] = fmt.Sprintf("v%04d", i)
	}
	vxWrite(t, net.JoinHostPort(podOf(0).Status.PodIP, "9000"), keys)

	// Member 2 (not 0: the simulator's membership leader is the smallest id) loses its node.
	victim := podOf(2)
	nodeName := victim.Spec.NodeName
	restore := keepNode(ctx, t, nodeName)
	lostDisks := map[string]bool{}
	pvs, err := env.client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{LabelSelector: "veltrix.io/cluster=" + name + ",veltrix.io/volume=data"})
	if err != nil {
		t.Fatal(err)
	}
	for _, pv := range pvs.Items {
		if pv.Labels["veltrix.io/node"] == nodeName {
			lostDisks[pv.Annotations["veltrix.io/filesystem-uuid"]] = true
		}
	}
	if len(lostDisks) != 1 {
		t.Fatalf("volumes of %s on node %s: %v, want one", name, nodeName, lostDisks)
	}
	began := time.Now()
	if err := env.client.CoreV1().Nodes().Delete(ctx, nodeName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Logf("deleted node %s of member %s", nodeName, victim.Name)
	var replacing string
	err = poll(ctx, t, "MemberLost=False Replaced", 6*time.Minute, func(ctx context.Context) (bool, error) {
		c, err := cluster(ctx)
		if err != nil {
			return transient(err)
		}
		lost := meta.FindStatusCondition(c.Status.Conditions, veltrixv1.ConditionMemberLost)
		if lost == nil {
			return false, nil
		}
		if lost.Reason == veltrixv1.ReasonReplacing {
			replacing = lost.Message
		}
		return lost.Status == metav1.ConditionFalse && lost.Reason == veltrixv1.ReasonReplaced, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	waitReady("VeltrixCluster lost Ready again")
	t.Logf("member replaced and the cluster Ready %s after its node was deleted", since(began))
	if want := "replacing member " + victim.Name + " of lost node " + nodeName + " (Deleted)"; !strings.HasPrefix(replacing, want) {
		t.Errorf("MemberLost while replacing %q, want it to start with %q", replacing, want)
	}
	now := podOf(2)
	if now.UID == victim.UID || now.Spec.NodeName == nodeName || now.Spec.NodeName == "" {
		t.Errorf("member 2 is pod %s on node %q, want a new pod on another node than %s", now.UID, now.Spec.NodeName, nodeName)
	}
	c, err := cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if l := c.Status.LostNodes; len(l) != 1 || l[0].Node != nodeName || l[0].Member != victim.Name || l[0].Replacement != veltrixv1.ReplacementReplaced || !lostDisks[strings.Join(l[0].Disks, ",")] {
		t.Errorf("status.lostNodes %+v, want %s with member %s, its disk, Replaced", l, nodeName, victim.Name)
	}
	if slices.Contains(c.Status.Nodes, nodeName) {
		t.Errorf("status.nodes %v names the lost node", c.Status.Nodes)
	}
	if f := c.Status.LastFailoverTime; f == nil || f.Time.Before(began.Truncate(time.Second)) {
		t.Errorf("status.lastFailoverTime %v, want the force removal's time, after the node's deletion at %s", f, began.UTC().Format(time.RFC3339))
	} else {
		t.Logf("status.lastFailoverTime %s: %s after the node's deletion (to the second)", f.UTC().Format(time.RFC3339), f.Sub(began.Truncate(time.Second)))
	}
	for _, o := range []int{2, 1} {
		s := vxSession(t, net.JoinHostPort(podOf(o).Status.PodIP, "9000"))
		lost := 0
		for k, v := range keys {
			if got := s.do(t, "GET "+k); got != v {
				lost++
			}
		}
		s.close()
		t.Logf("keys lost across the node's deletion (read through %s-%d): %d of %d", name, o, lost, len(keys))
		if lost > 0 {
			t.Errorf("%d of %d keys lost (read through %s-%d)", lost, len(keys), name, o)
		}
	}

	// The node comes back with its disk: reported, never made into a volume by itself.
	if err := restore(ctx); err != nil {
		t.Fatal(err)
	}
	err = poll(ctx, t, "DisksReturned=True naming the node's disk", 4*time.Minute, func(ctx context.Context) (bool, error) {
		c, err := cluster(ctx)
		if err != nil {
			return transient(err)
		}
		back := meta.FindStatusCondition(c.Status.Conditions, veltrixv1.ConditionDisksReturned)
		if back == nil || back.Status != metav1.ConditionTrue {
			return false, nil
		}
		for d := range lostDisks {
			if !strings.Contains(back.Message, d) {
				return false, fmt.Errorf("DisksReturned %q does not name disk %s", back.Message, d)
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	pvs, err = env.client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{LabelSelector: "veltrix.io/cluster=" + name + ",veltrix.io/node=" + nodeName})
	if err != nil {
		t.Fatal(err)
	}
	for _, pv := range pvs.Items {
		if pv.DeletionTimestamp == nil {
			t.Errorf("volume %s on the returned node exists without the node being offered again", pv.Name)
		}
	}
	if out, err := kubectl(ctx, "annotate", "vc", name, "-n", vxNamespace, veltrixv1.AnnotationReofferNode+"="+nodeName); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	err = poll(ctx, t, "the node re-offered", 2*time.Minute, func(ctx context.Context) (bool, error) {
		c, err := cluster(ctx)
		if err != nil {
			return transient(err)
		}
		_, annotated := c.Annotations[veltrixv1.AnnotationReofferNode]
		back := meta.FindStatusCondition(c.Status.Conditions, veltrixv1.ConditionDisksReturned)
		return len(c.Status.LostNodes) == 0 && !annotated && back != nil && back.Status == metav1.ConditionFalse && slices.Contains(c.Status.Nodes, nodeName), nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// Re-offered, its disk is the cluster's again: reclaim policy Delete releases it too, so
	// the node's loop device is blank for the scenarios after this one.
	if out, err := kubectl(ctx, "delete", "vc", name, "-n", vxNamespace, "--wait=true", "--timeout=3m"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	ev, err := kubectl(ctx, "get", "events", "-n", vxNamespace, "--field-selector", "involvedObject.name="+name,
		"-o", `jsonpath={range .items[*]}{.reason}: {.message}{"\n"}{end}`)
	if err != nil {
		t.Fatal(err)
	}
	released := false
	for _, line := range strings.Split(ev, "\n") {
		released = released || strings.HasPrefix(line, "DisksReleased: ") && strings.Contains(line, nodeName)
	}
	if !released {
		t.Errorf("no DisksReleased event naming %s:\n%s", nodeName, ev)
	}
}
