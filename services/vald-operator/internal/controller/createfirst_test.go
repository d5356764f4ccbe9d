package controller

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	valdv1 "github.com/opsuite/suite/api/vald/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestFieldRemovedAfterCreateIsRemoved: a ValdRelease is created (its fields under the
// manager's Update entry), then the render drops a field it had; the first apply after the
// create must remove it from the ValdRelease, as an apply from the start would, and leave
// the controller's fields under one Apply entry.
func TestFieldRemovedAfterCreateIsRemoved(t *testing.T) {
	h := start(t, nil)
	ctx := context.Background()
	vor := h.release("vor", "a=1")
	vor.Spec.Infrastructure[0].NodePools.General.MachineResource.Memory = "8Gi" // generates agent.resources
	h.create(vor)
	h.waitStatus("vor", statusCompleted)

	vr := func() (map[string]any, []string) {
		t.Helper()
		live := &valdv1.ValdRelease{}
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: h.ns, Name: h.ns + "-a"}, live); err != nil {
			t.Fatal(err)
		}
		var spec map[string]any
		if err := json.Unmarshal(live.Spec.Raw, &spec); err != nil {
			t.Fatal(err)
		}
		var managers []string
		for _, mf := range live.ManagedFields {
			managers = append(managers, mf.Manager+"/"+string(mf.Operation))
		}
		return spec, managers
	}
	spec, managers := vr()
	if !slices.Equal(managers, []string{"vald-operator/Update"}) {
		t.Fatalf("created ValdRelease's managers %v, want vald-operator/Update", managers)
	}
	if agent, _ := spec["agent"].(map[string]any); agent["resources"] == nil {
		t.Fatalf("agent.resources not generated: %v", spec["agent"])
	}

	// The overlay removes agent.resources (a JSON patch carries the null).
	target := &valdv1.ValdOperatorRelease{}
	target.Namespace, target.Name = h.ns, "vor"
	patch := `[{"op":"add","path":"/spec/vectorEngine/vald/overlay","value":{"agent":{"resources":null}}}]`
	if err := env.Client.Patch(ctx, target, client.RawPatch(types.JSONPatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
	h.waitStatus("vor", statusCompleted)
	h.waitFor("agent.resources removed from the created ValdRelease", func() bool {
		spec, _ := vr()
		agent, _ := spec["agent"].(map[string]any)
		_, has := agent["resources"]
		return !has
	})
	spec, managers = vr()
	if !slices.Equal(managers, []string{"vald-operator/Apply"}) {
		t.Errorf("managers after the first apply %v, want vald-operator/Apply alone", managers)
	}
	if agent, _ := spec["agent"].(map[string]any); agent["ngt"] == nil {
		t.Errorf("the rest of agent went with resources: %v", agent)
	}
}
