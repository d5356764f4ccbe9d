package controller

import (
	"testing"

	valdv1 "github.com/opsuite/suite/api/vald/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

func TestStripForCache(t *testing.T) {
	vor := &valdv1.ValdOperatorRelease{ObjectMeta: metav1.ObjectMeta{
		Name:          "vor",
		Annotations:   map[string]string{lastAppliedAnnotation: `{"spec":{}}`, "team": "search"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate}},
	}}
	out, err := stripForCache(vor)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*valdv1.ValdOperatorRelease)
	if len(got.ManagedFields) != 0 || len(got.Annotations) != 1 || got.Annotations["team"] != "search" {
		t.Errorf("cached object keeps managedFields %v, annotations %v; want none and only team", got.ManagedFields, got.Annotations)
	}
	tombstone := cache.DeletedFinalStateUnknown{Key: "ns/vor"}
	if out, err := stripForCache(tombstone); err != nil || out != tombstone {
		t.Errorf("a tombstone became %v, %v", out, err)
	}
}
