package controller_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/services/memgraph-operator/internal/controller"
	"github.com/opsuite/suite/services/memgraph-operator/internal/memgraph"
	"github.com/opsuite/suite/services/memgraph-operator/internal/memgraph/memgraphtest"
	"github.com/opsuite/suite/services/memgraph-operator/internal/resources"
	"github.com/opsuite/suite/shared/lostnodes"
	"github.com/opsuite/suite/shared/testenv"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestLostNode (issue 24, item 1): a 3+2 cluster on local volumes pinned to nodes, its
// pods played by simulator processes. The test plays what Kubernetes does around the
// operator (kubeSim): the StatefulSet controller, the scheduler binding new claims to a
// spare node's volumes, the kubelets starting a pod's process on its node, the pod and
// claim garbage collection. The operator runs with the real Bolt registrar.
//
//  1. The MAIN's node is deleted (its process dies with it; spec.lostNodes Automatic):
//     the coordinators fail over, the operator unregisters the old MAIN, deletes its
//     claims and pod, the new pod lands on a spare node with empty volumes, and the
//     registration adds it again as a replica, which receives every node written.
//  2. With Manual, the Raft leader's node goes NotReady: MemberLost says NodeNotReady,
//     then ReplacementManual, and nothing leaves the membership until the annotation
//     memgraph.com/replace-member names the pod; then REMOVE COORDINATOR, the claims and
//     pod go, the fresh coordinator is added back, the annotation is removed.
//  3. Both nodes come back: the entries go, MemberLost False NoMemberLost.
//
// Throughout, the simulators' invariant log never shows two writable MAINs, and the
// Raft membership ends with 3 coordinators.
func TestLostNode(t *testing.T) {
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	const name = "lost"
	cl := memgraphtest.NewCluster(t)
	book := &addressBook{}
	opts := memgraph.Options{Resolve: book.resolve, Timeout: 10 * time.Second}
	h := start(t, "mg-lost", func(cfg *controller.Config) {
		cfg.Registrar = controller.BoltRegistrar{Options: opts}
	})
	plane := mapSimMembers(t, cl, book, opts, h.ns, name, 3, 2)
	k := newKubeSim(t, h, cl, name, 7)
	for id := 1; id <= 3; id++ {
		cl.StartCoordinator(id)
	}
	data := dataNames(name, 2)
	for _, d := range data {
		cl.StartData(d)
	}
	c := &memgraphv1.MemgraphCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: h.ns},
		Spec: memgraphv1.MemgraphClusterSpec{Coordinators: 3, DataInstances: 2, Secrets: memgraphv1.SecretsSpec{Name: "memgraph-license"},
			LostNodes: &memgraphv1.LostNodesSpec{GracePeriod: &metav1.Duration{Duration: 4 * time.Second}}},
	}
	if err := h.c.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	// The first five nodes hold a member each; n6 and n7 are spare.
	k.place(map[string]int{"lost-coordinator-1": 1, "lost-coordinator-2": 2, "lost-coordinator-3": 3, "lost-data-0": 4, "lost-data-1": 5})
	c = k.until("converged", func(c *memgraphv1.MemgraphCluster) bool { return converged(c, 3, 2) })
	main := plane.assertMembers(ctx, c.Status.Leader, coordinatorNames(3), data)
	if cond := meta.FindStatusCondition(c.Status.Conditions, memgraphv1.ConditionMemberLost); cond != nil {
		t.Errorf("MemberLost %+v on a cluster that lost nothing", cond)
	}
	const nodes = 12
	for i := range nodes {
		plane.exec(ctx, main, fmt.Sprintf("CREATE (:T {i: %d})", i))
	}
	t.Logf("converged after %v: leader %s, MAIN %s", time.Since(began).Round(time.Second), c.Status.Leader, main)

	// 1. The MAIN's node deleted.
	mainPod := strings.ReplaceAll(main, "_", "-")
	lostNode := k.nodeOf(mainPod)
	deleted := time.Now()
	k.deleteNode(lostNode)
	var sawReplacing bool
	c = k.until("the old MAIN replaced and registered again", func(c *memgraphv1.MemgraphCluster) bool {
		if cond := meta.FindStatusCondition(c.Status.Conditions, memgraphv1.ConditionMemberLost); cond != nil && cond.Reason == memgraphv1.ReasonReplacing {
			sawReplacing = true
		}
		cond := meta.FindStatusCondition(c.Status.Conditions, memgraphv1.ConditionMemberLost)
		return converged(c, 3, 2) && cond != nil && cond.Reason == memgraphv1.ReasonReplaced && cond.ObservedGeneration == c.Generation
	})
	t.Logf("the MAIN's node %s deleted: Ready and Converged again %.1fs after, %s on node %s", lostNode, time.Since(deleted).Seconds(), mainPod, k.nodeOf(mainPod))
	if !sawReplacing {
		t.Errorf("MemberLost never said %s", memgraphv1.ReasonReplacing)
	}
	if c.Status.Main == main || c.Status.LastFailoverTime == nil {
		t.Errorf("status.main %q (was %q), lastFailoverTime %v: want the coordinators' failover", c.Status.Main, main, c.Status.LastFailoverTime)
	}
	if l := c.Status.LostNodes; len(l) != 1 || l[0].Member != mainPod || l[0].Node != lostNode || l[0].Reason != memgraphv1.LostNodeDeleted || l[0].Replacement != memgraphv1.ReplacementReplaced {
		t.Errorf("status.lostNodes %+v, want %s on %s Deleted Replaced", l, mainPod, lostNode)
	}
	if n := k.nodeOf(mainPod); n == lostNode || n == "" {
		t.Errorf("%s on node %q after its node %s was deleted", mainPod, n, lostNode)
	}
	plane.assertMembers(ctx, c.Status.Leader, coordinatorNames(3), data)
	testenv.Eventually(t, simTimeout, main+" holds every node again", func() (bool, string) {
		n := plane.count(ctx, main)
		return n == nodes, fmt.Sprint(n)
	})
	k.wantEvent(memgraphv1.ReasonReplacing, "UnregisterInstance "+main)

	// 2. Manual: the leader's node NotReady.
	patch := client.MergeFrom(c.DeepCopy())
	c.Spec.LostNodes.Replace = memgraphv1.LostNodeReplaceManual
	if err := h.c.Patch(ctx, c, patch); err != nil {
		t.Fatal(err)
	}
	leader := c.Status.Leader
	id, _ := memgraph.CoordinatorID(leader)
	coordPod := resources.PodName(name, resources.RoleCoordinator, int32(id))
	downNode := k.nodeOf(coordPod)
	k.nodeNotReady(downNode)
	notReady := time.Now()
	k.until("MemberLost NodeNotReady", func(c *memgraphv1.MemgraphCluster) bool {
		cond := meta.FindStatusCondition(c.Status.Conditions, memgraphv1.ConditionMemberLost)
		return cond != nil && cond.Reason == memgraphv1.ReasonNodeNotReady && c.Status.State == memgraphv1.StateDegraded
	})
	k.until("MemberLost ReplacementManual", func(c *memgraphv1.MemgraphCluster) bool {
		cond := meta.FindStatusCondition(c.Status.Conditions, memgraphv1.ConditionMemberLost)
		return cond != nil && cond.Reason == memgraphv1.ReasonReplacementManual && strings.Contains(cond.Message, memgraphv1.AnnotationReplaceMember+"="+coordPod)
	})
	// The Ready condition's transition time is kept to the second.
	if grace := time.Since(notReady); grace < 3*time.Second {
		t.Errorf("ReplacementManual %.1fs after the node went NotReady, before its grace period (4s)", grace.Seconds())
	}
	newLeader, rows := leaderView(ctx, plane)
	if coords, _, _ := membership(rows); !slices.Contains(coords, leader) {
		t.Fatalf("%s left the membership without the annotation (leader %s: %v)", leader, newLeader, coords)
	}
	annotate := client.MergeFrom(c.DeepCopy())
	c.Annotations = map[string]string{memgraphv1.AnnotationReplaceMember: coordPod}
	if err := h.c.Patch(ctx, c, annotate); err != nil {
		t.Fatal(err)
	}
	approved := time.Now()
	c = k.until("the old leader replaced and added again", func(c *memgraphv1.MemgraphCluster) bool {
		cond := meta.FindStatusCondition(c.Status.Conditions, memgraphv1.ConditionMemberLost)
		return converged(c, 3, 2) && cond != nil && cond.Reason == memgraphv1.ReasonReplaced && k.nodeOf(coordPod) != downNode
	})
	t.Logf("leader %s's node %s NotReady, replaced %.1fs after the annotation; leader now %s", leader, downNode, time.Since(approved).Seconds(), c.Status.Leader)
	if _, ok := c.Annotations[memgraphv1.AnnotationReplaceMember]; ok {
		t.Errorf("the annotation %s is still there", memgraphv1.AnnotationReplaceMember)
	}
	main = plane.assertMembers(ctx, c.Status.Leader, coordinatorNames(3), data)
	k.wantEvent(memgraphv1.ReasonReplacing, "RemoveCoordinator "+leader)

	// 3. Both nodes back: nothing lost any more.
	k.restoreNodes()
	k.until("MemberLost NoMemberLost", func(c *memgraphv1.MemgraphCluster) bool {
		cond := meta.FindStatusCondition(c.Status.Conditions, memgraphv1.ConditionMemberLost)
		return converged(c, 3, 2) && cond != nil && cond.Reason == memgraphv1.ReasonNoMemberLost && cond.Status == metav1.ConditionFalse &&
			len(c.Status.LostNodes) == 0 && c.Status.State == memgraphv1.StateReady
	})
	for _, d := range data {
		if n := plane.count(ctx, d); n != nodes {
			t.Errorf("%s holds %d nodes at the end, want %d", d, n, nodes)
		}
	}
	if main == "" {
		t.Error("no MAIN at the end")
	}
	most, _ := memgraphtest.WritableMains(cl.Events())
	if most != 1 {
		t.Errorf("the invariant log shows at most %d writable MAINs at once, want exactly 1", most)
	}
	t.Logf("done after %v", time.Since(began).Round(time.Second))
}

func converged(c *memgraphv1.MemgraphCluster, coordinators, data int32) bool {
	ok := func(t string) bool {
		got := meta.FindStatusCondition(c.Status.Conditions, t)
		return got != nil && got.Status == metav1.ConditionTrue && got.ObservedGeneration == c.Generation
	}
	return ok(memgraphv1.ConditionReady) && ok(memgraphv1.ConditionConverged) && c.Status.Coordinators == coordinators && c.Status.DataInstances == data
}

// kubeSim plays, one step at a time on the test's goroutine, what Kubernetes does around
// the operator for one cluster: nodes with two local volumes each (lib and log), the
// StatefulSet controller (a missing pod is made again on its claims' node, pending when
// that node is lost; missing claims are made and bound to a spare node's free volumes,
// as the scheduler does with WaitForFirstConsumer), the kubelet (a pod's process runs
// while its node is Ready, with empty volumes on new claims), the pvc-protection
// controller and the StatefulSets' status.
type kubeSim struct {
	t     *testing.T
	h     *harness
	cl    *memgraphtest.Cluster
	name  string
	nodes []string
	// saved are the nodes deleted or made NotReady, as they were.
	saved map[string]*corev1.Node
	// fresh are the pods whose next start is on new, empty volumes.
	fresh map[string]bool
}

func newKubeSim(t *testing.T, h *harness, cl *memgraphtest.Cluster, name string, n int) *kubeSim {
	t.Helper()
	k := &kubeSim{t: t, h: h, cl: cl, name: name, saved: map[string]*corev1.Node{}, fresh: map[string]bool{}}
	ctx := context.Background()
	for i := 1; i <= n; i++ {
		node := fmt.Sprintf("%s-n%d", h.ns, i)
		k.nodes = append(k.nodes, node)
		k.createNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, Labels: map[string]string{lostnodes.HostnameLabel: node}}})
		for _, v := range []string{resources.VolumeLib, resources.VolumeLog} {
			pv := &corev1.PersistentVolume{
				ObjectMeta: metav1.ObjectMeta{Name: node + "-" + v, Labels: map[string]string{"test": h.ns}},
				Spec: corev1.PersistentVolumeSpec{
					Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")},
					AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
					PersistentVolumeSource:        corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: "/mnt/" + v}},
					NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
						MatchExpressions: []corev1.NodeSelectorRequirement{{Key: lostnodes.HostnameLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
					}}}},
				},
			}
			if err := h.c.Create(ctx, pv); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_ = h.c.DeleteAllOf(ctx, &corev1.PersistentVolume{}, client.MatchingLabels{"test": h.ns})
		for _, n := range k.nodes {
			_ = h.c.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}})
		}
	})
	return k
}

func (k *kubeSim) createNode(n *corev1.Node) {
	k.t.Helper()
	ctx := context.Background()
	n = n.DeepCopy()
	n.ResourceVersion, n.UID = "", ""
	if err := k.h.c.Create(ctx, n); err != nil {
		k.t.Fatal(err)
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
	if err := k.h.c.Status().Update(ctx, n); err != nil {
		k.t.Fatal(err)
	}
}

// place binds each pod's claims to the volumes of node n<i>: the first scheduling.
func (k *kubeSim) place(at map[string]int) {
	k.t.Helper()
	for pod, i := range at {
		k.bind(pod, k.nodes[i-1])
	}
}

// bind creates pod's claims bound to node's volumes (its lib and log); false when a claim
// of that name is still there.
func (k *kubeSim) bind(pod, node string) bool {
	k.t.Helper()
	ctx := context.Background()
	role := resources.RoleData
	if strings.Contains(pod, "-coordinator-") {
		role = resources.RoleCoordinator
	}
	for _, v := range []string{resources.VolumeLib, resources.VolumeLog} {
		pvc := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: v + "-" + pod, Namespace: k.h.ns, Labels: resources.Selector(k.name, role)},
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				VolumeName: node + "-" + v, Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
		}
		if err := k.h.c.Create(ctx, pvc); apierrors.IsAlreadyExists(err) {
			return false
		} else if err != nil {
			k.t.Fatal(err)
		}
		pvc.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}
		if err := k.h.c.Status().Update(ctx, pvc); err != nil {
			k.t.Fatal(err)
		}
		pv := &corev1.PersistentVolume{}
		if err := k.h.c.Get(ctx, client.ObjectKey{Name: node + "-" + v}, pv); err != nil {
			k.t.Fatal(err)
		}
		pv.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: k.h.ns, Name: pvc.Name, UID: pvc.UID}
		if err := k.h.c.Update(ctx, pv); err != nil {
			k.t.Fatal(err)
		}
	}
	return true
}

// nodeOf is the node pod runs on ("" when it does not exist or is pending).
func (k *kubeSim) nodeOf(pod string) string {
	p := &corev1.Pod{}
	if err := k.h.c.Get(context.Background(), client.ObjectKey{Namespace: k.h.ns, Name: pod}, p); err != nil {
		return ""
	}
	return p.Spec.NodeName
}

// deleteNode deletes node: its pods' processes die, and its pods are deleted.
func (k *kubeSim) deleteNode(node string) {
	k.t.Helper()
	ctx := context.Background()
	n := &corev1.Node{}
	if err := k.h.c.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
		k.t.Fatal(err)
	}
	k.saved[node] = n.DeepCopy()
	if err := k.h.c.Delete(ctx, n); err != nil {
		k.t.Fatal(err)
	}
	for _, p := range k.pods() {
		if p.Spec.NodeName == node {
			k.cl.Kill(k.process(p.Name))
			if err := k.h.c.Delete(ctx, &p, client.GracePeriodSeconds(0)); client.IgnoreNotFound(err) != nil {
				k.t.Fatal(err)
			}
		}
	}
}

// nodeNotReady makes node NotReady: its pods' processes die (the machine is down), the
// pods stay.
func (k *kubeSim) nodeNotReady(node string) {
	k.t.Helper()
	ctx := context.Background()
	n := &corev1.Node{}
	if err := k.h.c.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
		k.t.Fatal(err)
	}
	k.saved[node] = n.DeepCopy()
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, LastTransitionTime: metav1.Now()}}
	if err := k.h.c.Status().Update(ctx, n); err != nil {
		k.t.Fatal(err)
	}
	for _, p := range k.pods() {
		if p.Spec.NodeName == node {
			k.cl.Kill(k.process(p.Name))
		}
	}
}

// restoreNodes brings back every node deleted or made NotReady, Ready.
func (k *kubeSim) restoreNodes() {
	k.t.Helper()
	ctx := context.Background()
	for name, saved := range k.saved {
		n := &corev1.Node{}
		switch err := k.h.c.Get(ctx, client.ObjectKey{Name: name}, n); {
		case apierrors.IsNotFound(err):
			k.createNode(saved)
		case err != nil:
			k.t.Fatal(err)
		default:
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
			if err := k.h.c.Status().Update(ctx, n); err != nil {
				k.t.Fatal(err)
			}
		}
		delete(k.saved, name)
	}
}

func (k *kubeSim) process(pod string) *memgraphtest.Process {
	if rest, ok := strings.CutPrefix(pod, k.name+"-coordinator-"); ok {
		var id int
		_, _ = fmt.Sscan(rest, &id)
		return k.cl.Coordinators[id]
	}
	return k.cl.Data[strings.ReplaceAll(pod, "-", "_")]
}

func (k *kubeSim) pods() []corev1.Pod {
	k.t.Helper()
	var list corev1.PodList
	if err := k.h.c.List(context.Background(), &list, client.InNamespace(k.h.ns), client.MatchingLabels(resources.ClusterLabels(k.name))); err != nil {
		k.t.Fatal(err)
	}
	return list.Items
}

// ready says whether node exists and is Ready.
func (k *kubeSim) ready(node string) bool {
	n := &corev1.Node{}
	if err := k.h.c.Get(context.Background(), client.ObjectKey{Name: node}, n); err != nil {
		return false
	}
	return lostnodes.Observe([]corev1.Node{*n}).Of(node).Health == lostnodes.Ready
}

// step runs every controller once; conflicts are left to the next step.
func (k *kubeSim) step() {
	k.t.Helper()
	ctx := context.Background()
	pods := map[string]*corev1.Pod{}
	for _, p := range k.pods() {
		pods[p.Name] = &p
	}
	var claims corev1.PersistentVolumeClaimList
	if err := k.h.c.List(ctx, &claims, client.InNamespace(k.h.ns)); err != nil {
		k.t.Fatal(err)
	}
	byPod := map[string][]corev1.PersistentVolumeClaim{}
	for _, pvc := range claims.Items {
		_, pod, _ := strings.Cut(pvc.Name, "-")
		if !pvc.DeletionTimestamp.IsZero() && pods[pod] == nil && len(pvc.Finalizers) > 0 {
			// pvc-protection: no pod uses it any more.
			pvc.Finalizers = nil
			_ = k.h.c.Update(ctx, &pvc)
			continue
		}
		byPod[pod] = append(byPod[pod], pvc)
	}
	for _, r := range []resources.Role{resources.RoleCoordinator, resources.RoleData} {
		sts := &appsv1.StatefulSet{}
		if err := k.h.c.Get(ctx, client.ObjectKey{Namespace: k.h.ns, Name: resources.StatefulSetName(k.name, r)}, sts); err != nil {
			continue
		}
		first := int32(0)
		if r == resources.RoleCoordinator {
			first = resources.FirstCoordinatorOrdinal
		}
		var have, ready int32
		for o := first; o < first+*sts.Spec.Replicas; o++ {
			name := resources.PodName(k.name, r, o)
			p := pods[name]
			if p == nil {
				p = k.makePod(sts, r, o, byPod[name])
			}
			if p == nil {
				continue
			}
			have++
			if k.run(p, r) {
				ready++
			}
		}
		st := appsv1.StatefulSetStatus{ObservedGeneration: sts.Generation, Replicas: have, ReadyReplicas: ready, AvailableReplicas: ready,
			CurrentReplicas: have, UpdatedReplicas: have, CurrentRevision: "r1", UpdateRevision: "r1"}
		if old := sts.Status; old.ObservedGeneration != st.ObservedGeneration || old.Replicas != st.Replicas || old.ReadyReplicas != st.ReadyReplicas ||
			old.UpdateRevision != st.UpdateRevision || old.UpdatedReplicas != st.UpdatedReplicas {
			sts.Status = st
			_ = k.h.c.Status().Update(ctx, sts)
		}
	}
}

// makePod is the StatefulSet controller and the scheduler for a missing pod: nothing
// while a claim is being deleted; on its claims' node (pending when that node is lost);
// with no claims, new ones on the first spare node whose volumes are free.
func (k *kubeSim) makePod(sts *appsv1.StatefulSet, r resources.Role, ordinal int32, claims []corev1.PersistentVolumeClaim) *corev1.Pod {
	ctx := context.Background()
	name := resources.PodName(k.name, r, ordinal)
	node := ""
	for _, pvc := range claims {
		if !pvc.DeletionTimestamp.IsZero() {
			return nil
		}
		node = strings.TrimSuffix(pvc.Spec.VolumeName, "-"+strings.SplitN(pvc.Name, "-", 2)[0])
	}
	if len(claims) == 0 {
		for _, n := range k.nodes {
			pv := &corev1.PersistentVolume{}
			if k.ready(n) && k.h.c.Get(ctx, client.ObjectKey{Name: n + "-" + resources.VolumeLib}, pv) == nil && pv.Spec.ClaimRef == nil {
				node = n
				break
			}
		}
		if node == "" {
			k.t.Fatalf("no spare node for %s", name)
		}
		if !k.bind(name, node) {
			return nil
		}
		k.fresh[name] = true
	}
	if !k.ready(node) {
		node = "" // the scheduler finds no node for a volume pinned to a lost one
	}
	labels := resources.Selector(k.name, r)
	labels[resources.LabelPodIndex] = fmt.Sprint(ordinal)
	labels[appsv1.ControllerRevisionHashLabelKey] = "r1"
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: k.h.ns, Labels: labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: sts.Name, UID: sts.UID, Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "memgraph", Image: "memgraph/memgraph:3.12.0"}}},
	}
	if r == resources.RoleData {
		p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: memgraphv1.RoleAssignedGate}}
	}
	for _, v := range []string{resources.VolumeLib, resources.VolumeLog} {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: v, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: v + "-" + name}}})
	}
	if err := k.h.c.Create(ctx, p); err != nil {
		return nil
	}
	if node == "" {
		p.Status.Phase = corev1.PodPending
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
			Message: "0/7 nodes are available: 1 node(s) had volume node affinity conflict"}}
		_ = k.h.c.Status().Update(ctx, p)
	}
	return p
}

// run is the kubelet for p: its process runs while p is on a Ready node (on empty volumes
// after new claims); it reports the pod's conditions and says whether the pod is Ready.
func (k *kubeSim) run(p *corev1.Pod, r resources.Role) bool {
	ctx := context.Background()
	proc := k.process(p.Name)
	running := false
	if p.Spec.NodeName != "" && k.ready(p.Spec.NodeName) && p.DeletionTimestamp.IsZero() {
		if !proc.Running() {
			if k.fresh[p.Name] {
				if err := os.RemoveAll(proc.DataDir); err != nil {
					k.t.Fatal(err)
				}
				delete(k.fresh, p.Name)
			}
			k.cl.Restart(proc)
		}
		running = true
	}
	cond := func(t corev1.PodConditionType) corev1.ConditionStatus {
		for _, c := range p.Status.Conditions {
			if c.Type == t {
				return c.Status
			}
		}
		return ""
	}
	status := func(b bool) corev1.ConditionStatus {
		if b {
			return corev1.ConditionTrue
		}
		return corev1.ConditionFalse
	}
	ready := running && (r == resources.RoleCoordinator || cond(memgraphv1.RoleAssignedGate) == corev1.ConditionTrue)
	if cond(corev1.ContainersReady) != status(running) || cond(corev1.PodReady) != status(ready) {
		conds := slices.DeleteFunc(slices.Clone(p.Status.Conditions), func(c corev1.PodCondition) bool {
			return c.Type == corev1.ContainersReady || c.Type == corev1.PodReady
		})
		p.Status.Conditions = append(conds, corev1.PodCondition{Type: corev1.ContainersReady, Status: status(running)},
			corev1.PodCondition{Type: corev1.PodReady, Status: status(ready)})
		p.Status.Phase = corev1.PodPending
		if running {
			p.Status.Phase = corev1.PodRunning
		}
		_ = k.h.c.Status().Update(ctx, p)
	}
	return ready
}

// until steps the simulated Kubernetes until the cluster satisfies ok, and returns it.
func (k *kubeSim) until(what string, ok func(*memgraphv1.MemgraphCluster) bool) *memgraphv1.MemgraphCluster {
	k.t.Helper()
	var c *memgraphv1.MemgraphCluster
	testenv.Eventually(k.t, simTimeout, what, func() (bool, string) {
		k.step()
		c = &memgraphv1.MemgraphCluster{}
		if err := k.h.c.Get(context.Background(), types.NamespacedName{Namespace: k.h.ns, Name: k.name}, c); err != nil {
			return false, err.Error()
		}
		var conds []string
		for _, cond := range c.Status.Conditions {
			conds = append(conds, fmt.Sprintf("%s=%s %s: %s", cond.Type, cond.Status, cond.Reason, cond.Message))
		}
		return ok(c), fmt.Sprintf("state %s main %q leader %q lostNodes %+v\n%s", c.Status.State, c.Status.Main, c.Status.Leader,
			c.Status.LostNodes, strings.Join(conds, "\n"))
	})
	return c
}

// wantEvent checks that the cluster has a Warning event of reason whose note holds part.
func (k *kubeSim) wantEvent(reason, part string) {
	k.t.Helper()
	var notes []string
	for _, e := range k.h.events(k.name) {
		if e.Reason == reason && e.Type == corev1.EventTypeWarning {
			notes = append(notes, e.Note)
			if strings.Contains(e.Note, part) {
				return
			}
		}
	}
	k.t.Errorf("no Warning event %s mentioning %q; %s events: %q", reason, part, reason, notes)
}
