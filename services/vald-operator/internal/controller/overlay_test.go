package controller

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	valdv1 "github.com/opsuite/suite/api/vald/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestOverlayNullThroughAPIServer sends an overlay null the ways the README names: a JSON
// merge patch (what `kubectl patch --type=merge` and client-side apply send) loses it, while
// server-side apply and a JSON patch store it, and the operator then drops the generated key.
func TestOverlayNullThroughAPIServer(t *testing.T) {
	h := start(t, nil)
	ctx := context.Background()
	vor := h.release("vor", "a=1")
	vor.Spec.Infrastructure[0].NodePools.General.MachineResource.Memory = "8Gi" // generates agent.resources
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(vor)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: raw}
	u.SetGroupVersionKind(valdv1.GroupVersion.WithKind("ValdOperatorRelease"))
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "status")
	if err := unstructured.SetNestedField(u.Object, map[string]any{"agent": map[string]any{"resources": nil}}, "spec", "vectorEngine", "vald", "overlay"); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("test-user")); err != nil {
		t.Fatal(err)
	}
	overlay := func() string {
		t.Helper()
		return string(h.get("vor").Spec.VectorEngine.Vald.Overlay.Raw)
	}
	if got := overlay(); got != `{"agent":{"resources":null}}` {
		t.Fatalf("overlay after server-side apply: %s", got)
	}
	h.waitStatus("vor", statusCompleted)
	agent := func() map[string]any {
		t.Helper()
		var spec map[string]any
		if err := json.Unmarshal(h.valdReleases()[0].Spec.Raw, &spec); err != nil {
			t.Fatal(err)
		}
		a, _ := spec["agent"].(map[string]any)
		return a
	}
	if _, ok := agent()["resources"]; ok {
		t.Errorf("agent.resources still generated although the overlay removes it: %v", agent())
	}

	// A merge patch cannot carry the null: it means "delete this key" and is gone.
	target := &valdv1.ValdOperatorRelease{}
	target.Namespace, target.Name = h.ns, "vor"
	merge := `{"spec":{"vectorEngine":{"vald":{"overlay":{"agent":{"resources":null},"gateway":{"lb":{"ingress":null}}}}}}}`
	if err := env.Client.Patch(ctx, target, client.RawPatch(types.MergePatchType, []byte(merge))); err != nil {
		t.Fatal(err)
	}
	if got := overlay(); strings.Contains(got, "null") {
		t.Errorf("a merge patch stored a null: %s", got)
	}
	h.waitFor("agent.resources generated again", func() bool { _, ok := agent()["resources"]; return ok })

	// A JSON patch sets the null itself.
	jsonPatch := `[{"op":"add","path":"/spec/vectorEngine/vald/overlay","value":{"agent":{"resources":null}}}]`
	if err := env.Client.Patch(ctx, target, client.RawPatch(types.JSONPatchType, []byte(jsonPatch))); err != nil {
		t.Fatal(err)
	}
	if got := overlay(); got != `{"agent":{"resources":null}}` {
		t.Errorf("overlay after a JSON patch: %s", got)
	}
	h.waitFor("agent.resources removed again", func() bool { _, ok := agent()["resources"]; return !ok })
}
