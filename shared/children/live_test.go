package children_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/opsuite/suite/shared/children"
	"github.com/opsuite/suite/shared/ssa"
	"github.com/opsuite/suite/shared/testenv"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestLiveSeesWhatTheCacheMisses: with a cache that holds the owner's labelled ConfigMaps
// only, an unlabelled ConfigMap under a child's name (someone else's) is found through
// Live and refused (NotControlledError), never applied over; one of the owner's own whose
// label was removed by hand is adopted (labels back, data kept by the apply).
func TestLiveSeesWhatTheCacheMisses(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	mgr := env.StartManager(t, nil, testenv.InNamespaces(f.ns), func(o *ctrl.Options) {
		o.Cache.ByObject = map[client.Object]cache.ByObject{&corev1.ConfigMap{}: {Label: labels.SelectorFromSet(labels.Set{ownerLabel: "owner"})}}
	})
	f.set.Client = mgr.GetClient()
	f.set.Applier = ssa.Applier{Client: mgr.GetClient(), FieldManager: "widget-operator"}
	f.set.Live = mgr.GetAPIReader()

	foreign := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: f.ns}, Data: map[string]string{"value": "theirs"}}
	if err := env.Client.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	_, err := f.set.Sync(ctx, []*corev1.ConfigMap{desired("x", "1")})
	var nc *children.NotControlledError
	if !errors.As(err, &nc) {
		t.Fatalf("Sync over a foreign unlabelled ConfigMap: %v, want NotControlledError", err)
	}
	if got := f.get(t, "x"); got.Data["value"] != "theirs" || len(got.Labels) != 0 || len(got.OwnerReferences) != 0 {
		t.Errorf("the foreign ConfigMap was written: %v %v %v", got.Data, got.Labels, got.OwnerReferences)
	}

	if _, err := f.set.Sync(ctx, []*corev1.ConfigMap{desired("y", "1")}); err != nil {
		t.Fatal(err)
	}
	own := f.get(t, "y")
	own.Labels = nil
	if err := env.Client.Update(ctx, own); err != nil {
		t.Fatal(err)
	}
	// Passes repeat, as a controller's do: until the cache sees the label go, it still holds
	// the labelled copy and the apply is skipped as a no-op; from then on Live finds it.
	wait, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var got *corev1.ConfigMap
	if err := testenv.Poll(wait, 100*time.Millisecond, func(ctx context.Context) (bool, error) {
		if _, err := f.set.Sync(ctx, []*corev1.ConfigMap{desired("y", "1")}); err != nil {
			return false, fmt.Errorf("sync over its own ConfigMap without the label: %w", err)
		}
		got = f.get(t, "y")
		return got.Labels[ownerLabel] == "owner", nil
	}); err != nil {
		t.Fatalf("its own ConfigMap not adopted: %v (labels %v)", err, got.Labels)
	}
	if got.Data["value"] != "1" {
		t.Errorf("its own ConfigMap adopted with data %v, want value 1", got.Data)
	}
}
