package cluster_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	"github.com/opsuite/suite/shared/testenv"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestObservedGenerationFollowsSpec: status.observedGeneration, and every condition's, is
// the generation of the spec the last pass judged; a spec change raises them all.
func TestObservedGenerationFollowsSpec(t *testing.T) {
	t.Parallel()
	f, vc := startCluster(t, "vkc-gen", "g", valkeyv1.ValkeyClusterSpec{Shards: 1})
	ctx := context.Background()
	got := waitReady(t, f, "g", 60*time.Second)
	wantObserved(t, got, 1)

	// A spec change that touches no member: the budget goes, the cluster stays Ready.
	var cur valkeyv1.ValkeyCluster
	if err := f.c.Get(ctx, client.ObjectKeyFromObject(vc), &cur); err != nil {
		t.Fatal(err)
	}
	cur.Spec.PodDisruptionBudget = &valkeyv1.PodDisruptionBudgetConfig{Mode: valkeyv1.PDBModeDisabled}
	if err := f.c.Update(ctx, &cur); err != nil {
		t.Fatal(err)
	}
	if cur.Generation != 2 {
		t.Fatalf("generation %d after one spec change, want 2", cur.Generation)
	}
	testenv.Eventually(t, 60*time.Second, "status.observedGeneration 2", func() (bool, string) {
		f.sync(ctx)
		if err := f.c.Get(ctx, client.ObjectKeyFromObject(vc), got); err != nil {
			return false, err.Error()
		}
		return got.Status.ObservedGeneration == 2, fmt.Sprintf("observedGeneration %d, state %s", got.Status.ObservedGeneration, got.Status.State)
	})
	wantObserved(t, got, 2)
	if got.Status.State != valkeyv1.StateReady {
		t.Errorf("state %s after a budget change, want Ready", got.Status.State)
	}
}

// wantObserved checks that the status and each condition were computed from generation.
func wantObserved(t *testing.T, vc *valkeyv1.ValkeyCluster, generation int64) {
	t.Helper()
	if vc.Generation != generation || vc.Status.ObservedGeneration != generation {
		t.Errorf("generation %d, status.observedGeneration %d; want both %d", vc.Generation, vc.Status.ObservedGeneration, generation)
	}
	if len(vc.Status.Conditions) == 0 {
		t.Error("no conditions")
	}
	for _, c := range vc.Status.Conditions {
		if c.ObservedGeneration != generation {
			t.Errorf("condition %s observedGeneration %d, want %d", c.Type, c.ObservedGeneration, generation)
		}
	}
}
