package controller_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	veltrixv1 "github.com/opsuite/suite/api/veltrix/v1alpha1"
	"github.com/opsuite/suite/services/veltrix-operator/internal/controller"
	"github.com/opsuite/suite/services/veltrix-operator/internal/resources"
	"github.com/opsuite/suite/services/veltrix-operator/internal/veltrix"
	"github.com/opsuite/suite/services/veltrix-operator/internal/veltrixtest"
	"github.com/opsuite/suite/shared/testenv"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// lostRig is a three-member cluster on nodes <prefix>-a..c with a spare prepared-able node
// <prefix>-d: real agents, simulator processes for the members, and claims bound by hand
// (no StatefulSet or volume controller runs here).
type lostRig struct {
	t     *testing.T
	sims  *veltrixtest.Cluster
	f     *fleet
	c     *veltrixv1.VeltrixCluster
	nodes []string
}

func newLostRig(t *testing.T, prefix string, mut func(*veltrixv1.VeltrixCluster)) *lostRig {
	t.Helper()
	ctx := context.Background()
	r := &lostRig{t: t, nodes: []string{prefix + "-a", prefix + "-b", prefix + "-c", prefix + "-d"}}
	r.sims = veltrixtest.StartCluster(t, 3, veltrixtest.Options{Name: "vx", ReplicationFactor: 2, MoveRate: 5000, IndexRebuild: time.Second})
	r.f = startFleet(t, operatorTokens(t, prefix, true), 1<<30, r.nodes, nil)
	for _, n := range r.nodes {
		var node corev1.Node
		if err := env.Client.Get(ctx, client.ObjectKey{Name: n}, &node); err != nil {
			t.Fatal(err)
		}
		node.Labels["lost-test"] = prefix
		if err := env.Client.Update(ctx, &node); err != nil {
			t.Fatal(err)
		}
	}
	ns := testenv.NewNamespace(t, env.Client, "vx")
	addr := simAddrs(r.sims)
	startController(t, r.f, ns, func(cfg *controller.Config, _ ctrl.Manager) {
		cfg.AdminAddr, cfg.TextAddr = addr(false), addr(true)
		cfg.Admin = func(string) veltrix.Admin { return r.sims.Client() }
		cfg.Resync = time.Second // a deleted node brings no event here
		cfg.MemberAddr = func(_ *veltrixv1.VeltrixCluster, pod string) string {
			var o int32
			if _, err := fmt.Sscanf(pod, "vx-%d", &o); err != nil {
				return ""
			}
			return r.sims.MemberAddr(o)
		}
	})
	r.c = newCluster(t, ns, func(c *veltrixv1.VeltrixCluster) {
		c.Spec.Size, c.Spec.ReplicationFactor = 3, 2
		c.Spec.DiskSelector.NVMeOnly = ptr.To(false)
		c.Spec.IndexMapFallback = true
		c.Spec.NodeSelector = map[string]string{"lost-test": prefix}
		mut(c)
	})
	for o := range int32(3) {
		r.bind(o, r.nodes[o])
		memberPod(t, r.c, o)
	}
	condition(t, r.c, veltrixv1.ConditionReady, metav1.ConditionTrue, veltrixv1.ReasonReady)
	condition(t, r.c, veltrixv1.ConditionMemberLost, metav1.ConditionFalse, veltrixv1.ReasonNoMemberLost)
	return r
}

// volumeOn waits for the cluster's data volume on node and returns it.
func (r *lostRig) volumeOn(node string) corev1.PersistentVolume {
	r.t.Helper()
	var out corev1.PersistentVolume
	testenv.Eventually(r.t, 60*time.Second, "a data volume on "+node, func() (bool, string) {
		vols := r.volumes(node)
		if len(vols) == 0 {
			return false, "none"
		}
		out = vols[0]
		return true, ""
	})
	return out
}

// volumes are the cluster's data volumes on node that are not being deleted.
func (r *lostRig) volumes(node string) []corev1.PersistentVolume {
	r.t.Helper()
	var pvs corev1.PersistentVolumeList
	if err := env.Client.List(context.Background(), &pvs, client.MatchingLabels(resources.VolumeLabels(r.c))); err != nil {
		r.t.Fatal(err)
	}
	var out []corev1.PersistentVolume
	for _, pv := range pvs.Items {
		if resources.VolumeNode(&pv) == node && pv.DeletionTimestamp.IsZero() && pv.Labels[resources.LabelVolume] == resources.VolumeData {
			out = append(out, pv)
		}
	}
	return out
}

// bind makes member ordinal's claim data-0-<pod> bound to the data volume on node, as the
// StatefulSet and the volume binder would.
func (r *lostRig) bind(ordinal int32, node string) {
	r.t.Helper()
	pv := r.volumeOn(node)
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: resources.DataClaimName(0) + "-" + resources.PodName(r.c, ordinal), Namespace: r.c.Namespace, Labels: resources.SelectorLabels(r.c)},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr.To(r.c.Spec.StorageClassName),
			VolumeName:       pv.Name,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")}},
		},
	}
	if err := env.Client.Create(context.Background(), pvc); err != nil {
		r.t.Fatal(err)
	}
}

// lose stops member ordinal's process and marks its pod not ready, as a node going away
// does; the node itself is deleted or marked NotReady by the caller.
func (r *lostRig) lose(ordinal int32) *corev1.Pod {
	r.t.Helper()
	ctx := context.Background()
	r.sims.Server(ordinal).Kill()
	var pod corev1.Pod
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: r.c.Namespace, Name: resources.PodName(r.c, ordinal)}, &pod); err != nil {
		r.t.Fatal(err)
	}
	for i := range pod.Status.Conditions {
		pod.Status.Conditions[i].Status = corev1.ConditionFalse
	}
	if err := env.Client.Status().Update(ctx, &pod); err != nil {
		r.t.Fatal(err)
	}
	return &pod
}

// live reads the cluster.
func (r *lostRig) live() *veltrixv1.VeltrixCluster {
	r.t.Helper()
	var live veltrixv1.VeltrixCluster
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(r.c), &live); err != nil {
		r.t.Fatal(err)
	}
	return &live
}

// annotate sets an annotation on the cluster.
func (r *lostRig) annotate(key, value string) {
	r.t.Helper()
	live := r.live()
	if live.Annotations == nil {
		live.Annotations = map[string]string{}
	}
	live.Annotations[key] = value
	if err := env.Client.Update(context.Background(), live); err != nil {
		r.t.Fatal(err)
	}
}

// replacedByStatefulSet does what the StatefulSet and volume controllers do once the
// operator deleted the lost member's claim and pod: the claim's protection finalizer goes,
// a new claim binds the volume on node, the pod is made anew and its server starts on the
// blank disk (it joins through --join).
func (r *lostRig) replacedByStatefulSet(ordinal int32, oldPod *corev1.Pod, node string) {
	r.t.Helper()
	ctx := context.Background()
	claim := client.ObjectKey{Namespace: r.c.Namespace, Name: resources.DataClaimName(0) + "-" + resources.PodName(r.c, ordinal)}
	testenv.Eventually(r.t, 60*time.Second, "the lost member's claim and pod deleted", func() (bool, string) {
		var pvc corev1.PersistentVolumeClaim
		err := env.Client.Get(ctx, claim, &pvc)
		switch {
		case err == nil && pvc.DeletionTimestamp.IsZero():
			return false, "claim not deleted"
		case err == nil:
			pvc.Finalizers = nil // the pvc-protection controller would, once no pod uses it
			if err := env.Client.Update(ctx, &pvc); err != nil && !apierrors.IsNotFound(err) {
				return false, err.Error()
			}
			return false, "claim being deleted"
		case !apierrors.IsNotFound(err):
			return false, err.Error()
		}
		var pod corev1.Pod
		err = env.Client.Get(ctx, client.ObjectKeyFromObject(oldPod), &pod)
		if err == nil && pod.UID == oldPod.UID {
			return false, "pod not deleted"
		}
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	r.bind(ordinal, node)
	memberPod(r.t, r.c, ordinal)
	r.sims.Server(ordinal).StartFresh()
}

// keysStored sums INFO keys= over the running members: each key counts once per owner.
func (r *lostRig) keysStored() (int, string) {
	total := 0
	var parts []string
	for _, s := range r.sims.Servers() {
		if !s.Running() {
			continue
		}
		info, err := r.sims.Client().Info(context.Background(), s.Addr)
		if err != nil {
			return -1, err.Error()
		}
		n, _ := strconv.Atoi(info["keys"])
		total += n
		parts = append(parts, fmt.Sprintf("%s=%d", s.ID, n))
	}
	return total, strings.Join(parts, " ")
}

// TestLostNodeReplaced: with spec.lostNodes.replace Automatic, deleting the node that holds
// member vx-2's volume has the operator remove vx-2 from membership at once (DELETE
// ?force=true), delete its claim and pod and release the lost node's volume, while the
// node is kept out of disk preparation; a spare node's disk becomes the new volume, the
// member made anew there joins and receives the data again from the replicas (every key
// back to two copies), and the cluster is Ready with MemberLost=False (Replaced). When the
// node comes back with its disk, the disk is reported (DisksReturned) and not made into a
// volume until the annotation veltrix.io/reoffer-node offers it again.
func TestLostNodeReplaced(t *testing.T) {
	ctx := context.Background()
	r := newLostRig(t, "lostauto", func(c *veltrixv1.VeltrixCluster) {
		c.Spec.LostNodes = veltrixv1.LostNodesSpec{Replace: veltrixv1.LostNodeReplaceAutomatic}
		c.Spec.ReclaimPolicy = veltrixv1.ReclaimDelete
	})
	const keys = 200
	conn := r.sims.Server(0).Conn()
	for i := range keys {
		if err := conn.Put(ctx, fmt.Sprintf("k%d", i), fmt.Sprintf("v%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, 30*time.Second, "two copies of every key", func() (bool, string) {
		n, detail := r.keysStored()
		return n == 2*keys, detail
	})
	lostNode, spare := r.nodes[2], r.nodes[3]
	lostDisk := r.volumeOn(lostNode).Annotations[resources.AnnotationFilesystemUUID]

	oldPod := r.lose(2)
	start := time.Now()
	if err := env.Client.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: lostNode}}); err != nil {
		t.Fatal(err)
	}
	createdNodes.Delete(lostNode)
	cond := condition(t, r.c, veltrixv1.ConditionMemberLost, metav1.ConditionTrue, veltrixv1.ReasonReplacing)
	if want := "replacing member vx-2 of lost node " + lostNode + " (Deleted)"; !strings.HasPrefix(cond.Message, want) {
		t.Errorf("MemberLost message %q, want it to start with %q", cond.Message, want)
	}
	condition(t, r.c, veltrixv1.ConditionReady, metav1.ConditionUnknown, veltrixv1.ReasonReplacing)
	r.sims.WaitMembers(2, []string{"vx-0", "vx-1"}) // removed at once, not leaving
	live := lastFailover(t, r, start)
	if l := live.Status.LostNodes; len(l) != 1 || l[0].Node != lostNode || l[0].Member != "vx-2" || l[0].Reason != veltrixv1.LostNodeDeleted ||
		strings.Join(l[0].Disks, ",") != lostDisk || l[0].Replacement != veltrixv1.ReplacementReplacing {
		t.Errorf("status.lostNodes %+v, want %s with member vx-2, disk %s, Replacing", l, lostNode, lostDisk)
	}
	if contains(live.Status.Nodes, lostNode) {
		t.Errorf("status.nodes %v still names the lost node", live.Status.Nodes)
	}
	testenv.Eventually(t, 30*time.Second, "the lost node's volume released", func() (bool, string) {
		vols := r.volumes(lostNode)
		return len(vols) == 0, fmt.Sprint(len(vols), " volumes")
	})
	r.replacedByStatefulSet(2, oldPod, spare)

	condition(t, r.c, veltrixv1.ConditionMemberLost, metav1.ConditionFalse, veltrixv1.ReasonReplaced)
	condition(t, r.c, veltrixv1.ConditionReady, metav1.ConditionTrue, veltrixv1.ReasonReady)
	t.Logf("member replaced and the cluster Ready %s after its node was deleted", time.Since(start).Round(100*time.Millisecond))
	testenv.Eventually(t, 60*time.Second, "two copies of every key, some on the new vx-2", func() (bool, string) {
		n, detail := r.keysStored()
		info, err := r.sims.Client().Info(ctx, r.sims.Server(2).Addr)
		if err != nil {
			return false, err.Error()
		}
		return n == 2*keys && info["keys"] != "0", detail
	})
	conn2 := r.sims.Server(2).Conn()
	for i := range keys {
		if v, err := conn2.Get(ctx, fmt.Sprintf("k%d", i)); err != nil || v != fmt.Sprintf("v%d", i) {
			t.Errorf("k%d through the new vx-2: %q, %v", i, v, err)
		}
	}
	if !warned(t, r.c, veltrixv1.ConditionMemberLost, veltrixv1.ReasonReplacing) {
		t.Errorf("no Warning event Replacing for MemberLost")
	}

	// The node comes back with its disk: reported, not used.
	createNodes(t, lostNode)
	cond = condition(t, r.c, veltrixv1.ConditionDisksReturned, metav1.ConditionTrue, veltrixv1.ReasonDisksReturned)
	if !strings.Contains(cond.Message, lostDisk) || !strings.Contains(cond.Message, veltrixv1.AnnotationReofferNode+"="+lostNode) {
		t.Errorf("DisksReturned message %q names neither the disk %s nor the annotation", cond.Message, lostDisk)
	}
	time.Sleep(3 * time.Second) // passes every second: none makes a volume of it
	if vols := r.volumes(lostNode); len(vols) != 0 {
		t.Errorf("the returned node's disk was made into volume %s without being offered", vols[0].Name)
	}
	if p := r.f.prepared(t, lostNode); len(p) != 1 || p[0].GetFilesystemUuid() != lostDisk {
		t.Errorf("the returned node's prepared disks %v, want its disk %s untouched", p, lostDisk)
	}
	r.annotate(veltrixv1.AnnotationReofferNode, lostNode)
	condition(t, r.c, veltrixv1.ConditionDisksReturned, metav1.ConditionFalse, veltrixv1.ReasonNoDisksReturned)
	testenv.Eventually(t, 30*time.Second, "the node unlisted, used again, and the annotation gone", func() (bool, string) {
		live := r.live()
		_, annotated := live.Annotations[veltrixv1.AnnotationReofferNode]
		return len(live.Status.LostNodes) == 0 && !annotated && contains(live.Status.Nodes, lostNode),
			fmt.Sprintf("lostNodes %+v, nodes %v, annotations %v", live.Status.LostNodes, live.Status.Nodes, live.Annotations)
	})

	// Its disk is the cluster's again: reclaim policy Delete releases it with the others.
	if err := env.Client.Delete(ctx, r.live()); err != nil {
		t.Fatal(err)
	}
	for o := range int32(3) { // the StatefulSet's pods, which no controller deletes here
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: r.c.Namespace, Name: resources.PodName(r.c, o)}}
		if err := env.Client.Delete(ctx, pod, client.GracePeriodSeconds(0)); client.IgnoreNotFound(err) != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, 60*time.Second, "the cluster gone", func() (bool, string) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(r.c), &veltrixv1.VeltrixCluster{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	if p := r.f.prepared(t, lostNode); len(p) != 0 {
		t.Errorf("the re-offered node still has %d prepared disks after reclaim policy Delete", len(p))
	}
}

// TestLostNodeManual: with the default policy (Manual) a member whose node stays NotReady
// past the grace period is reported (MemberLost=True ReplacementManual, Ready=False) and
// nothing is done, until the annotation veltrix.io/replace-member names it; the operator
// then removes the annotation and replaces the member. A second loss while the replication
// factor's worth of members is lost is refused.
func TestLostNodeManual(t *testing.T) {
	ctx := context.Background()
	r := newLostRig(t, "lostmanual", func(c *veltrixv1.VeltrixCluster) {
		c.Spec.LostNodes = veltrixv1.LostNodesSpec{GracePeriod: &metav1.Duration{Duration: 3 * time.Second}}
	})
	lostNode := r.nodes[1]
	oldPod := r.lose(1)
	var node corev1.Node
	if err := env.Client.Get(ctx, client.ObjectKey{Name: lostNode}, &node); err != nil {
		t.Fatal(err)
	}
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, Reason: "NodeStatusUnknown",
		LastTransitionTime: metav1.Now(), LastHeartbeatTime: metav1.Now()}}
	if err := env.Client.Status().Update(ctx, &node); err != nil {
		t.Fatal(err)
	}
	condition(t, r.c, veltrixv1.ConditionMemberLost, metav1.ConditionTrue, veltrixv1.ReasonNodeNotReady)
	cond := condition(t, r.c, veltrixv1.ConditionMemberLost, metav1.ConditionTrue, veltrixv1.ReasonReplacementManual)
	if want := "set the annotation veltrix.io/replace-member=vx-1"; !strings.Contains(cond.Message, want) {
		t.Errorf("MemberLost message %q lacks %q", cond.Message, want)
	}
	condition(t, r.c, veltrixv1.ConditionReady, metav1.ConditionFalse, veltrixv1.ReasonReplacementManual)
	if s := r.live().Status.State; s != veltrixv1.StateDegraded {
		t.Errorf("state %s, want Degraded", s)
	}
	time.Sleep(2 * time.Second)
	if ms, err := r.sims.Client().Members(ctx, r.sims.Server(0).AdminAddr); err != nil || len(ms) != 3 {
		t.Errorf("members %v (%v): the lost member was touched without the annotation", ms, err)
	}
	if f := r.live().Status.LastFailoverTime; f != nil {
		t.Errorf("status.lastFailoverTime %s before any failover", f)
	}
	if len(r.volumes(lostNode)) != 1 {
		t.Errorf("the lost node's volume was released without the annotation")
	}

	approved := time.Now()
	r.annotate(veltrixv1.AnnotationReplaceMember, "vx-1")
	condition(t, r.c, veltrixv1.ConditionMemberLost, metav1.ConditionTrue, veltrixv1.ReasonReplacing)
	r.sims.WaitMembers(2, []string{"vx-0", "vx-2"})
	lastFailover(t, r, approved)
	testenv.Eventually(t, 30*time.Second, "the annotation removed", func() (bool, string) {
		a := r.live().Annotations
		_, ok := a[veltrixv1.AnnotationReplaceMember]
		return !ok, fmt.Sprint(a)
	})
	r.replacedByStatefulSet(1, oldPod, r.nodes[3])
	condition(t, r.c, veltrixv1.ConditionMemberLost, metav1.ConditionFalse, veltrixv1.ReasonReplaced)
	condition(t, r.c, veltrixv1.ConditionReady, metav1.ConditionTrue, veltrixv1.ReasonReady)
}

// TestLostNodeRefusedWithoutCopies: two members lost with replicationFactor 2 may hold the
// only copies of some keys: nothing is replaced, MemberLost=True ReplacementRefused says
// why, and membership is untouched.
func TestLostNodeRefusedWithoutCopies(t *testing.T) {
	ctx := context.Background()
	r := newLostRig(t, "lostrefused", func(c *veltrixv1.VeltrixCluster) {
		c.Spec.LostNodes = veltrixv1.LostNodesSpec{Replace: veltrixv1.LostNodeReplaceAutomatic}
	})
	// Both pods stop serving before their nodes go: the first loss is refused while the
	// other member does not serve, and the second finds two lost.
	r.lose(1)
	r.lose(2)
	for _, n := range r.nodes[1:3] {
		if err := env.Client.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}); err != nil {
			t.Fatal(err)
		}
		createdNodes.Delete(n)
	}
	cond := condition(t, r.c, veltrixv1.ConditionMemberLost, metav1.ConditionTrue, veltrixv1.ReasonReplacementRefused)
	if want := "2 members are lost, as many as replicationFactor 2"; !strings.HasPrefix(cond.Message, want) {
		t.Errorf("MemberLost message %q, want %q", cond.Message, want)
	}
	time.Sleep(2 * time.Second)
	if ms, err := r.sims.Client().Members(ctx, r.sims.Server(0).AdminAddr); err != nil || len(ms) != 3 {
		t.Errorf("members %v (%v): a member was removed although its data may have no copy", ms, err)
	}
	if l := r.live().Status.LostNodes; len(l) != 2 || l[0].Replacement != "" || l[1].Replacement != "" {
		t.Errorf("status.lostNodes %+v, want two, none replacing", l)
	}
}

// warned reports whether a Warning event with reason was recorded for the cluster's
// condition condType (the event's action).
func warned(t *testing.T, c *veltrixv1.VeltrixCluster, condType, reason string) bool {
	t.Helper()
	var list eventsv1.EventList
	if err := env.Client.List(context.Background(), &list, client.InNamespace(c.Namespace)); err != nil {
		t.Fatal(err)
	}
	for _, e := range list.Items {
		if e.Regarding.Name == c.Name && e.Reason == reason && e.Action == condType && e.Type == corev1.EventTypeWarning {
			return true
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// lastFailover waits for status.lastFailoverTime at or after since (to the second, as the
// API stores it) and for the failover counted once, and returns the cluster.
func lastFailover(t *testing.T, r *lostRig, since time.Time) *veltrixv1.VeltrixCluster {
	t.Helper()
	var live *veltrixv1.VeltrixCluster
	testenv.Eventually(t, 30*time.Second, "status.lastFailoverTime set", func() (bool, string) {
		live = r.live()
		f := live.Status.LastFailoverTime
		return f != nil && !f.Time.Before(since.Truncate(time.Second)), fmt.Sprint(f)
	})
	t.Logf("status.lastFailoverTime %s: %s after the loss, or its approval (to the second)", live.Status.LastFailoverTime.UTC().Format(time.RFC3339),
		live.Status.LastFailoverTime.Sub(since.Truncate(time.Second)))
	wantSeries(t, live.Namespace, live.Name, map[string]float64{"veltrix_operator_failovers_total": 1})
	return live
}
