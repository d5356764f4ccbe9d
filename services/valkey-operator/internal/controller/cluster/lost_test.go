package cluster_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	"github.com/opsuite/suite/services/valkey-operator/internal/resources"
	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
	"github.com/opsuite/suite/shared/conditions"
	"github.com/opsuite/suite/shared/testenv"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// hosts plays the Kubernetes nodes and the local volumes of a fleet: every member's claim
// is bound to a volume pinned to the host the fleet reports it on.
type hosts struct {
	t      *testing.T
	f      *fleet
	prefix string // node names are unique across the parallel tests
}

func (h hosts) node(i int) string { return fmt.Sprintf("%s-host-%d", h.prefix, i) }

// hostOf is the node a member's claim is pinned to: the fleet's host-<n> of it.
func (h hosts) hostOf(n *valkeyv1.ValkeyNode) string {
	return h.prefix + "-" + n.Status.NodeName
}

func (h hosts) create(ctx context.Context, count int) {
	h.t.Helper()
	for i := range count {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: h.node(i), Labels: map[string]string{"kubernetes.io/hostname": h.node(i)}}}
		if err := env.Client.Create(ctx, n); err != nil {
			h.t.Fatal(err)
		}
		h.t.Cleanup(func() { _ = env.Client.Delete(context.Background(), n) })
		h.setReady(ctx, h.node(i), corev1.ConditionTrue)
	}
}

func (h hosts) setReady(ctx context.Context, name string, s corev1.ConditionStatus) {
	h.t.Helper()
	var n corev1.Node
	if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, &n); err != nil {
		h.t.Fatal(err)
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: s, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	if err := env.Client.Status().Update(ctx, &n); err != nil {
		h.t.Fatal(err)
	}
}

// bind gives member n a claim bound to a new volume pinned to node, as the node
// controller and a local volume's binding would.
func (h hosts) bind(ctx context.Context, n *valkeyv1.ValkeyNode, node string) {
	h.t.Helper()
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{GenerateName: h.prefix + "-"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: "/mnt/" + n.Name}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
			}}}},
		},
	}
	if err := env.Client.Create(ctx, pv); err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { _ = env.Client.Delete(context.Background(), pv) })
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: resources.PVCName(n.Name), Namespace: n.Namespace, Labels: map[string]string{resources.LabelNode: n.Name}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			VolumeName:  pv.Name,
		},
	}
	if err := env.Client.Create(ctx, pvc); err != nil {
		h.t.Fatal(err)
	}
	pvc.Status.Phase = corev1.ClaimBound
	if err := env.Client.Status().Update(ctx, pvc); err != nil {
		h.t.Fatal(err)
	}
}

// lose stops the servers of the members on node and holds them down, as a lost node's
// pods; it returns their names.
func (h hosts) lose(ctx context.Context, node string) []string {
	h.t.Helper()
	var list valkeyv1.ValkeyNodeList
	if err := env.Client.List(ctx, &list, client.InNamespace(h.f.ns)); err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for i := range list.Items {
		n := &list.Items[i]
		if h.hostOf(n) != node {
			continue
		}
		h.f.mu.Lock()
		h.f.held[n.Name] = true
		s := h.f.servers[n.Name]
		h.f.mu.Unlock()
		s.Stop()
		h.f.down(ctx, n.Name)
		out = append(out, n.Name)
	}
	return out
}

// claimGone plays the claim protection controller and reports whether member name's claim
// was deleted (by the operator).
func (h hosts) claimGone(ctx context.Context, name string) bool {
	var pvc corev1.PersistentVolumeClaim
	err := env.Client.Get(ctx, client.ObjectKey{Namespace: h.f.ns, Name: resources.PVCName(name)}, &pvc)
	if apierrors.IsNotFound(err) {
		return true
	}
	if err != nil || pvc.DeletionTimestamp.IsZero() {
		return false
	}
	pvc.Finalizers = nil
	_ = env.Client.Update(ctx, &pvc)
	return false
}

// replace starts member name anew (an empty server: a new claim on another node) and lets
// the fleet report it again.
func (h hosts) replace(ctx context.Context, name, node string) {
	h.t.Helper()
	var n valkeyv1.ValkeyNode
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: h.f.ns, Name: name}, &n); err != nil {
		h.t.Fatal(err)
	}
	h.bind(ctx, &n, node)
	s := h.f.start(ctx, &n)
	h.f.mu.Lock()
	h.f.servers[name], h.f.served[name] = s, n.Generation
	delete(h.f.held, name)
	h.f.mu.Unlock()
}

func memberLost(vc *valkeyv1.ValkeyCluster) string {
	c := conditions.Get(vc.Status.Conditions, valkeyv1.ConditionMemberLost)
	if c == nil {
		return "absent"
	}
	return fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message)
}

// TestLostNodeReplaced: the node holding a primary and another shard's replica goes
// NotReady, its servers with it. Within spec.lostNodes.gracePeriod the cluster says so
// (MemberLost NodeNotReady) and keeps the claims; past it, the primary's replica takes
// over, both members' claims are deleted, and once they are back empty on another node
// the cluster is Ready with every key written before, the old primary a replica.
func TestLostNodeReplaced(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f, _ := startCluster(t, "vkc-lost-", "lost", valkeyv1.ValkeyClusterSpec{Shards: 3, Replicas: 1,
		Persistence: &valkeyv1.PersistenceSpec{Size: resource.MustParse("1Gi")},
		LostNodes:   &valkeyv1.LostNodesSpec{GracePeriod: &metav1.Duration{Duration: 6 * time.Second}}})
	waitReady(t, f, "lost", 2*time.Minute)
	h := hosts{t: t, f: f, prefix: f.ns}
	h.create(ctx, 4)
	var list valkeyv1.ValkeyNodeList
	if err := env.Client.List(ctx, &list, client.InNamespace(f.ns)); err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		h.bind(ctx, &list.Items[i], h.hostOf(&list.Items[i]))
	}
	keys := writeKeys(t, f.seeds(), "lost", 300)

	var primary valkeyv1.ValkeyNode
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "lost-0-0"}, &primary); err != nil {
		t.Fatal(err)
	}
	node := h.hostOf(&primary)
	h.setReady(ctx, node, corev1.ConditionFalse)
	lost := h.lose(ctx, node)
	if len(lost) != 2 {
		t.Fatalf("members on %s: %v, want a primary and a replica", node, lost)
	}
	t.Logf("node %s NotReady with %v", node, lost)

	var vc valkeyv1.ValkeyCluster
	sawGrace := false
	testenv.Eventually(t, 90*time.Second, "the lost members' claims deleted", func() (bool, string) {
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "lost"}, &vc); err != nil {
			return false, err.Error()
		}
		if c := conditions.Get(vc.Status.Conditions, valkeyv1.ConditionMemberLost); c != nil && c.Reason == valkeyv1.ReasonNodeNotReady {
			sawGrace = true
			if d := conditions.Get(vc.Status.Conditions, valkeyv1.ConditionDegraded); d == nil || d.Reason != valkeyv1.ReasonNodeNotReady {
				t.Errorf("Degraded %+v while MemberLost NodeNotReady", d)
			}
		}
		gone := 0
		for _, name := range lost {
			if h.claimGone(ctx, name) {
				gone++
			}
		}
		return gone == len(lost), fmt.Sprintf("%d of %d claims gone; MemberLost %s", gone, len(lost), memberLost(&vc))
	})
	if !sawGrace {
		t.Errorf("MemberLost never said NodeNotReady within the grace period")
	}
	for _, name := range lost {
		h.replace(ctx, name, h.node(3))
	}
	got := waitReady(t, f, "lost", 2*time.Minute)
	wantCondition(t, got, valkeyv1.ConditionMemberLost, metav1.ConditionFalse, valkeyv1.ReasonNoMemberLost)
	readKeys(t, f.seeds(), keys)
	conn, err := valkey.Dial(f.server("lost-0-0").Addr, valkey.Options{DialTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	v, err := conn.ClusterNodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if me, _ := v.Myself(); !me.Replica {
		t.Errorf("lost-0-0 came back as %+v, want a replica", me)
	}
	wantEvents(t, f, "lost", map[string]int{valkeyv1.ReasonNodeNotReady: 1, valkeyv1.EventReplicasTakenOver: 1, valkeyv1.ReasonReplacing: 2, valkeyv1.ReasonNoMemberLost: 1})
}

// TestLostNodeRefused: a primary without replicas is lost with its node. Its slots have no
// other copy, so its claim is kept and MemberLost says so, as does Degraded.
func TestLostNodeRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f, _ := startCluster(t, "vkc-lostno-", "alone", valkeyv1.ValkeyClusterSpec{Shards: 3,
		Persistence: &valkeyv1.PersistenceSpec{Size: resource.MustParse("1Gi")}})
	waitReady(t, f, "alone", 2*time.Minute)
	h := hosts{t: t, f: f, prefix: f.ns}
	h.create(ctx, 3)
	var list valkeyv1.ValkeyNodeList
	if err := env.Client.List(ctx, &list, client.InNamespace(f.ns)); err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		h.bind(ctx, &list.Items[i], h.hostOf(&list.Items[i]))
	}
	var victim valkeyv1.ValkeyNode
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "alone-1-0"}, &victim); err != nil {
		t.Fatal(err)
	}
	node := h.hostOf(&victim)
	lost := h.lose(ctx, node)
	if err := env.Client.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}); err != nil {
		t.Fatal(err)
	}
	var vc valkeyv1.ValkeyCluster
	testenv.Eventually(t, 60*time.Second, "MemberLost ReplacementRefused", func() (bool, string) {
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "alone"}, &vc); err != nil {
			return false, err.Error()
		}
		c := conditions.Get(vc.Status.Conditions, valkeyv1.ConditionMemberLost)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == valkeyv1.ReasonReplacementRefused, memberLost(&vc)
	})
	if msg := memberLost(&vc); !strings.Contains(msg, "alone-1-0 is on lost node "+node+" (deleted) and is not replaced: it owns ") ||
		!strings.Contains(msg, " slots and no replica of it answers") {
		t.Errorf("MemberLost %s", msg)
	}
	wantCondition(t, &vc, valkeyv1.ConditionDegraded, metav1.ConditionTrue, valkeyv1.ReasonReplacementRefused)
	if vc.Status.State != valkeyv1.StateDegraded {
		t.Errorf("state %s, want Degraded", vc.Status.State)
	}
	// A few more passes: the claim stays.
	time.Sleep(3 * time.Second)
	for _, name := range lost {
		var pvc corev1.PersistentVolumeClaim
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: resources.PVCName(name)}, &pvc); err != nil || !pvc.DeletionTimestamp.IsZero() {
			t.Errorf("claim of %s: %v, deletion %v; want it kept", name, err, pvc.DeletionTimestamp)
		}
	}
	wantEvents(t, f, "alone", map[string]int{valkeyv1.ReasonReplacementRefused: 1})
}
