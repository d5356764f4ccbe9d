package children_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/opsuite/suite/shared/children"
	"github.com/opsuite/suite/shared/ssa"
	"github.com/opsuite/suite/shared/testenv"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.MainWithWidgets(m, &env) }

const ownerLabel = "test.opsuite.io/widget"

type fixture struct {
	ns     string
	owner  *unstructured.Unstructured
	writes *testenv.WriteCounter
	set    children.Set[*corev1.ConfigMap]
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{ns: testenv.NewNamespace(t, env.Client, "children-"), writes: &testenv.WriteCounter{}}
	f.owner = widget(t, f.ns, "owner")
	c := f.writes.Wrap(env.Client)
	f.set = children.Set[*corev1.ConfigMap]{
		Client:   c,
		Applier:  ssa.Applier{Client: c, FieldManager: "widget-operator"},
		Owner:    f.owner,
		NewList:  func() client.ObjectList { return &corev1.ConfigMapList{} },
		Selector: map[string]string{ownerLabel: "owner"},
	}
	return f
}

func widget(t *testing.T, ns, name string) *unstructured.Unstructured {
	t.Helper()
	u := testenv.NewWidget(ns, name)
	if err := env.Client.Create(context.Background(), u); err != nil {
		t.Fatal(err)
	}
	return u
}

func desired(name, value string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{ownerLabel: "owner"}, Annotations: map[string]string{"test.opsuite.io/hash": value}},
		Data:       map[string]string{"value": value},
	}
}

func (f *fixture) names(t *testing.T) string {
	t.Helper()
	list := &corev1.ConfigMapList{}
	if err := env.Client.List(context.Background(), list, client.InNamespace(f.ns)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, cm := range list.Items {
		if cm.Name != "kube-root-ca.crt" {
			out = append(out, cm.Name)
		}
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

func (f *fixture) get(t *testing.T, name string) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: name}, cm); err != nil {
		t.Fatal(err)
	}
	return cm
}

func TestApplyOwnSkipAndPrune(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	out, err := f.set.Sync(ctx, []*corev1.ConfigMap{desired("a", "1"), desired("b", "1"), desired("c", "1")})
	if err != nil || len(out.Applied) != 3 || out.Unchanged != 0 {
		t.Fatalf("first sync: %+v, %v", out, err)
	}
	a := f.get(t, "a")
	if owner := metav1.GetControllerOf(a); owner == nil || owner.UID != f.owner.GetUID() || owner.Kind != "Widget" {
		t.Errorf("controller reference %+v", owner)
	}
	if len(a.ManagedFields) != 1 || a.ManagedFields[0].Manager != "widget-operator" || a.ManagedFields[0].Operation != metav1.ManagedFieldsOperationApply {
		t.Errorf("managed fields %+v", a.ManagedFields)
	}
	if out.Applied[0].UID == "" || out.Applied[0].ResourceVersion == "" {
		t.Errorf("Applied does not hold the server's answer: %+v", out.Applied[0].ObjectMeta)
	}

	// Converged: nothing written, even with keys others added.
	a.Labels["team"] = "x"
	a.Data["other"] = "y"
	if err := env.Client.Update(ctx, a); err != nil {
		t.Fatal(err)
	}
	before := f.writes.Count()
	out, err = f.set.Sync(ctx, []*corev1.ConfigMap{desired("a", "1"), desired("b", "1"), desired("c", "1")})
	if err != nil || out.Unchanged != 3 || len(out.Applied) != 0 || len(out.Pruned) != 0 {
		t.Fatalf("converged sync: %+v, %v", out, err)
	}
	if n := f.writes.Count() - before; n != 0 {
		t.Errorf("converged sync wrote %d times", n)
	}

	// A changed value is applied; a child no longer desired is pruned; objects carrying
	// the label but not controlled by this owner stay.
	stray := desired("stray", "1")
	stray.Namespace = f.ns
	if err := env.Client.Create(ctx, stray); err != nil {
		t.Fatal(err)
	}
	other := widget(t, f.ns, "other")
	foreign := desired("foreign", "1")
	foreign.Namespace = f.ns
	foreign.OwnerReferences = []metav1.OwnerReference{{APIVersion: "test.opsuite.io/v1", Kind: "Widget", Name: "other", UID: other.GetUID(), Controller: ptr.To(true)}}
	if err := env.Client.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	out, err = f.set.Sync(ctx, []*corev1.ConfigMap{desired("a", "2"), desired("c", "1")})
	if err != nil || len(out.Applied) != 1 || out.Unchanged != 1 || len(out.Pruned) != 1 || out.Pruned[0].Name != "b" {
		t.Fatalf("sync after a change: %+v, %v", out, err)
	}
	if got := f.names(t); got != "a,c,foreign,stray" {
		t.Errorf("ConfigMaps %s, want a,c,foreign,stray", got)
	}
	if v := f.get(t, "a").Data["value"]; v != "2" {
		t.Errorf("changed value not applied: %q", v)
	}

	// A key the live object lacks is applied (reading the live object must not merge it
	// into the desired one).
	withKey := desired("a", "2")
	withKey.Data["new"] = "n"
	out, err = f.set.Sync(ctx, []*corev1.ConfigMap{withKey, desired("c", "1")})
	if err != nil || len(out.Applied) != 1 {
		t.Fatalf("sync with a new key: %+v, %v", out, err)
	}
	if v := f.get(t, "a").Data["new"]; v != "n" {
		t.Errorf("new key not applied: %q", v)
	}
}

func TestNeverPrunesOnEmptyOrAfterAFailure(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	if _, err := f.set.Sync(ctx, []*corev1.ConfigMap{desired("a", "1"), desired("b", "1")}); err != nil {
		t.Fatal(err)
	}

	if _, err := f.set.Sync(ctx, nil); !errors.Is(err, children.ErrEmpty) {
		t.Fatalf("empty desired set: %v, want ErrEmpty", err)
	}
	if got := f.names(t); got != "a,b" {
		t.Errorf("an empty desired set pruned: %s", got)
	}

	// b is no longer desired, but an apply fails first: nothing is pruned.
	bad := desired("Not_A_Name", "1")
	_, err := f.set.Sync(ctx, []*corev1.ConfigMap{desired("a", "1"), bad})
	var ae *children.ApplyError
	if !errors.As(err, &ae) || !apierrors.IsInvalid(err) || ae.Key.Name != "Not_A_Name" {
		t.Fatalf("invalid child: %v, want an ApplyError that is Invalid", err)
	}
	if got := f.names(t); got != "a,b" {
		t.Errorf("pruned after a failed apply: %s", got)
	}

	// A name taken by an object this owner does not control is refused, not written.
	taken := desired("taken", "1")
	taken.Namespace = f.ns
	taken.Data["value"] = "theirs"
	if err := env.Client.Create(ctx, taken); err != nil {
		t.Fatal(err)
	}
	_, err = f.set.Sync(ctx, []*corev1.ConfigMap{desired("taken", "1")})
	var nc *children.NotControlledError
	if !errors.As(err, &nc) || nc.Key.Name != "taken" || nc.Controller != nil {
		t.Fatalf("name taken: %v, want NotControlledError", err)
	}
	if v := f.get(t, "taken").Data["value"]; v != "theirs" {
		t.Errorf("an object of nobody's was overwritten: %q", v)
	}
	if got := f.names(t); got != "a,b,taken" {
		t.Errorf("pruned after a refusal: %s", got)
	}

	// A child without the selector label could never be pruned: refused up front.
	unlabelled := desired("c", "1")
	unlabelled.Labels = nil
	if _, err := f.set.Sync(ctx, []*corev1.ConfigMap{unlabelled}); err == nil || !strings.Contains(err.Error(), "lacks the selector label") {
		t.Errorf("unlabelled child: %v", err)
	}

	// Empty is legitimate when the caller says so.
	f.set.AllowEmpty = true
	out, err := f.set.Sync(ctx, nil)
	if err != nil || len(out.Pruned) != 2 {
		t.Fatalf("allowed empty sync: %+v, %v", out, err)
	}
	if got := f.names(t); got != "taken" {
		t.Errorf("after pruning everything: %s", got)
	}
}

// TestOwnUpToDate: a Set's own check stands in for UpToDate: what it calls stale is
// applied, what it calls up to date is not, whatever UpToDate would say.
func TestOwnUpToDate(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	want := func() []*corev1.ConfigMap { return []*corev1.ConfigMap{desired("a", "1"), desired("b", "1")} }
	if _, err := f.set.Sync(ctx, want()); err != nil {
		t.Fatal(err)
	}
	var asked []string
	f.set.UpToDate = func(d, l *corev1.ConfigMap) bool {
		asked = append(asked, d.Name+"/"+l.Name)
		return d.Name != "a"
	}
	out, err := f.set.Sync(ctx, want())
	if err != nil || len(out.Applied) != 1 || out.Applied[0].Name != "a" || out.Unchanged != 1 {
		t.Fatalf("sync with a check that calls a stale: %+v, %v", out, err)
	}
	if strings.Join(asked, ",") != "a/a,b/b" {
		t.Errorf("the check was asked %v, want a/a,b/b", asked)
	}
}
