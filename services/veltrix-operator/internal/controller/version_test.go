package controller_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	veltrixv1 "github.com/opsuite/suite/api/veltrix/v1alpha1"
	"github.com/opsuite/suite/services/veltrix-operator/internal/resources"
	"github.com/opsuite/suite/shared/testenv"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestVersionBelowMinimum: a cluster whose spec.version predates online membership (stored
// before the CRD refused such versions, which the test stands in for by lifting the rule
// for one update) is Ready=False VersionUnsupported with a Warning event, and its
// StatefulSet keeps the image it runs; a supported version rolls it again.
func TestVersionBelowMinimum(t *testing.T) {
	ctx := context.Background()
	f := startFleet(t, operatorTokens(t, "version", true), 1<<30, []string{"node-a"}, nil)
	ns := testenv.NewNamespace(t, env.Client, "vx")
	startController(t, f, ns)
	c := newCluster(t, ns, func(c *veltrixv1.VeltrixCluster) {
		c.Spec.Size, c.Spec.ReplicationFactor = 1, 1
		c.Spec.DiskSelector.NVMeOnly = ptr.To(false)
		c.Spec.IndexMapFallback = true
	})
	image := func() string {
		var sts appsv1.StatefulSet
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: resources.StatefulSetName(c)}, &sts); err != nil {
			return err.Error()
		}
		return sts.Spec.Template.Spec.Containers[0].Image
	}
	testenv.Eventually(t, 60*time.Second, "the StatefulSet at 1.17.0", func() (bool, string) {
		img := image()
		return img == veltrixv1.DefaultImage+":1.17.0", img
	})

	withoutVersionRule(t, func() {
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			var live veltrixv1.VeltrixCluster
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(c), &live); err != nil {
				return err
			}
			live.Spec.Version = "1.16.0"
			return env.Client.Update(ctx, &live)
		}); err != nil {
			t.Fatalf("setting version 1.16.0 without the rule: %v", err)
		}
	})
	cond := condition(t, c, veltrixv1.ConditionReady, metav1.ConditionFalse, veltrixv1.ReasonVersionUnsupported)
	t.Logf("Ready: %s", cond.Message)
	testenv.Eventually(t, 10*time.Second, "a Warning event VersionUnsupported", func() (bool, string) {
		ev := eventReasons(t, c)
		return ev[veltrixv1.ReasonVersionUnsupported] == corev1.EventTypeWarning, fmt.Sprint(ev)
	})
	// With the rule in force again, the stored 1.16.0 still lets other fields change (the
	// API server ratchets a rule over an unchanged value) and the status be written.
	var gen int64
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var live veltrixv1.VeltrixCluster
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(c), &live); err != nil {
			return err
		}
		live.Spec.ReclaimPolicy = veltrixv1.ReclaimDelete
		err := env.Client.Update(ctx, &live)
		gen = live.Generation
		return err
	}); err != nil {
		t.Fatalf("changing reclaimPolicy of a cluster stored at 1.16.0: %v", err)
	}
	testenv.Eventually(t, 30*time.Second, "Ready VersionUnsupported observed at the new generation", func() (bool, string) {
		var live veltrixv1.VeltrixCluster
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(c), &live); err != nil {
			return false, err.Error()
		}
		for _, cond := range live.Status.Conditions {
			if cond.Type == veltrixv1.ConditionReady {
				return cond.Reason == veltrixv1.ReasonVersionUnsupported && cond.ObservedGeneration == gen && live.Status.ObservedGeneration == gen,
					fmt.Sprintf("%s generation %d/%d, want %d", cond.Reason, cond.ObservedGeneration, live.Status.ObservedGeneration, gen)
			}
		}
		return false, "no Ready"
	})
	if img := image(); img != veltrixv1.DefaultImage+":1.17.0" {
		t.Errorf("StatefulSet image %s after spec.version 1.16.0, want it left at 1.17.0", img)
	}

	// With the rule back, a supported version is accepted and rolled out.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var live veltrixv1.VeltrixCluster
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(c), &live); err != nil {
			return err
		}
		live.Spec.Version = "1.17.1"
		return env.Client.Update(ctx, &live)
	}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the StatefulSet at 1.17.1", func() (bool, string) {
		img := image()
		return img == veltrixv1.DefaultImage+":1.17.1", img
	})
	testenv.Eventually(t, 30*time.Second, "Ready no longer VersionUnsupported", func() (bool, string) {
		var live veltrixv1.VeltrixCluster
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(c), &live); err != nil {
			return false, err.Error()
		}
		for _, cond := range live.Status.Conditions {
			if cond.Type == veltrixv1.ConditionReady {
				return cond.Reason != veltrixv1.ReasonVersionUnsupported, cond.Reason
			}
		}
		return false, "no Ready"
	})
}

// withoutVersionRule runs update with the CRD's spec.version rule lifted, as a CRD installed
// before the rule existed, and puts the rule back before it returns.
func withoutVersionRule(t *testing.T, update func()) {
	t.Helper()
	ctx := context.Background()
	path := []string{"spec", "versions"}
	rulePath := []string{"schema", "openAPIV3Schema", "properties", "spec", "properties", "version", "x-kubernetes-validations"}
	var saved []any
	edit := func(set func(rules []any) []any) {
		t.Helper()
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			crd := &unstructured.Unstructured{}
			crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
			if err := env.Client.Get(ctx, client.ObjectKey{Name: "veltrixclusters.veltrix.io"}, crd); err != nil {
				return err
			}
			versions, _, err := unstructured.NestedSlice(crd.Object, path...)
			if err != nil || len(versions) == 0 {
				return fmt.Errorf("CRD versions (%d): %w", len(versions), err)
			}
			v0, ok := versions[0].(map[string]any)
			if !ok {
				return fmt.Errorf("CRD version %T", versions[0])
			}
			rules, _, err := unstructured.NestedSlice(v0, rulePath...)
			if err != nil {
				return err
			}
			if rules = set(rules); rules == nil {
				unstructured.RemoveNestedField(v0, rulePath...)
			} else if err := unstructured.SetNestedSlice(v0, rules, rulePath...); err != nil {
				return err
			}
			versions[0] = v0
			if err := unstructured.SetNestedSlice(crd.Object, versions, path...); err != nil {
				return err
			}
			return env.Client.Update(ctx, crd)
		}); err != nil {
			t.Fatalf("editing the CRD: %v", err)
		}
	}
	edit(func(rules []any) []any { saved = rules; return nil })
	restored := false
	restore := func() {
		if !restored {
			restored = true
			edit(func([]any) []any { return saved })
		}
	}
	t.Cleanup(restore)
	if len(saved) == 0 {
		t.Fatal("the CRD has no rule on spec.version to lift")
	}
	// The API server swaps its handler for the new schema shortly after the update.
	time.Sleep(2 * time.Second)
	update()
	restore()
	// Refused again once the handler has the rule back.
	testenv.Eventually(t, 30*time.Second, "the version rule back in force", func() (bool, string) {
		probe := &veltrixv1.VeltrixCluster{ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-", Namespace: "default"}, Spec: veltrixv1.VeltrixClusterSpec{Version: "1.16.0"}}
		err := env.Client.Create(ctx, probe, client.DryRunAll)
		return err != nil, fmt.Sprint(err)
	})
}
