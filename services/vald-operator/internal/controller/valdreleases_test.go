package controller

import (
	"context"
	"testing"
	"time"

	valdv1 "github.com/opsuite/suite/api/vald/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func TestUpToDate(t *testing.T) {
	owner := []metav1.OwnerReference{{APIVersion: "vald.vdaas.org/v1", Kind: "ValdOperatorRelease", Name: "v", UID: "u1", Controller: ptr.To(true)}}
	vr := func(spec string, labels map[string]string, owners []metav1.OwnerReference) *valdv1.ValdRelease {
		return &valdv1.ValdRelease{
			ObjectMeta: metav1.ObjectMeta{Name: "x", Labels: labels, Annotations: map[string]string{AnnotationValuesHash: "h"}, OwnerReferences: owners},
			Spec:       &apiextensionsv1.JSON{Raw: []byte(spec)},
		}
	}
	labels := map[string]string{valdv1.LabelManagedGeneration: "2"}
	want := vr(`{"agent":{"ngt":{"dimension":8},"tolerations":[{"key":"a"}]}}`, labels, owner)
	cases := []struct {
		name    string
		current *valdv1.ValdRelease
		same    bool
	}{
		{"identical", vr(`{"agent":{"ngt":{"dimension":8},"tolerations":[{"key":"a"}]}}`, labels, owner), true},
		{"extra keys from others", vr(`{"agent":{"ngt":{"dimension":8,"x":1},"tolerations":[{"key":"a"}]},"image":"v"}`, map[string]string{valdv1.LabelManagedGeneration: "2", "team": "a"}, owner), true},
		{"changed value", vr(`{"agent":{"ngt":{"dimension":9},"tolerations":[{"key":"a"}]}}`, labels, owner), false},
		{"list element added", vr(`{"agent":{"ngt":{"dimension":8},"tolerations":[{"key":"a"},{"key":"b"}]}}`, labels, owner), false},
		{"missing key", vr(`{"agent":{"tolerations":[{"key":"a"}]}}`, labels, owner), false},
		{"old generation", vr(`{"agent":{"ngt":{"dimension":8},"tolerations":[{"key":"a"}]}}`, map[string]string{valdv1.LabelManagedGeneration: "1"}, owner), false},
		{"no owner", vr(`{"agent":{"ngt":{"dimension":8},"tolerations":[{"key":"a"}]}}`, labels, nil), false},
		{"another controller", vr(`{"agent":{"ngt":{"dimension":8},"tolerations":[{"key":"a"}]}}`, labels, []metav1.OwnerReference{{APIVersion: "vald.vdaas.org/v1", Kind: "ValdOperatorRelease", Name: "v", UID: "u2", Controller: ptr.To(true)}}), false},
		{"a label missing", vr(`{"agent":{"ngt":{"dimension":8},"tolerations":[{"key":"a"}]}}`, nil, owner), false},
	}
	for _, tc := range cases {
		if got := upToDate(want, tc.current); got != tc.same {
			t.Errorf("%s: upToDate = %v, want %v", tc.name, got, tc.same)
		}
		// The controller's own check, which compares the spec's bytes first, agrees.
		if got := valdReleaseUpToDate(want, tc.current); got != tc.same {
			t.Errorf("%s: valdReleaseUpToDate = %v, want %v", tc.name, got, tc.same)
		}
	}
	changedHash := vr(`{"agent":{"ngt":{"dimension":8},"tolerations":[{"key":"a"}]}}`, labels, owner)
	changedHash.Annotations[AnnotationValuesHash] = "other"
	if upToDate(want, changedHash) || valdReleaseUpToDate(want, changedHash) {
		t.Error("a different values hash (operator configuration changed) must be applied")
	}
}

// TestNameTakenByAnotherRelease: a name held by another release is not the spec's fault:
// the second release waits (Pending, retried with back-off) and the event that frees the
// name wakes it. Retries are set an hour apart, so only that event can converge it here.
func TestNameTakenByAnotherRelease(t *testing.T) {
	h := start(t, func(o *Options) { o.retryBaseDelay, o.RequeueAfter = time.Hour, time.Hour })
	h.create(h.release("first", "shared=1"))
	h.waitStatus("first", statusCompleted)
	h.create(h.release("second", "shared=2"))
	// Its first pass reaches WaitingCreateVrs and meets the name: generation 1 was never
	// applied, so observedGeneration stays 0.
	vor := h.waitRendered("second", "WaitingCreateVrs 1/3 Pending | WaitingClusterCreate=True/Succeeded WaitingCreateVrs=Unknown/Pending", 0)
	if msg := condition(vor, valdv1.ConditionWaitingCreateVrs).Message; msg != `ValdRelease "`+h.ns+`-shared" belongs to ValdOperatorRelease "first": rename the cluster, or delete that ValdRelease; waiting for the name.` {
		t.Errorf("message %q", msg)
	}
	res, err := h.r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: h.ns, Name: "second"}})
	if err != nil || res.RequeueAfter <= 0 {
		t.Errorf("Reconcile while the name is taken = %+v, %v; want a requeue and no error", res, err)
	}
	vrs := h.valdReleases()
	if len(vrs) != 1 || vrs[0].Labels[valdv1.LabelOperatorRelease] != "first" {
		t.Errorf("ValdReleases %+v", names(vrs))
	}
	h.waitStatus("first", statusCompleted)

	// The first release renames its cluster: it prunes the shared name, whose deletion
	// event wakes the second.
	h.update("first", func(v *valdv1.ValdOperatorRelease) { v.Spec.Infrastructure[0].Clusters[0].Name = "own" })
	h.waitStatus("second", statusCompleted)
	h.waitFor("each release with its own ValdRelease", func() bool {
		vrs := h.valdReleases()
		return names(vrs) == h.ns+"-own,"+h.ns+"-shared" && vrs[1].Labels[valdv1.LabelOperatorRelease] == "second"
	})

	// A release deleted while it waits is forgotten.
	shared := client.ObjectKey{Namespace: h.ns, Name: h.ns + "-shared"}
	third := h.release("third", "shared=3")
	h.create(third)
	h.waitFor("the third release to wait for the name", func() bool { return len(h.r.waiting.waitingFor(shared)) == 1 })
	if err := env.Client.Delete(context.Background(), third); err != nil {
		t.Fatal(err)
	}
	h.waitFor("the deleted release to be forgotten", func() bool { return len(h.r.waiting.waitingFor(shared)) == 0 })
}

// TestAdoption: a ValdRelease labelled for the release but without a controller (left by
// --cascade=orphan, or its owner reference removed) is adopted in place; one another
// controller holds is never taken, and is adopted once that controller lets go.
func TestAdoption(t *testing.T) {
	h := start(t, nil)
	h.create(h.release("vor", "a=1"))
	vor := h.waitStatus("vor", statusCompleted)

	orphan := h.valdReleases()[0]
	orphan.OwnerReferences = nil
	if err := env.Client.Update(context.Background(), &orphan); err != nil {
		t.Fatal(err)
	}
	h.waitFor("the orphan to be adopted", func() bool {
		vrs := h.valdReleases()
		owner := metav1.GetControllerOf(&vrs[0])
		return len(vrs) == 1 && vrs[0].UID == orphan.UID && owner != nil && owner.UID == vor.UID
	})

	// Another controller's ValdRelease carrying this release's label: left alone.
	other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "other-owner", Namespace: h.ns}}
	h.create(other)
	held := &valdv1.ValdRelease{ObjectMeta: metav1.ObjectMeta{
		Name: h.ns + "-b", Namespace: h.ns,
		Labels:          map[string]string{valdv1.LabelOperatorRelease: "vor"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: other.Name, UID: other.UID, Controller: ptr.To(true)}},
	}}
	h.create(held)
	h.update("vor", func(v *valdv1.ValdOperatorRelease) {
		v.Spec.Infrastructure[0].Clusters = append(v.Spec.Infrastructure[0].Clusters, valdv1.Cluster{Name: "b", ID: "2"})
	})
	vor = h.waitRendered("vor", "WaitingCreateVrs 1/3 Pending | WaitingClusterCreate=True/Succeeded WaitingCreateVrs=Unknown/Pending Completed=Unknown/Blocked", 1)
	if msg := condition(vor, valdv1.ConditionWaitingCreateVrs).Message; msg != `ValdRelease "`+held.Name+`" belongs to ConfigMap "other-owner": rename the cluster, or delete that ValdRelease; waiting for the name.` {
		t.Errorf("message %q", msg)
	}
	got := &valdv1.ValdRelease{}
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(held), got); err != nil {
		t.Fatal(err)
	}
	if owner := metav1.GetControllerOf(got); owner == nil || owner.UID != other.UID || got.Spec != nil || len(got.OwnerReferences) != 1 {
		t.Errorf("another controller's ValdRelease was touched: owners %+v, spec %v", got.OwnerReferences, got.Spec)
	}

	// That controller lets go: the release adopts the ValdRelease and completes.
	got.OwnerReferences = nil
	if err := env.Client.Update(context.Background(), got); err != nil {
		t.Fatal(err)
	}
	h.waitStatus("vor", statusCompleted)
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(held), got); err != nil {
		t.Fatal(err)
	}
	if owner := metav1.GetControllerOf(got); got.UID != held.UID || owner == nil || owner.UID != vor.UID || got.Labels[valdv1.LabelManagedGeneration] != "2" {
		t.Errorf("released ValdRelease: uid %s (was %s), owners %+v, labels %v", got.UID, held.UID, got.OwnerReferences, got.Labels)
	}
}

// TestPruneByOwnerReference: a ValdRelease the release controls is pruned when no longer
// built even without the release's label.
func TestPruneByOwnerReference(t *testing.T) {
	h := start(t, nil)
	h.create(h.release("vor", "a="))
	vor := h.waitStatus("vor", "WaitingClusterCreate 0/3 Pending | WaitingClusterCreate=Unknown/Pending")
	unlabelled := &valdv1.ValdRelease{ObjectMeta: metav1.ObjectMeta{
		Name: h.ns + "-gone", Namespace: h.ns,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: valdv1.GroupVersion.String(), Kind: "ValdOperatorRelease", Name: "vor", UID: vor.UID, Controller: ptr.To(true)}},
	}}
	h.create(unlabelled)
	// Owned by another release, unlabelled and not built: not this release's to prune.
	foreign := unlabelled.DeepCopy()
	foreign.Name, foreign.ResourceVersion, foreign.UID = h.ns+"-foreign", "", ""
	foreign.OwnerReferences[0].UID, foreign.OwnerReferences[0].Name = "0000-other", "other"
	h.create(foreign)

	h.update("vor", func(v *valdv1.ValdOperatorRelease) { v.Spec.Infrastructure[0].Clusters[0].ID = "1" })
	h.waitStatus("vor", statusCompleted)
	h.waitFor("the unlabelled ValdRelease to be pruned", func() bool { return names(h.valdReleases()) == h.ns+"-a,"+h.ns+"-foreign" })
}
