package children_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/opsuite/suite/shared/children"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func TestOwnerByLabel(t *testing.T) {
	const owner, managedBy = "example.io/cluster", "app.kubernetes.io/managed-by"
	toCluster := children.OwnerByLabel(owner, map[string]string{managedBy: "example-operator"})
	pod := func(lbls map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c1-0", Labels: lbls}}
	}
	for _, tc := range []struct {
		name string
		lbls map[string]string
		want []reconcile.Request
	}{
		{"ours", map[string]string{owner: "c1", managedBy: "example-operator", "other": "x"},
			[]reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "c1"}}}},
		{"another operator's", map[string]string{owner: "c1", managedBy: "someone-else"}, nil},
		{"not labelled managed", map[string]string{owner: "c1"}, nil},
		{"no owner label", map[string]string{managedBy: "example-operator"}, nil},
		{"empty owner label", map[string]string{owner: "", managedBy: "example-operator"}, nil},
		{"no labels", nil, nil},
	} {
		if got := toCluster(context.Background(), pod(tc.lbls)); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	// With no selector the owner label alone decides.
	if got := children.OwnerByLabel(owner, nil)(context.Background(), pod(map[string]string{owner: "c2"})); len(got) != 1 || got[0].Name != "c2" {
		t.Errorf("without a selector: %v, want c2", got)
	}
}
