package controller_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/services/memgraph-operator/internal/controller"
	"github.com/opsuite/suite/shared/testenv"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// storageClass creates a cluster-scoped class for the test.
func (h *harness) storageClass(expandable bool) string {
	h.t.Helper()
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%v", h.ns, expandable)},
		Provisioner: "example.com/test", AllowVolumeExpansion: ptr.To(expandable)}
	if err := h.c.Create(context.Background(), sc); err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { _ = h.c.Delete(context.Background(), sc) })
	return sc.Name
}

// claimsAndPods plays the StatefulSet controller for sts's existing members: a bound claim
// per template and ordinal (as the claim template asks) and a running pod it controls.
func (h *harness) claimsAndPods(stsName string) map[string]types.UID {
	h.t.Helper()
	ctx := context.Background()
	sts := h.sts(stsName)
	uids := map[string]types.UID{}
	for i := int32(0); i < *sts.Spec.Replicas; i++ {
		for _, tpl := range sts.Spec.VolumeClaimTemplates {
			pvc := &corev1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%s-%d", tpl.Name, stsName, i), Namespace: h.ns, Labels: tpl.Labels},
				Spec:       *tpl.Spec.DeepCopy(),
			}
			if err := h.c.Create(ctx, pvc); err != nil {
				h.t.Fatal(err)
			}
			pvc.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, Capacity: tpl.Spec.Resources.Requests}
			if err := h.c.Status().Update(ctx, pvc); err != nil {
				h.t.Fatal(err)
			}
		}
		labels := map[string]string{appsv1.ControllerRevisionHashLabelKey: "r1"}
		for k, v := range sts.Spec.Selector.MatchLabels {
			labels[k] = v
		}
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", stsName, i), Namespace: h.ns, Labels: labels,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: sts.Name, UID: sts.UID, Controller: ptr.To(true)}}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "memgraph", Image: "memgraph/memgraph:3.12.0"}}},
		}
		if err := h.c.Create(ctx, pod); err != nil {
			h.t.Fatal(err)
		}
		uids[pod.Name] = pod.UID
	}
	return uids
}

func (h *harness) claimSize(name string) string {
	h.t.Helper()
	pvc := &corev1.PersistentVolumeClaim{}
	if err := h.c.Get(context.Background(), client.ObjectKey{Namespace: h.ns, Name: name}, pvc); err != nil {
		h.t.Fatal(err)
	}
	q := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	return q.String()
}

func templateSizes(sts *appsv1.StatefulSet) []string {
	var out []string
	for _, t := range sts.Spec.VolumeClaimTemplates {
		q := t.Spec.Resources.Requests[corev1.ResourceStorage]
		out = append(out, t.Name+"="+q.String())
	}
	return out
}

// TestVolumeGrowth: a grown data lib size raises every data lib claim, then replaces the
// data StatefulSet by an orphan deletion (the test plays the garbage collector) and
// recreates it with the new claim template; pods and claims are never deleted, the
// coordinators' StatefulSet is untouched, conditions say Resizing then Resized; a shrink is
// refused by the schema; a class without expansion leaves everything as it was and says
// VolumeExpansionUnsupported naming the class.
func TestVolumeGrowth(t *testing.T) {
	h := start(t, "mg-volumes")
	ctx := context.Background()
	grow, fixed := h.storageClass(true), h.storageClass(false)

	c := &memgraphv1.MemgraphCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "vol", Namespace: h.ns},
		Spec: memgraphv1.MemgraphClusterSpec{
			Coordinators: 3, DataInstances: 2,
			Secrets: memgraphv1.SecretsSpec{Name: "memgraph-license"},
			Storage: memgraphv1.StorageSpec{Data: memgraphv1.RoleStorage{LibStorageClassName: &grow, LogStorageClassName: &grow}},
		},
	}
	if err := h.c.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	h.waitCondition("vol", memgraphv1.ConditionReady, metav1.ConditionFalse, memgraphv1.ReasonWorkloadsNotReady)
	pods := h.claimsAndPods("vol-data")
	h.podsRun("vol-coordinator")
	h.podsRun("vol-data")
	c = h.waitCondition("vol", memgraphv1.ConditionConverged, metav1.ConditionTrue, memgraphv1.ReasonConverged)
	if cond := meta.FindStatusCondition(c.Status.Conditions, controller.ConditionVolumesResized); cond != nil {
		t.Errorf("VolumesResized %+v before any size grew", cond)
	}
	oldData, oldCoord := h.sts("vol-data"), h.sts("vol-coordinator")

	c.Spec.Storage.Data.LibPVCSize = ptr.To(resource.MustParse("2Gi"))
	if err := h.c.Update(ctx, c); err != nil {
		t.Fatal(err)
	}
	h.waitCondition("vol", controller.ConditionVolumesResized, metav1.ConditionFalse, controller.ReasonVolumesResizing)
	testenv.Eventually(t, 30*time.Second, "the data StatefulSet orphan-deleted", func() (bool, string) {
		s := h.sts("vol-data")
		return s.DeletionTimestamp != nil && slices.Contains(s.Finalizers, metav1.FinalizerOrphanDependents), fmt.Sprintf("%v %v", s.DeletionTimestamp, s.Finalizers)
	})
	for i := range 2 {
		if got := h.claimSize(fmt.Sprintf("lib-vol-data-%d", i)); got != "2Gi" {
			t.Errorf("lib-vol-data-%d requests %s, want 2Gi", i, got)
		}
		if got := h.claimSize(fmt.Sprintf("log-vol-data-%d", i)); got != "256Mi" {
			t.Errorf("log-vol-data-%d requests %s, want 256Mi (unchanged)", i, got)
		}
	}
	got := h.cluster("vol")
	if cond := meta.FindStatusCondition(got.Status.Conditions, memgraphv1.ConditionConverged); cond == nil || cond.Reason != controller.ReasonVolumesResizing {
		t.Errorf("Converged %+v while the StatefulSet is replaced", cond)
	}
	// The operator does not touch the StatefulSet in deletion (no apply, no second delete).
	time.Sleep(time.Second)
	if s := h.sts("vol-data"); s.UID != oldData.UID || !slices.Equal(templateSizes(s), templateSizes(oldData)) {
		t.Errorf("the StatefulSet in deletion changed: %v", templateSizes(s))
	}

	// The garbage collector orphans the pods and removes the StatefulSet.
	for name := range pods {
		p := &corev1.Pod{}
		if err := h.c.Get(ctx, client.ObjectKey{Namespace: h.ns, Name: name}, p); err != nil {
			t.Fatalf("pod %s: %v", name, err)
		}
		p.OwnerReferences = nil
		if err := h.c.Update(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	s := h.sts("vol-data")
	s.Finalizers = nil
	if err := h.c.Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the data StatefulSet recreated", func() (bool, string) {
		s := &appsv1.StatefulSet{}
		if err := h.c.Get(ctx, client.ObjectKey{Namespace: h.ns, Name: "vol-data"}, s); err != nil {
			return false, err.Error()
		}
		return s.UID != oldData.UID && s.DeletionTimestamp == nil, string(s.UID)
	})
	if got := templateSizes(h.sts("vol-data")); !slices.Equal(got, []string{"lib=2Gi", "log=256Mi"}) {
		t.Errorf("recreated templates %v", got)
	}
	if ref := metav1.GetControllerOf(h.sts("vol-data")); ref == nil || ref.Name != "vol" {
		t.Errorf("recreated StatefulSet controller %+v", ref)
	}
	if s := h.sts("vol-coordinator"); s.UID != oldCoord.UID {
		t.Error("the coordinators' StatefulSet was replaced though its sizes did not change")
	}
	h.podsRun("vol-data")
	// The storage driver has not expanded anything yet (none runs here): still resizing.
	got = h.waitCondition("vol", controller.ConditionVolumesResized, metav1.ConditionFalse, controller.ReasonVolumesResizing)
	if msg := meta.FindStatusCondition(got.Status.Conditions, controller.ConditionVolumesResized).Message; !strings.Contains(msg, "still expanding") {
		t.Errorf("VolumesResized message %q while the claims expand", msg)
	}
	// Play the resizer: lib-vol-data-0 expanded online, lib-vol-data-1 waits for its pod.
	h.expanded("lib-vol-data-1", "2Gi", true)
	h.waitConditionMessage("vol", controller.ConditionVolumesResized, "lib-vol-data-1")
	h.expanded("lib-vol-data-0", "2Gi", false)
	h.expanded("lib-vol-data-1", "2Gi", false)
	h.waitCondition("vol", controller.ConditionVolumesResized, metav1.ConditionTrue, controller.ReasonVolumesResized)
	h.waitCondition("vol", memgraphv1.ConditionConverged, metav1.ConditionTrue, memgraphv1.ReasonConverged)
	for name, uid := range pods {
		p := &corev1.Pod{}
		if err := h.c.Get(ctx, client.ObjectKey{Namespace: h.ns, Name: name}, p); err != nil || p.UID != uid || p.DeletionTimestamp != nil {
			t.Errorf("pod %s: %v (uid %s, want %s)", name, err, p.UID, uid)
		}
	}
	var pvcs corev1.PersistentVolumeClaimList
	if err := h.c.List(ctx, &pvcs, client.InNamespace(h.ns)); err != nil || len(pvcs.Items) != 4 {
		t.Errorf("%d claims (%v), want the 4 created", len(pvcs.Items), err)
	}
	h.waitEvent("vol", controller.ReasonVolumesResizing)

	// Shrinking is refused by the schema.
	c = h.cluster("vol")
	c.Spec.Storage.Data.LibPVCSize = ptr.To(resource.MustParse("1Gi"))
	if err := h.c.Update(ctx, c); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "can only grow") {
		t.Errorf("shrink: %v", err)
	}

	// A class without expansion: nothing changes, the condition names it.
	fx := &memgraphv1.MemgraphCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "fx", Namespace: h.ns},
		Spec: memgraphv1.MemgraphClusterSpec{
			Coordinators: 3, DataInstances: 1,
			Secrets: memgraphv1.SecretsSpec{Name: "memgraph-license"},
			Storage: memgraphv1.StorageSpec{Data: memgraphv1.RoleStorage{LibStorageClassName: &fixed}},
		},
	}
	if err := h.c.Create(ctx, fx); err != nil {
		t.Fatal(err)
	}
	h.waitCondition("fx", memgraphv1.ConditionReady, metav1.ConditionFalse, memgraphv1.ReasonWorkloadsNotReady)
	h.claimsAndPods("fx-data")
	h.podsRun("fx-coordinator")
	h.podsRun("fx-data")
	fx = h.waitCondition("fx", memgraphv1.ConditionConverged, metav1.ConditionTrue, memgraphv1.ReasonConverged)
	fxData := h.sts("fx-data")
	fx.Spec.Storage.Data.LibPVCSize = ptr.To(resource.MustParse("3Gi"))
	if err := h.c.Update(ctx, fx); err != nil {
		t.Fatal(err)
	}
	fx = h.waitCondition("fx", controller.ConditionVolumesResized, metav1.ConditionFalse, controller.ReasonVolumeExpansionUnsupported)
	if msg := meta.FindStatusCondition(fx.Status.Conditions, controller.ConditionVolumesResized).Message; !strings.Contains(msg, fmt.Sprintf("%q", fixed)) || !strings.Contains(msg, "allowVolumeExpansion: true") {
		t.Errorf("VolumeExpansionUnsupported message %q", msg)
	}
	h.waitEvent("fx", controller.ReasonVolumeExpansionUnsupported)
	if s := h.sts("fx-data"); s.UID != fxData.UID || s.DeletionTimestamp != nil || !slices.Equal(templateSizes(s), []string{"lib=1Gi", "log=256Mi"}) {
		t.Errorf("fx-data changed: %v %v", s.DeletionTimestamp, templateSizes(s))
	}
	if got := h.claimSize("lib-fx-data-0"); got != "1Gi" {
		t.Errorf("lib-fx-data-0 requests %s on a class without expansion", got)
	}
}

// expanded plays the resizer: the claim's capacity reaches size, or (fsPending) the
// volume is expanded but waits for its pod to grow the file system.
func (h *harness) expanded(name, size string, fsPending bool) {
	h.t.Helper()
	ctx := context.Background()
	pvc := &corev1.PersistentVolumeClaim{}
	if err := h.c.Get(ctx, client.ObjectKey{Namespace: h.ns, Name: name}, pvc); err != nil {
		h.t.Fatal(err)
	}
	if fsPending {
		pvc.Status.Conditions = []corev1.PersistentVolumeClaimCondition{{Type: corev1.PersistentVolumeClaimFileSystemResizePending, Status: corev1.ConditionTrue}}
	} else {
		pvc.Status.Conditions = nil
		pvc.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}
	}
	if err := h.c.Status().Update(ctx, pvc); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) waitConditionMessage(cluster, condType, fragment string) {
	h.t.Helper()
	testenv.Eventually(h.t, 30*time.Second, condType+" naming "+fragment, func() (bool, string) {
		c := meta.FindStatusCondition(h.cluster(cluster).Status.Conditions, condType)
		return c != nil && strings.Contains(c.Message, fragment), fmt.Sprintf("%+v", c)
	})
}
