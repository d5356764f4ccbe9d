package node

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	"github.com/opsuite/suite/services/valkey-operator/internal/resources"
	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
	"github.com/opsuite/suite/shared/testenv"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func storageClass(t *testing.T, name string, expandable bool) string {
	t.Helper()
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: "example.com/test",
		AllowVolumeExpansion: ptr.To(expandable)}
	if err := env.Client.Create(context.Background(), sc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), sc) })
	return name
}

func controllerUID(o metav1.Object) string {
	if c := metav1.GetControllerOf(o); c != nil {
		return string(c.UID)
	}
	return ""
}

// TestWorkloadPVCAndReady follows a persistent node from creation to Ready, through a
// rolling restart and a PVC expansion, with the conditions of each step.
func TestWorkloadPVCAndReady(t *testing.T) {
	h := start(t)
	srv := startServer(t)
	h.serve("c-0-0", srv)
	class := storageClass(t, "expandable-"+h.ns, true)
	h.create(h.configMap(""))
	n := h.node("c-0-0", func(n *valkeyv1.ValkeyNode) {
		n.Spec.Persistence = &valkeyv1.PersistenceSpec{Size: resource.MustParse("1Gi"), StorageClassName: ptr.To(class),
			ReclaimPolicy: valkeyv1.ReclaimDelete}
	})
	h.create(n)

	sts := h.statefulSet("c-0-0")
	if controllerUID(sts) != string(n.UID) || *sts.Spec.Replicas != 1 || sts.Spec.ServiceName != "c" ||
		sts.Spec.Template.Annotations[resources.AnnotationRestartHash] != "r1" {
		t.Errorf("StatefulSet controller %s replicas %d service %s annotations %v", controllerUID(sts), *sts.Spec.Replicas,
			sts.Spec.ServiceName, sts.Spec.Template.Annotations)
	}
	if fm := sts.ManagedFields; len(fm) == 0 || fm[0].Manager != resources.NodeFieldManager {
		t.Errorf("StatefulSet managed by %+v, want %s", fm, resources.NodeFieldManager)
	}
	pvc := h.pvc("c-0-0-data")
	if controllerUID(pvc) != string(n.UID) || pvc.Labels[resources.LabelNode] != "c-0-0" ||
		pvc.Spec.Resources.Requests.Storage().String() != "1Gi" || *pvc.Spec.StorageClassName != class {
		t.Errorf("PVC controller %s labels %v requests %s", controllerUID(pvc), pvc.Labels, pvc.Spec.Resources.Requests.Storage())
	}

	got := h.waitConditions("c-0-0", "Ready=False/PersistentVolumeClaimPending PersistentVolumeClaimReady=False/PersistentVolumeClaimPending PersistentVolumeClaimSizeReady=False/PersistentVolumeClaimResizePending")
	if m := condOf(got, valkeyv1.NodeConditionReady).Message; m != "PVC c-0-0-data is Pending" {
		t.Errorf("Ready message %q", m)
	}

	h.bind("c-0-0-data", "1Gi", nil)
	got = h.waitConditions("c-0-0", "Ready=False/PodNotReady PersistentVolumeClaimReady=True/PersistentVolumeClaimBound PersistentVolumeClaimSizeReady=True/PersistentVolumeClaimSizeSatisfied")
	if m := condOf(got, valkeyv1.NodeConditionReady).Message; m != "pod c-0-0-0 does not exist yet" || got.Status.PodName != "c-0-0-0" {
		t.Errorf("Ready message %q, pod %q", m, got.Status.PodName)
	}

	pod := h.runPod("c-0-0-0", sts.Spec.Template, "rev1", false)
	h.waitNode("c-0-0", "reports the unready pod", func(n *valkeyv1.ValkeyNode) bool {
		return condOf(n, valkeyv1.NodeConditionReady).Message == "pod c-0-0-0 is running but not ready"
	})
	h.setPodStatus(pod, true, 0)
	h.waitNode("c-0-0", "waits for the StatefulSet controller", func(n *valkeyv1.ValkeyNode) bool {
		return condOf(n, valkeyv1.NodeConditionReady).Message == "StatefulSet c-0-0 has not observed generation 1 yet"
	})
	h.rollOut("c-0-0", "rev1")
	got = h.waitNode("c-0-0", "is Ready with the server's identity", func(n *valkeyv1.ValkeyNode) bool {
		return n.Status.Ready && n.Status.ValkeyNodeID != "" && n.Status.Role != ""
	})
	if r := condOf(got, valkeyv1.NodeConditionReady); r.Reason != valkeyv1.NodeReasonPodRunning || r.Status != metav1.ConditionTrue {
		t.Errorf("Ready %+v", r)
	}
	if got.Status.PodName != "c-0-0-0" || got.Status.PodIP != "127.0.0.1" || got.Status.NodeName != "node-a" ||
		got.Status.Role != valkeyv1.RolePrimary || got.Status.ValkeyNodeID != srv.myID(t) {
		t.Errorf("status %s; server id %s", describe(got), srv.myID(t))
	}
	if c := condOf(got, valkeyv1.NodeConditionLiveConfigApplied); c.Type != "" {
		t.Errorf("no live keys, yet LiveConfigApplied %+v", c)
	}

	// A converged node writes nothing, although it is looked at every second.
	before := h.writes.Count()
	time.Sleep(3 * time.Second)
	if w := h.writes.Count() - before; w != 0 {
		t.Errorf("%d writes by a converged node controller in 3s, want 0", w)
	}

	// The config hash changes: the template follows, and Ready waits for the rollout.
	update(h, &valkeyv1.ValkeyNode{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "c-0-0"}}, func(n *valkeyv1.ValkeyNode) {
		n.Spec.ConfigHash = "r2"
	})
	h.waitNode("c-0-0", "waits for the new template to be observed", func(n *valkeyv1.ValkeyNode) bool {
		return condOf(n, valkeyv1.NodeConditionReady).Message == "StatefulSet c-0-0 has not observed generation 2 yet"
	})
	if s := h.statefulSet("c-0-0"); s.Spec.Template.Annotations[resources.AnnotationRestartHash] != "r2" {
		t.Errorf("template annotations %v", s.Spec.Template.Annotations)
	}
	updateStatus(h, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "c-0-0"}}, func(s *appsv1.StatefulSet) {
		s.Status.ObservedGeneration = s.Generation
		s.Status.UpdateRevision = "rev2"
	})
	h.waitNode("c-0-0", "waits for the rollout", func(n *valkeyv1.ValkeyNode) bool {
		return condOf(n, valkeyv1.NodeConditionReady).Message == "StatefulSet c-0-0 is rolling out revision rev2"
	})
	h.rollOut("c-0-0", "rev2")
	h.waitNode("c-0-0", "waits for the pod of the new revision", func(n *valkeyv1.ValkeyNode) bool {
		return condOf(n, valkeyv1.NodeConditionReady).Message == "pod c-0-0-0 is of revision rev1, not rev2"
	})
	update(h, pod, func(p *corev1.Pod) { p.Labels[appsv1.ControllerRevisionHashLabelKey] = "rev2" })
	h.waitNode("c-0-0", "is Ready again", func(n *valkeyv1.ValkeyNode) bool { return n.Status.Ready })

	// The PVC grows with the spec; the size condition follows the resize.
	update(h, &valkeyv1.ValkeyNode{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "c-0-0"}}, func(n *valkeyv1.ValkeyNode) {
		n.Spec.Persistence.Size = resource.MustParse("2Gi")
	})
	testenv.WaitFor(t, "the PVC requests 2Gi", func() bool {
		p := &corev1.PersistentVolumeClaim{}
		return env.Client.Get(context.Background(), h.key("c-0-0-data"), p) == nil && p.Spec.Resources.Requests.Storage().String() == "2Gi"
	})
	got = h.waitConditions("c-0-0", "Ready=True/PodRunning PersistentVolumeClaimReady=True/PersistentVolumeClaimBound PersistentVolumeClaimSizeReady=False/PersistentVolumeClaimResizePending")
	if m := condOf(got, valkeyv1.NodeConditionPersistentVolumeClaimSizeReady).Message; m != "PVC c-0-0-data waits for its resize from 1Gi to 2Gi to start" {
		t.Errorf("size message %q", m)
	}
	for _, step := range []struct {
		mutate func(*corev1.PersistentVolumeClaim)
		reason string
	}{
		{func(p *corev1.PersistentVolumeClaim) {
			p.Status.Conditions = []corev1.PersistentVolumeClaimCondition{{Type: corev1.PersistentVolumeClaimResizing, Status: corev1.ConditionTrue}}
		}, valkeyv1.NodeReasonPersistentVolumeClaimResizeInProgress},
		{func(p *corev1.PersistentVolumeClaim) {
			p.Status.AllocatedResourceStatuses = map[corev1.ResourceName]corev1.ClaimResourceStatus{corev1.ResourceStorage: corev1.PersistentVolumeClaimControllerResizeInfeasible}
		}, valkeyv1.NodeReasonPersistentVolumeClaimResizeInfeasible},
		{func(p *corev1.PersistentVolumeClaim) {
			p.Status.Conditions = []corev1.PersistentVolumeClaimCondition{{Type: corev1.PersistentVolumeClaimFileSystemResizePending, Status: corev1.ConditionTrue}}
		}, valkeyv1.NodeReasonPersistentVolumeClaimResizePending},
	} {
		h.bind("c-0-0-data", "1Gi", step.mutate)
		h.waitConditions("c-0-0", "Ready=True/PodRunning PersistentVolumeClaimReady=True/PersistentVolumeClaimBound PersistentVolumeClaimSizeReady=False/"+step.reason)
	}
	h.bind("c-0-0-data", "2Gi", nil)
	h.waitConditions("c-0-0", "Ready=True/PodRunning PersistentVolumeClaimReady=True/PersistentVolumeClaimBound PersistentVolumeClaimSizeReady=True/PersistentVolumeClaimSizeSatisfied")
}

// TestPVCRetainAdoptionAndRefusals: a retained claim has no owner and is adopted by its
// labels; a foreign claim under the node's name is never used; a class without expansion
// makes the resize infeasible, with the API server's reason.
func TestPVCRetainAdoptionAndRefusals(t *testing.T) {
	h := start(t)
	fixed := storageClass(t, "fixed-"+h.ns, false)
	h.create(h.configMap(""))
	persist := func(n *valkeyv1.ValkeyNode) {
		n.Spec.Persistence = &valkeyv1.PersistenceSpec{Size: resource.MustParse("1Gi"), StorageClassName: ptr.To(fixed),
			ReclaimPolicy: valkeyv1.ReclaimRetain}
	}
	claim := func(name string, labels map[string]string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				StorageClassName: ptr.To(fixed),
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
		}
	}
	// Left by an earlier node of the same name, and someone else's claim.
	adopted := h.node("c-0-1", func(n *valkeyv1.ValkeyNode) {
		persist(n)
		n.Spec.Persistence.ReclaimPolicy = valkeyv1.ReclaimDelete
	})
	h.create(claim("c-0-1-data", resources.NodeLabels(adopted)))
	h.bind("c-0-1-data", "1Gi", nil)
	h.create(claim("c-0-2-data", map[string]string{"app": "other"}))

	h.create(adopted)
	h.create(h.node("c-0-2", persist))
	h.create(h.node("c-0-3", persist))

	got := h.waitConditions("c-0-1", "Ready=False/PodNotReady PersistentVolumeClaimReady=True/PersistentVolumeClaimBound PersistentVolumeClaimSizeReady=True/PersistentVolumeClaimSizeSatisfied")
	if m := condOf(got, valkeyv1.NodeConditionReady).Message; m != "pod c-0-1-0 does not exist yet" {
		t.Errorf("Ready message %q", m)
	}
	h.statefulSet("c-0-1")
	// reclaimPolicy Delete: the labelled claim is adopted, controlled by the node.
	testenv.WaitFor(t, "the labelled claim adopted", func() bool {
		p := &corev1.PersistentVolumeClaim{}
		return env.Client.Get(context.Background(), h.key("c-0-1-data"), p) == nil && controllerUID(p) == string(got.UID)
	})
	// Switched to Retain, the node lets go of the claim: its owner reference goes.
	update(h, &valkeyv1.ValkeyNode{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "c-0-1"}}, func(n *valkeyv1.ValkeyNode) {
		n.Spec.Persistence.ReclaimPolicy = valkeyv1.ReclaimRetain
	})
	testenv.WaitFor(t, "the claim released by reclaimPolicy Retain", func() bool {
		p := &corev1.PersistentVolumeClaim{}
		return env.Client.Get(context.Background(), h.key("c-0-1-data"), p) == nil && len(p.OwnerReferences) == 0
	})
	// Retain from the start: a claim of its own without owner, which outlives the node.
	h.statefulSet("c-0-3")
	if p := h.pvc("c-0-3-data"); len(p.OwnerReferences) != 0 || p.Labels[resources.LabelNode] != "c-0-3" {
		t.Errorf("retained PVC owners %+v labels %v", p.OwnerReferences, p.Labels)
	}

	got = h.waitConditions("c-0-2", "Ready=False/PersistentVolumeClaimPending PersistentVolumeClaimReady=False/PersistentVolumeClaimPending PersistentVolumeClaimSizeReady=False/PersistentVolumeClaimResizePending")
	if want := "PVC c-0-2-data exists without the label valkey.io/node=c-0-2; the node does not adopt a claim it did not create"; condOf(got, valkeyv1.NodeConditionPersistentVolumeClaimReady).Message != want ||
		condOf(got, valkeyv1.NodeConditionReady).Message != want {
		t.Errorf("foreign claim: %s", describe(got))
	}
	if err := env.Client.Get(context.Background(), h.key("c-0-2"), &appsv1.StatefulSet{}); err == nil {
		t.Error("a StatefulSet was created over someone else's claim")
	}
	if other := h.pvc("c-0-2-data"); other.Labels["app"] != "other" || len(other.ManagedFields) != 1 {
		t.Errorf("the foreign claim was written: %+v", other.ObjectMeta)
	}

	// A StatefulSet of the node's name that is not the node's is left alone.
	foreign := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "c-0-4"}, Spec: appsv1.StatefulSetSpec{
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "other"}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "other"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}}}
	h.create(foreign)
	h.create(h.node("c-0-4", nil))
	got = h.waitConditions("c-0-4", "Ready=False/PodNotReady")
	if want := "cannot run the node: StatefulSet " + h.ns + "/c-0-4 exists without a controller"; condOf(got, valkeyv1.NodeConditionReady).Message != want {
		t.Errorf("Ready message %q, want %q", condOf(got, valkeyv1.NodeConditionReady).Message, want)
	}
	if s := h.statefulSet("c-0-4"); s.Spec.Template.Labels["app"] != "other" || len(s.ManagedFields) != 1 {
		t.Errorf("the foreign StatefulSet was written: %+v", s.ObjectMeta)
	}

	// Growing on a class without expansion: the API server refuses, the condition says why.
	update(h, &valkeyv1.ValkeyNode{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "c-0-1"}}, func(n *valkeyv1.ValkeyNode) {
		n.Spec.Persistence.Size = resource.MustParse("3Gi")
	})
	got = h.waitConditions("c-0-1", "Ready=False/PodNotReady PersistentVolumeClaimReady=True/PersistentVolumeClaimBound PersistentVolumeClaimSizeReady=False/PersistentVolumeClaimResizeInfeasible")
	if m := condOf(got, valkeyv1.NodeConditionPersistentVolumeClaimSizeReady).Message; !strings.HasPrefix(m, "PVC c-0-1-data cannot grow from 1Gi to 3Gi: ") ||
		!strings.Contains(m, "storageclass that provisions the pvc must support resize") {
		t.Errorf("size message %q", m)
	}
}

// TestLiveConfig applies live.conf to a real server, reports a refused value with the
// server's own message and one Warning event, recovers when it is fixed, re-applies to a
// restarted server, and drops the condition when no live key is left.
func TestLiveConfig(t *testing.T) {
	h := start(t)
	srv := startServer(t)
	h.serve("c-0-0", srv)
	h.create(h.configMap("maxmemory-policy allkeys-lru\n"))
	n := h.node("c-0-0", nil)
	h.create(n)
	sts := h.statefulSet("c-0-0")
	pod := h.runPod("c-0-0-0", sts.Spec.Template, "rev1", true)
	h.rollOut("c-0-0", "rev1")

	got := h.waitConditions("c-0-0", "Ready=True/PodRunning LiveConfigApplied=True/Applied")
	if got.Status.AppliedConfigHash != hash("maxmemory-policy allkeys-lru\n") {
		t.Errorf("appliedConfigHash %q", got.Status.AppliedConfigHash)
	}
	if v := srv.configGet(t, "maxmemory-policy"); v != "allkeys-lru" {
		t.Errorf("maxmemory-policy on the server: %q", v)
	}

	// What the server answers to the bad value, asked directly.
	c, err := srv.admin()
	if err != nil {
		t.Fatal(err)
	}
	refusal := c.ConfigSet(context.Background(), [][2]string{{"maxmemory-policy", "nonsense"}})
	c.Close()
	if refusal == nil || !strings.Contains(refusal.Error(), "maxmemory-policy") {
		t.Fatalf("the server accepted maxmemory-policy nonsense: %v", refusal)
	}
	update(h, h.configMap(""), func(cm *corev1.ConfigMap) { cm.Data[resources.ConfigKeyLive] = "maxmemory-policy nonsense\n" })
	got = h.waitConditions("c-0-0", "Ready=True/PodRunning LiveConfigApplied=False/ApplyFailed")
	if m := condOf(got, valkeyv1.NodeConditionLiveConfigApplied).Message; m != refusal.Error() {
		t.Errorf("ApplyFailed message %q, want the server's %q", m, refusal.Error())
	}
	if got.Status.AppliedConfigHash != hash("maxmemory-policy allkeys-lru\n") {
		t.Errorf("appliedConfigHash moved to a config that failed: %q", got.Status.AppliedConfigHash)
	}
	testenv.WaitFor(t, "a LiveConfigApplyFailed event", func() bool { return len(h.warnings(valkeyv1.EventLiveConfigApplyFailed)) > 0 })
	// Retries continue with back-off (200ms doubling to 2s) without a second event.
	time.Sleep(4 * time.Second)
	evs := h.warnings(valkeyv1.EventLiveConfigApplyFailed)
	if len(evs) != 1 {
		t.Fatalf("%d LiveConfigApplyFailed events, want 1: %+v", len(evs), evs)
	}
	e := evs[0]
	if e.Regarding.Kind != "ValkeyNode" || e.Regarding.Name != "c-0-0" || e.Related == nil || e.Related.Kind != "ValkeyCluster" ||
		e.Related.Name != "c" || !strings.Contains(e.Note, refusal.Error()) {
		t.Errorf("event regarding %+v related %+v note %q", e.Regarding, e.Related, e.Note)
	}
	if e.Series != nil {
		t.Errorf("the event was repeated: series %+v", e.Series)
	}

	update(h, h.configMap(""), func(cm *corev1.ConfigMap) { cm.Data[resources.ConfigKeyLive] = "maxmemory-policy volatile-lru\n" })
	h.waitConditions("c-0-0", "Ready=True/PodRunning LiveConfigApplied=True/Applied")
	if v := srv.configGet(t, "maxmemory-policy"); v != "volatile-lru" {
		t.Errorf("maxmemory-policy on the server after the fix: %q", v)
	}

	// The server restarts in place (the container's restart count moves) and starts with
	// its default, as its config file here lacks the live key: the node controller
	// applies live.conf again.
	srv.Restart()
	if v := srv.configGet(t, "maxmemory-policy"); v != "noeviction" {
		t.Fatalf("the restarted server kept maxmemory-policy %q", v)
	}
	h.setPodStatus(pod, true, 1)
	testenv.WaitFor(t, "volatile-lru re-applied to the restarted server", func() bool { return srv.configGet(t, "maxmemory-policy") == "volatile-lru" })

	update(h, h.configMap(""), func(cm *corev1.ConfigMap) { cm.Data[resources.ConfigKeyLive] = "" })
	got = h.waitConditions("c-0-0", "Ready=True/PodRunning")
	if got.Status.AppliedConfigHash != "" {
		t.Errorf("appliedConfigHash %q with no live keys", got.Status.AppliedConfigHash)
	}
}

// TestWrongPassword: the operator cannot log in (a wrong internal Secret), so the live
// config cannot be applied: the condition and one event carry the server's refusal, and
// the node recovers once the password is right.
func TestWrongPassword(t *testing.T) {
	h := start(t)
	srv := startServer(t)
	h.serve("c-0-0", srv)
	h.setPassword("wrong")
	h.create(h.configMap("maxmemory-policy allkeys-lru\n"))
	h.create(h.node("c-0-0", nil))
	sts := h.statefulSet("c-0-0")
	h.runPod("c-0-0-0", sts.Spec.Template, "rev1", true)
	h.rollOut("c-0-0", "rev1")

	got := h.waitConditions("c-0-0", "Ready=True/PodRunning LiveConfigApplied=False/ApplyFailed")
	if m := condOf(got, valkeyv1.NodeConditionLiveConfigApplied).Message; !strings.Contains(m, "WRONGPASS") {
		t.Errorf("ApplyFailed message %q does not carry the server's refusal", m)
	}
	if got.Status.ValkeyNodeID != "" || got.Status.Role != "" {
		t.Errorf("identity reported without a login: %s", describe(got))
	}
	testenv.WaitFor(t, "a LiveConfigApplyFailed event", func() bool { return len(h.warnings(valkeyv1.EventLiveConfigApplyFailed)) > 0 })
	time.Sleep(2 * time.Second) // retries (back-off 200ms to 2s) add no event
	if evs := h.warnings(valkeyv1.EventLiveConfigApplyFailed); len(evs) != 1 {
		t.Errorf("%d LiveConfigApplyFailed events while failing, want 1: %+v", len(evs), evs)
	}

	h.setPassword(operatorPassword)
	h.waitConditions("c-0-0", "Ready=True/PodRunning LiveConfigApplied=True/Applied")
	if v := srv.configGet(t, "maxmemory-policy"); v != "allkeys-lru" {
		t.Errorf("maxmemory-policy %q", v)
	}
	testenv.WaitFor(t, "the server's identity", func() bool { return h.getNode("c-0-0").Status.ValkeyNodeID == srv.myID(t) })
	if n := len(h.warnings(valkeyv1.EventLiveConfigApplyFailed)); n != 1 {
		t.Errorf("%d LiveConfigApplyFailed events, want 1", n)
	}
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// TestACLUsers applies users.acl to a real server: listed users are set (and can log in),
// users no longer listed are deleted (never default or the operator's own), and a line the
// server refuses gives a Warning event and keeps the last applied hash.
func TestACLUsers(t *testing.T) {
	h := start(t)
	srv := startServer(t)
	h.serve("c-0-0", srv)
	h.create(h.configMap(""))
	base := "user default on nopass ~* &* +@all\n" +
		"user " + resources.OperatorUser + " on #" + sha(operatorPassword) + " ~* &* +@all\n"
	app1 := "user app1 on #" + sha("p1") + " ~app1:* +@read +@write\n"
	app2 := "user app2 on #" + sha("p2") + " ~* +@read\n"
	h.create(h.aclSecret(base + app1 + app2))

	// A user nobody lists, left on the server.
	c, err := srv.admin()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ACLSetUser(context.Background(), "stray", []string{"on", "nopass", "+@all"}); err != nil {
		t.Fatal(err)
	}
	c.Close()

	n := h.node("c-0-0", nil)
	h.create(n)
	sts := h.statefulSet("c-0-0")
	h.runPod("c-0-0-0", sts.Spec.Template, "rev1", true)
	h.rollOut("c-0-0", "rev1")

	users := func() []string {
		c, err := srv.admin()
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		u, err := c.ACLUsers(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(u)
		return u
	}
	h.waitNode("c-0-0", "records the applied users", func(n *valkeyv1.ValkeyNode) bool {
		return n.Status.AppliedACLHash == hash(base+app1+app2)
	})
	if u := users(); !slices.Equal(u, []string{"app1", "app2", "default", resources.OperatorUser}) {
		t.Errorf("users on the server %v", u)
	}
	login, err := valkey.DialNodeAdmin(srv.Addr, valkey.Options{Username: "app1", Password: "p1"})
	if err != nil {
		t.Fatalf("app1 cannot log in with its password: %v", err)
	}
	login.Close()

	update(h, h.aclSecret(""), func(s *corev1.Secret) { s.Data[resources.ACLKeyUsers] = []byte(base + app1) })
	h.waitNode("c-0-0", "records the new users", func(n *valkeyv1.ValkeyNode) bool {
		return n.Status.AppliedACLHash == hash(base+app1)
	})
	if u := users(); !slices.Equal(u, []string{"app1", "default", resources.OperatorUser}) {
		t.Errorf("users after removing app2: %v", u)
	}

	bad := base + app1 + "user app3 on nopass +nosuchcommand\n"
	update(h, h.aclSecret(""), func(s *corev1.Secret) { s.Data[resources.ACLKeyUsers] = []byte(bad) })
	testenv.WaitFor(t, "a UsersACLApplyFailed event", func() bool { return len(h.warnings(EventUsersACLApplyFailed)) > 0 })
	ev := h.warnings(EventUsersACLApplyFailed)[0]
	if !strings.Contains(ev.Note, "ACL SETUSER app3") || ev.Regarding.Name != "c-0-0" || ev.Related == nil || ev.Related.Name != "c" {
		t.Errorf("event %+v", ev)
	}
	if got := h.getNode("c-0-0"); got.Status.AppliedACLHash != hash(base+app1) {
		t.Errorf("appliedACLHash moved to users that failed: %q", got.Status.AppliedACLHash)
	}
	fixed := base + app1 + "user app3 on nopass +get\n"
	update(h, h.aclSecret(""), func(s *corev1.Secret) { s.Data[resources.ACLKeyUsers] = []byte(fixed) })
	h.waitNode("c-0-0", "applies the fixed users", func(n *valkeyv1.ValkeyNode) bool {
		return n.Status.AppliedACLHash == hash(fixed)
	})
	if u := users(); !slices.Equal(u, []string{"app1", "app3", "default", resources.OperatorUser}) {
		t.Errorf("users after the fix: %v", u)
	}
}

// TestDeploymentReplicaRole runs a node as a Deployment whose server replicates another
// one: the pod is found by label, and the role is the server's, replica.
func TestDeploymentReplicaRole(t *testing.T) {
	h := start(t)
	primary, replica := startServer(t), startServer(t)
	h.serve("c-0-1", replica)
	h.create(h.configMap(""))

	pc, err := valkey.Dial(primary.Addr, valkey.Options{Username: resources.OperatorUser, Password: operatorPassword})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	rc, err := valkey.Dial(replica.Addr, valkey.Options{Username: resources.OperatorUser, Password: operatorPassword})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	ctx := context.Background()
	if err := rc.Meet(ctx, primary.Addr, primary.BusPort); err != nil {
		t.Fatal(err)
	}
	primaryID := primary.myID(t)
	testenv.Eventually(t, 30*time.Second, "the replica replicates the primary", func() (bool, string) {
		err := rc.Replicate(ctx, primaryID)
		return err == nil, fmt.Sprint(err)
	})

	n := h.node("c-0-1", func(n *valkeyv1.ValkeyNode) {
		n.Spec.NodeIndex, n.Spec.RoleHint, n.Spec.WorkloadType = 1, valkeyv1.RoleReplica, valkeyv1.WorkloadTypeDeployment
	})
	h.create(n)
	var dep appsv1.Deployment
	testenv.WaitFor(t, "the Deployment", func() bool { return env.Client.Get(ctx, h.key("c-0-1"), &dep) == nil })
	if dep.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType || controllerUID(&dep) != string(n.UID) {
		t.Errorf("deployment strategy %s controller %s", dep.Spec.Strategy.Type, controllerUID(&dep))
	}
	if err := env.Client.Get(ctx, h.key("c-0-1"), &appsv1.StatefulSet{}); err == nil {
		t.Error("a StatefulSet too")
	}
	h.runPod("c-0-1-5d8f7-abcde", dep.Spec.Template, "", true)
	updateStatus(h, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "c-0-1"}}, func(d *appsv1.Deployment) {
		d.Status.ObservedGeneration = d.Generation
		d.Status.Replicas, d.Status.UpdatedReplicas, d.Status.ReadyReplicas, d.Status.AvailableReplicas = 1, 1, 1, 1
	})
	got := h.waitNode("c-0-1", "is a Ready replica", func(n *valkeyv1.ValkeyNode) bool {
		return n.Status.Ready && n.Status.Role == valkeyv1.RoleReplica
	})
	if got.Status.PodName != "c-0-1-5d8f7-abcde" || got.Status.ValkeyNodeID != replica.myID(t) {
		t.Errorf("status %s", describe(got))
	}
	if len(got.Status.Conditions) != 1 {
		t.Errorf("a node without persistence or live keys has only Ready: %s", describe(got))
	}
}

// TestPodCacheHoldsNodePodsOnly: with CacheByObject the manager caches the pods of
// ValkeyNodes and no other.
func TestPodCacheHoldsNodePodsOnly(t *testing.T) {
	ns := testenv.NewNamespace(t, env.Client, "vkn-cache-")
	mgr := env.StartManager(t, nil, testenv.InNamespaces(ns), func(o *ctrl.Options) { o.Cache.ByObject = CacheByObject() })
	pod := func(name string, labels map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	}
	// The other pod first: once ours is in the cache, the watch has delivered the other
	// too, had the cache taken it.
	for _, p := range []*corev1.Pod{pod("other", map[string]string{"app": "x"}), pod("ours", map[string]string{resources.LabelNode: "c-0-0"})} {
		if err := env.Client.Create(context.Background(), p); err != nil {
			t.Fatal(err)
		}
	}
	testenv.WaitFor(t, "the node's pod in the cache", func() bool {
		return mgr.GetClient().Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "ours"}, &corev1.Pod{}) == nil
	})
	var list corev1.PodList
	if err := mgr.GetClient().List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Name != "ours" {
		t.Errorf("cached pods %d, want only ours", len(list.Items))
	}
}
