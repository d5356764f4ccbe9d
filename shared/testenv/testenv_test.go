package testenv_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opsuite/suite/shared/conditions"
	"github.com/opsuite/suite/shared/ssa"
	"github.com/opsuite/suite/shared/status"
	"github.com/opsuite/suite/shared/testenv"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	e, err := testenv.Start(testenv.Options{CRDDirs: []string{filepath.Join("testdata")}})
	if err != nil {
		panic(err)
	}
	env = e
	code := m.Run()
	_ = env.Stop()
	if code != 0 {
		panic("tests failed")
	}
}

var widgetGVK = schema.GroupVersionKind{Group: "test.opsuite.io", Version: "v1", Kind: "Widget"}

func widget(name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(widgetGVK)
	u.SetNamespace("default")
	u.SetName(name)
	return u
}

func TestRealAPIServer(t *testing.T) {
	dc := discovery.NewDiscoveryClientForConfigOrDie(env.Config)
	v, err := dc.ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if v.GitVersion != testenv.KubernetesVersion {
		t.Fatalf("apiserver reports %s, want %s (version ldflags missing?)", v.GitVersion, testenv.KubernetesVersion)
	}
	t.Logf("kube-apiserver %s started in %s", v.GitVersion, env.StartupTime)
}

func TestCELRuleRejectsWithItsMessage(t *testing.T) {
	err := env.Client.Create(context.Background(), widget("bad", map[string]any{"size": int64(0)}))
	if !apierrors.IsInvalid(err) {
		t.Fatalf("want Invalid, got %v", err)
	}
	if !strings.Contains(err.Error(), "spec.size must be positive: set it to 1 or more") {
		t.Fatalf("error lacks the rule's message: %v", err)
	}
	if err := env.Client.Create(context.Background(), widget("good", map[string]any{"size": int64(2)})); err != nil {
		t.Fatalf("valid object rejected: %v", err)
	}
}

func TestApplyByTwoFieldManagersConflicts(t *testing.T) {
	ctx := context.Background()
	alice := ssa.Applier{Client: env.Client, FieldManager: "alice"}
	bob := ssa.Applier{Client: env.Client, FieldManager: "bob"}
	if err := alice.Apply(ctx, widget("shared", map[string]any{"color": "red"})); err != nil {
		t.Fatal(err)
	}
	err := bob.Apply(ctx, widget("shared", map[string]any{"color": "blue"}), ssa.NoForce())
	if !apierrors.IsConflict(err) {
		t.Fatalf("want a conflict when bob sets alice's field, got %v", err)
	}
	// The same value is shared ownership, not a conflict.
	if err := bob.Apply(ctx, widget("shared", map[string]any{"color": "red"}), ssa.NoForce()); err != nil {
		t.Fatalf("applying the same value conflicted: %v", err)
	}
	// Forcing takes the field over.
	w := widget("shared", map[string]any{"color": "blue"})
	if err := bob.Apply(ctx, w); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := unstructured.NestedString(w.Object, "spec", "color"); got != "blue" {
		t.Fatalf("forced apply did not win: color=%q", got)
	}
	managers := map[string]bool{}
	for _, mf := range w.GetManagedFields() {
		managers[mf.Manager] = true
	}
	if !managers["bob"] {
		t.Fatalf("bob is not a field manager after forcing: %v", managers)
	}
}

func TestStatusWriteSkipsWhenUnchanged(t *testing.T) {
	ctx := context.Background()
	var writes int
	c, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	counting := interceptor.NewClient(c, interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, o ...client.SubResourcePatchOption) error {
			writes++
			return c.SubResource(sub).Patch(ctx, obj, p, o...)
		},
	})
	w := widget("status", map[string]any{"size": int64(1)})
	if err := c.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	pass := func() bool {
		cur := &unstructured.Unstructured{}
		cur.SetGroupVersionKind(widgetGVK)
		if err := c.Get(ctx, client.ObjectKeyFromObject(w), cur); err != nil {
			t.Fatal(err)
		}
		before := cur.DeepCopy()
		var conds []metav1.Condition
		_ = conditions.Set(&conds, metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Succeeded", Message: "Ready."}, cur.GetGeneration())
		if existing, found, _ := unstructured.NestedSlice(cur.Object, "status", "conditions"); found && len(existing) == 1 {
			// Keep the stored transition time so an unchanged condition compares equal.
			conds[0].LastTransitionTime = mustTime(t, existing[0].(map[string]any)["lastTransitionTime"].(string))
		}
		raw := make([]any, 0, len(conds))
		for _, cd := range conds {
			raw = append(raw, map[string]any{"type": cd.Type, "status": string(cd.Status), "reason": cd.Reason,
				"message": cd.Message, "observedGeneration": cd.ObservedGeneration, "lastTransitionTime": cd.LastTransitionTime.UTC().Format("2006-01-02T15:04:05Z")})
		}
		_ = unstructured.SetNestedSlice(cur.Object, raw, "status", "conditions")
		_ = unstructured.SetNestedField(cur.Object, string(conditions.Summarize(conds)), "status", "state")
		written, err := status.Write(ctx, counting, before, cur)
		if err != nil {
			t.Fatal(err)
		}
		return written
	}
	if !pass() {
		t.Fatal("first pass wrote nothing")
	}
	for range 3 {
		if pass() {
			t.Fatal("a converged pass wrote status")
		}
	}
	if writes != 1 {
		t.Fatalf("status writes = %d, want 1", writes)
	}
}

func mustTime(t *testing.T, s string) metav1.Time {
	t.Helper()
	var mt metav1.Time
	if err := mt.UnmarshalQueryParameter(s); err != nil {
		t.Fatal(err)
	}
	return mt
}
