package controller

import (
	"strings"
	"testing"
	"time"

	valdv1 "github.com/opsuite/suite/api/vald/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
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
	// A ValdRelease keeps of its status what deployment reads, not the rendered manifest.
	deployed := `{"observedGeneration":2,"conditions":[{"type":"Deployed","status":"True","reason":"UpgradeSuccessful","message":"ok","lastTransitionTime":"2026-01-01T00:00:00Z"}]`
	vr := &valdv1.ValdRelease{ObjectMeta: metav1.ObjectMeta{Name: "ns-a", Generation: 2},
		Status: &apiextensionsv1.JSON{Raw: []byte(deployed + `,"deployedRelease":{"name":"ns-a","manifest":"` + strings.Repeat("x", 50000) + `"}}`)}}
	out, err = stripForCache(vr)
	if err != nil {
		t.Fatal(err)
	}
	slim := out.(*valdv1.ValdRelease)
	if strings.Contains(string(slim.Status.Raw), "manifest") || len(slim.Status.Raw) > 300 {
		t.Errorf("cached ValdRelease status %s", slim.Status.Raw)
	}
	if res := deployment(slim, time.Now(), time.Minute); !res.Succeeded() {
		t.Errorf("the slimmed status no longer reads Deployed: %+v", res)
	}
	notHelm := &valdv1.ValdRelease{Status: &apiextensionsv1.JSON{Raw: []byte(`{"conditions":"yes"}`)}}
	if out, _ := stripForCache(notHelm); string(out.(*valdv1.ValdRelease).Status.Raw) != `{"conditions":"yes"}` {
		t.Errorf("a status that is not the Vald Helm Operator's was changed: %s", out.(*valdv1.ValdRelease).Status.Raw)
	}

	tombstone := cache.DeletedFinalStateUnknown{Key: "ns/vor"}
	if out, err := stripForCache(tombstone); err != nil || out != tombstone {
		t.Errorf("a tombstone became %v, %v", out, err)
	}
}
