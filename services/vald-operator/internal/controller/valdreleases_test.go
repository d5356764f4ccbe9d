package controller

import (
	"testing"

	valdv1 "github.com/opsuite/suite/api/vald/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
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
	}
	for _, tc := range cases {
		if got := upToDate(want, tc.current); got != tc.same {
			t.Errorf("%s: upToDate = %v, want %v", tc.name, got, tc.same)
		}
	}
	changedHash := vr(`{"agent":{"ngt":{"dimension":8},"tolerations":[{"key":"a"}]}}`, labels, owner)
	changedHash.Annotations[AnnotationValuesHash] = "other"
	if upToDate(want, changedHash) {
		t.Error("a different values hash (operator configuration changed) must be applied")
	}
}

func TestNameTakenByAnotherRelease(t *testing.T) {
	h := start(t, nil)
	h.create(h.release("first", "shared=1"))
	h.waitStatus("first", statusCompleted)
	h.create(h.release("second", "shared=2"))
	vor := h.waitStatus("second", "WaitingCreateVrs 1/3 Failed | WaitingClusterCreate=True/Succeeded WaitingCreateVrs=False/Failed")
	if msg := condition(vor, valdv1.ConditionWaitingCreateVrs).Message; msg != `ValdRelease "`+h.ns+`-shared" exists and belongs to another owner: rename the cluster, or delete that ValdRelease.` {
		t.Errorf("message %q", msg)
	}
	vrs := h.valdReleases()
	if len(vrs) != 1 || vrs[0].Labels[valdv1.LabelOperatorRelease] != "first" {
		t.Errorf("ValdReleases %+v", names(vrs))
	}
	h.waitStatus("first", statusCompleted)
}
