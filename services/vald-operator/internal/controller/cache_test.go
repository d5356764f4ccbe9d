package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	valdv1 "github.com/opsuite/suite/api/vald/v1"
	"github.com/opsuite/suite/services/vald-operator/internal/resources"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
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

// TestPackedSpec: the cache holds a ValdRelease's spec packed, several times smaller, and
// unpacks it to the same bytes; a packed spec is never JSON, and anything that is not one
// passes through.
func TestPackedSpec(t *testing.T) {
	vrs, err := resources.DesiredValdReleases(resources.Input{Release: benchRelease("ns", 7)}, resources.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	raw := vrs[0].Spec.Raw
	packed := packSpec(raw)
	if len(packed) == 0 || packed[0] != packedSpec || json.Valid(packed) || len(packed) > len(raw)/3 {
		t.Fatalf("packed %d bytes into %d (first byte %#x); want a packed spec under a third of it", len(raw), len(packed), packed[0])
	}
	if again := packSpec(packed); !bytes.Equal(again, packed) {
		t.Error("packing a packed spec changed it")
	}
	got, err := unpackSpec(packed)
	if err != nil || !bytes.Equal(got, raw) {
		t.Fatalf("unpacked %q, %v; want %q", got, err, raw)
	}
	for _, plain := range []string{"", "{}", `{"a":1}`} {
		if got := packSpec([]byte(plain)); string(got) != plain {
			t.Errorf("packSpec(%q) = %q; a spec that does not get smaller stays as it is", plain, got)
		}
		if got, err := unpackSpec([]byte(plain)); err != nil || string(got) != plain {
			t.Errorf("unpackSpec(%q) = %q, %v", plain, got, err)
		}
	}
	if _, err := unpackSpec([]byte{packedSpec, 0xff, 0xff}); err == nil {
		t.Error("a corrupt packed spec unpacked without an error")
	}

	// Through stripForCache and the controller's read: the same spec, and the cached
	// object's own spec untouched by the read.
	vr := vrs[0].DeepCopy()
	out, err := stripForCache(vr)
	if err != nil {
		t.Fatal(err)
	}
	cached := out.(*valdv1.ValdRelease)
	list := &valdv1.ValdReleaseList{Items: []valdv1.ValdRelease{*cached}}
	if err := unpackRead(list); err != nil || !bytes.Equal(list.Items[0].Spec.Raw, raw) {
		t.Fatalf("read %q, %v; want %q", list.Items[0].Spec.Raw, err, raw)
	}
	if !bytes.Equal(cached.Spec.Raw, packed) {
		t.Error("unpacking a read changed the cached object's spec")
	}
}

// TestCachedSpecsReadAsApplied: the reconciler's reads of ValdReleases through the
// binary's cache (specs packed) see the specs the API server holds. With that cache, a
// converged release's check finds them up to date (TestConvergedPassWritesNothing counts
// the writes), and a spec changed by hand is read as changed: the release writes it back.
func TestCachedSpecsReadAsApplied(t *testing.T) {
	h := start(t, nil)
	h.create(h.release("vor", "a=1", "b=2"))
	h.waitStatus("vor", statusCompleted)
	ctx := context.Background()
	for _, live := range h.valdReleases() {
		var got valdv1.ValdRelease
		h.waitFor("the cache to hold "+live.Name, func() bool {
			return h.r.Client.Get(ctx, client.ObjectKeyFromObject(&live), &got) == nil && got.ResourceVersion == live.ResourceVersion
		})
		if !bytes.Equal(got.Spec.Raw, live.Spec.Raw) {
			t.Errorf("ValdRelease %s read through the cache: spec %s; the API server holds %s", live.Name, got.Spec.Raw, live.Spec.Raw)
		}
		list := &valdv1.ValdReleaseList{}
		if err := h.r.Client.List(ctx, list, client.InNamespace(h.ns), client.MatchingLabels{valdv1.LabelOperatorRelease: "vor"}, client.UnsafeDisableDeepCopy); err != nil {
			t.Fatal(err)
		}
		for _, item := range list.Items {
			if item.Name == live.Name && !bytes.Equal(item.Spec.Raw, live.Spec.Raw) {
				t.Errorf("ValdRelease %s listed through the cache: spec %s; the API server holds %s", live.Name, item.Spec.Raw, live.Spec.Raw)
			}
		}
	}

	vr := h.valdReleases()[0]
	if err := env.Client.Patch(ctx, &vr, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"agent":{"ngt":{"dimension":9}}}}`))); err != nil {
		t.Fatal(err)
	}
	h.waitFor("the changed spec to be written back", func() bool {
		got := &valdv1.ValdRelease{}
		return env.Client.Get(ctx, client.ObjectKeyFromObject(&vr), got) == nil && strings.Contains(string(got.Spec.Raw), `"dimension":8`)
	})
}
