package validation

import (
	"context"
	"testing"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	"github.com/opsuite/suite/shared/testenv"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestPodDisruptionBudgetFormsServerSideApply: podDisruptionBudget moves between upstream's
// string form and the object form by server-side apply (kubectl apply --server-side,
// Helm), both ways, and the typed client reads each as its mode; an object form with an
// unknown mode is still refused.
func TestPodDisruptionBudgetFormsServerSideApply(t *testing.T) {
	ns := testenv.NewNamespace(t, env.Client, "vkc-pdb-")
	ctx := context.Background()
	apply := func(pdb any) error {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "valkey.io/v1alpha1", "kind": "ValkeyCluster",
			"metadata": map[string]any{"name": "forms", "namespace": ns},
			"spec":     map[string]any{"shards": int64(3), "podDisruptionBudget": pdb},
		}}
		return env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("test"), client.ForceOwnership)
	}
	for _, step := range []struct {
		pdb  any
		want valkeyv1.PDBMode
	}{
		{"Disabled", valkeyv1.PDBModeDisabled},
		{map[string]any{"mode": "Cluster"}, valkeyv1.PDBModeCluster},
		{"Disabled", valkeyv1.PDBModeDisabled},
		{"Managed", valkeyv1.PDBModeCluster},
		{map[string]any{"mode": "Disabled"}, valkeyv1.PDBModeDisabled},
	} {
		if err := apply(step.pdb); err != nil {
			t.Fatalf("applying podDisruptionBudget %v: %v", step.pdb, err)
		}
		var c valkeyv1.ValkeyCluster
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "forms"}, &c); err != nil {
			t.Fatal(err)
		}
		if got := c.Spec.PDBMode(); got != step.want {
			t.Errorf("podDisruptionBudget %v: policy %s, want %s", step.pdb, got, step.want)
		}
	}
	expectAdmission(t, apply(map[string]any{"mode": "Sometimes"}), `spec.podDisruptionBudget.mode: Unsupported value: "Sometimes"`)
}
