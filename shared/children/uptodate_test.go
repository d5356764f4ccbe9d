package children

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
)

func TestUpToDate(t *testing.T) {
	owner := []metav1.OwnerReference{{APIVersion: "v1", Kind: "Widget", Name: "w", UID: "u1", Controller: ptr.To(true)}}
	cm := func(labels, annotations, data map[string]string, owners []metav1.OwnerReference) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x", Labels: labels, Annotations: annotations, OwnerReferences: owners}, Data: data}
	}
	want := cm(map[string]string{"l": "1"}, map[string]string{"a": "1"}, map[string]string{"k": "v"}, owner)
	for _, tc := range []struct {
		name string
		live *corev1.ConfigMap
		same bool
	}{
		{"identical", cm(map[string]string{"l": "1"}, map[string]string{"a": "1"}, map[string]string{"k": "v"}, owner), true},
		{"extra label, annotation and key", cm(map[string]string{"l": "1", "m": "2"}, map[string]string{"a": "1", "b": "2"}, map[string]string{"k": "v", "o": "p"}, owner), true},
		{"label differs", cm(map[string]string{"l": "2"}, map[string]string{"a": "1"}, map[string]string{"k": "v"}, owner), false},
		{"annotation missing", cm(map[string]string{"l": "1"}, nil, map[string]string{"k": "v"}, owner), false},
		{"value differs", cm(map[string]string{"l": "1"}, map[string]string{"a": "1"}, map[string]string{"k": "w"}, owner), false},
		{"no controller", cm(map[string]string{"l": "1"}, map[string]string{"a": "1"}, map[string]string{"k": "v"}, nil), false},
		{"other controller", cm(map[string]string{"l": "1"}, map[string]string{"a": "1"}, map[string]string{"k": "v"},
			[]metav1.OwnerReference{{APIVersion: "v1", Kind: "Widget", Name: "w", UID: "u2", Controller: ptr.To(true)}}), false},
	} {
		if got := UpToDate(want, tc.live); got != tc.same {
			t.Errorf("%s: UpToDate = %v, want %v", tc.name, got, tc.same)
		}
	}
}

func TestContains(t *testing.T) {
	for _, tc := range []struct {
		name      string
		got, want any
		ok        bool
	}{
		{"scalar", int64(1), int64(1), true},
		{"scalar differs", int64(1), int64(2), false},
		{"map extra key", map[string]any{"a": int64(1), "b": "x"}, map[string]any{"a": int64(1)}, true},
		{"map missing key", map[string]any{"b": "x"}, map[string]any{"a": int64(1)}, false},
		{"list elements hold defaults", []any{map[string]any{"name": "c", "defaulted": "x"}}, []any{map[string]any{"name": "c"}}, true},
		{"list longer", []any{"a", "b"}, []any{"a"}, false},
		{"list order", []any{"b", "a"}, []any{"a", "b"}, false},
		{"type differs", "1", int64(1), false},
		{"nil wanted and present", map[string]any{"a": nil}, map[string]any{"a": nil}, true},
	} {
		if got := Contains(tc.got, tc.want); got != tc.ok {
			t.Errorf("%s: Contains = %v, want %v", tc.name, got, tc.ok)
		}
	}
}

func TestEmptyIsFreshOfTheSameKind(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Data: map[string]string{"k": "v"}}
	if got := empty(cm); got == cm || got.Name != "" || got.Data != nil {
		t.Errorf("empty(ConfigMap) = %+v", got)
	}
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"a": "b"}}}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: "test.opsuite.io", Version: "v1", Kind: "Widget"})
	if got := empty(u); got == u || got.GroupVersionKind() != u.GroupVersionKind() || got.Object["spec"] != nil {
		t.Errorf("empty(Unstructured) = %+v", got.Object)
	}
}
