package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
)

// The lost-node scenario's cluster and the class of its local volumes.
const (
	vklNamespace = "e2e-valkey-lostnode"
	vklName      = "vkl"
	vklClass     = "e2e-valkey-local"
)

// TestValkeyLostNode (issue 24, item 1): a 3x1 cluster with persistence on local volumes
// (each pinned to one node, bound when the pod is scheduled) takes a writer; the node of
// a primary is deleted. Its pods stop with it, and their claims pin their next pods to a
// node that no longer exists. The operator promotes the primary's replica, deletes the
// lost members' claims (spec.lostNodes is Automatic by default), the node controller makes
// new ones, which bind volumes on other nodes, and the members rejoin as replicas: the
// cluster is Ready again and every acknowledged write reads back. The node is restored at
// the end, for the scenarios after this one.
func TestValkeyLostNode(t *testing.T) {
	needRunner(t, "the writer and the cli reach the Valkey pods at their addresses; a deleted node takes its pods' processes")
	needInstalled(t, "valkey-operator")
	needCLI(t)
	ctx := scenarioContext(t)
	s := &vkScenario{t: t, begin: time.Now(), ns: vklNamespace, name: vklName, user: vkUser, password: vkPassword}
	writerBin := make(chan string, 1)
	go func() { writerBin <- s.buildWriter() }()
	t.Cleanup(func() {
		_ = env.client.CoreV1().Namespaces().Delete(context.Background(), s.ns, metav1.DeleteOptions{})
	})
	if err := vklVolumes(ctx, t); err != nil {
		t.Fatal(err)
	}
	manifest := vkManifest(vklNamespace, vklName)
	const at = "  replicas: 1\n"
	if !strings.Contains(manifest, at) {
		t.Fatalf("the scenario's manifest no longer holds %q", at)
	}
	manifest = strings.Replace(manifest, at, at+"  persistence:\n    size: 64Mi\n    storageClassName: "+vklClass+"\n    reclaimPolicy: Delete\n", 1)
	s.step(ctx, "create 3x1 on local volumes", 4*time.Minute, vkWant{3, 1, vkImageOld, ""}, func(ctx context.Context) error {
		return s.apply(ctx, manifest)
	}, valkeyv1.EventClusterReady)

	bin := <-writerBin
	if bin == "" {
		t.FailNow()
	}
	s.writerRate = 50
	s.startWriter(ctx, bin)
	time.Sleep(3 * time.Second)

	victim, err := s.primaryPod(ctx)
	if err != nil {
		t.Fatal(err)
	}
	nodeName := victim.Spec.NodeName
	restore := keepNode(ctx, t, nodeName)
	onNode := map[string]bool{}
	pods, err := env.client.CoreV1().Pods(s.ns).List(ctx, metav1.ListOptions{LabelSelector: "valkey.io/cluster=" + s.name})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName == nodeName {
			onNode[p.Name] = true
		}
	}

	s.allowWarnings = true
	deleted := time.Now()
	s.step(ctx, "delete the node of a primary", 6*time.Minute, vkWant{3, 1, vkImageOld, ""}, func(ctx context.Context) error {
		t.Logf("deleting node %s with pods %v (primary %s)", nodeName, slices.Sorted(maps.Keys(onNode)), victim.Name)
		return env.client.CoreV1().Nodes().Delete(ctx, nodeName, metav1.DeleteOptions{})
	}, valkeyv1.ReasonReplacing, valkeyv1.ReasonNoMemberLost)
	readyAfter := since(deleted)
	time.Sleep(2 * time.Second)
	sum := s.stopWriter()

	// Every member's claim is bound to a volume on a node that exists, the lost members'
	// pods run elsewhere, and the condition says nothing is lost any more.
	c, err := s.cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if l := findCondition(c.Status.Conditions, valkeyv1.ConditionMemberLost); l == nil || l.Status != metav1.ConditionFalse || l.Reason != valkeyv1.ReasonNoMemberLost {
		t.Errorf("MemberLost %+v, want False NoMemberLost", l)
	}
	pods, err = env.client.CoreV1().Pods(s.ns).List(ctx, metav1.ListOptions{LabelSelector: "valkey.io/cluster=" + s.name})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName == nodeName || p.Spec.NodeName == "" {
			t.Errorf("pod %s is on node %q after node %s was deleted", p.Name, p.Spec.NodeName, nodeName)
		}
	}
	pvs, err := env.client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, pv := range pvs.Items {
		if ref := pv.Spec.ClaimRef; ref != nil && ref.Namespace == s.ns && pv.Status.Phase == corev1.VolumeBound && vklNode(&pv) == nodeName {
			t.Errorf("volume %s on the deleted node is still bound to %s", pv.Name, ref.Name)
		}
	}
	t.Logf("node %s deleted (pods %v): Ready again %s after; writer %d acknowledged, %d refused, longest outage %.2fs, %d lost, %d unreadable",
		nodeName, slices.Sorted(maps.Keys(onNode)), readyAfter, sum.Acked, sum.Refused, sum.LongestOutageSeconds, sum.Lost, sum.Unreadable)
	if sum.Acked < 200 {
		t.Errorf("only %d writes acknowledged: the writer hardly ran", sum.Acked)
	}
	if sum.Lost != 0 || sum.Unreadable != 0 {
		t.Errorf("data safety: %d acknowledged keys lost (first: %v), %d unreadable", sum.Lost, sum.LostKeys, sum.Unreadable)
	}
	if err := restore(ctx); err != nil {
		t.Errorf("restoring node %s: %v", nodeName, err)
	}
}

// vklVolumes creates the scenario's class (no provisioner, binding when a pod is
// scheduled) and two local volumes on each node, removed when the test ends.
func vklVolumes(ctx context.Context, t *testing.T) error {
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: vklClass}, Provisioner: "kubernetes.io/no-provisioner",
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer), ReclaimPolicy: ptr.To(corev1.PersistentVolumeReclaimRetain)}
	if _, err := env.client.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_ = env.client.CoreV1().PersistentVolumes().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "e2e.opsuite.io/class=" + vklClass})
		_ = env.client.StorageV1().StorageClasses().Delete(ctx, vklClass, metav1.DeleteOptions{})
	})
	nodes, err := env.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, n := range nodes.Items {
		for i := range 2 {
			pv := &corev1.PersistentVolume{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%s-%d", vklClass, n.Name, i), Labels: map[string]string{"e2e.opsuite.io/class": vklClass}},
				Spec: corev1.PersistentVolumeSpec{
					Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
					AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
					StorageClassName:              vklClass,
					PersistentVolumeSource:        corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: fmt.Sprintf("/mnt/%s/%d", vklClass, i)}},
					NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
						MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{n.Name}}},
					}}}},
				},
			}
			if _, err := env.client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return err
			}
		}
	}
	return nil
}

// vklNode is the node a scenario volume is pinned to.
func vklNode(pv *corev1.PersistentVolume) string {
	if a := pv.Spec.NodeAffinity; a != nil && a.Required != nil && len(a.Required.NodeSelectorTerms) == 1 {
		for _, e := range a.Required.NodeSelectorTerms[0].MatchExpressions {
			if e.Key == "kubernetes.io/hostname" && len(e.Values) == 1 {
				return e.Values[0]
			}
		}
	}
	return ""
}
