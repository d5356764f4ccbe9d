package reconciler_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opsuite/suite/shared/conditions"
	"github.com/opsuite/suite/shared/reconciler"
	"github.com/opsuite/suite/shared/testenv"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.MainWithWidgets(m, &env) }

func newWidget() *unstructured.Unstructured { return testenv.NewWidget("", "") }

func createWidget(t *testing.T, ns, name string, finalizers ...string) *unstructured.Unstructured {
	t.Helper()
	u := testenv.NewWidget(ns, name)
	u.SetFinalizers(finalizers)
	u.Object["spec"] = map[string]any{"size": int64(1)}
	if err := env.Client.Create(context.Background(), u); err != nil {
		t.Fatal(err)
	}
	return u
}

// setCondition records c in the widget's status.conditions the way a controller does.
func setCondition(u *unstructured.Unstructured, c metav1.Condition) {
	conds, _ := testenv.ConditionsOf(u)
	conditions.Set(&conds, c, u.GetGeneration())
	raw := make([]any, 0, len(conds))
	for _, cd := range conds {
		m, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(&cd)
		raw = append(raw, m)
	}
	_ = unstructured.SetNestedSlice(u.Object, raw, "status", "conditions")
	_ = unstructured.SetNestedField(u.Object, string(conditions.Summarize(conds)), "status", "state")
}

func conds(u *unstructured.Unstructured) []metav1.Condition {
	c, _ := testenv.ConditionsOf(u)
	return c
}

func observedGeneration(u *unstructured.Unstructured) int64 {
	g, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	return g
}

type fixture struct {
	ns     string
	writes *testenv.WriteCounter
	cfg    reconciler.Config[*unstructured.Unstructured]
}

// newFixture is a reconciler of widgets whose pass is run; its writes are counted and its
// events go to the real API server through a manager's recorder.
func newFixture(t *testing.T, run func(ctx context.Context, u *unstructured.Unstructured) (reconciler.Result, error)) *fixture {
	t.Helper()
	f := &fixture{ns: testenv.NewNamespace(t, env.Client, "rec-"), writes: &testenv.WriteCounter{}}
	mgr := env.StartManager(t, nil)
	f.cfg = reconciler.Config[*unstructured.Unstructured]{
		Name:       "widget-operator",
		Client:     f.writes.Wrap(env.Client),
		Recorder:   mgr.GetEventRecorder("widget-operator"),
		New:        newWidget,
		Run:        run,
		Conditions: conds,
		ObserveGeneration: func(u *unstructured.Unstructured, g int64) {
			_ = unstructured.SetNestedField(u.Object, g, "status", "observedGeneration")
		},
	}
	return f
}

func (f *fixture) reconcile(t *testing.T, r *reconciler.Reconciler[*unstructured.Unstructured], name string) (reconcile.Result, error) {
	t.Helper()
	return r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: f.ns, Name: name}})
}

func (f *fixture) get(t *testing.T, name string) *unstructured.Unstructured {
	t.Helper()
	u := newWidget()
	if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: f.ns, Name: name}, u); err != nil {
		t.Fatal(err)
	}
	return u
}

// events returns "type/action/reason" of the events regarding name, sorted.
func (f *fixture) events(t *testing.T, name string) []string {
	t.Helper()
	evs := &eventsv1.EventList{}
	if err := env.Client.List(context.Background(), evs, client.InNamespace(f.ns)); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range evs.Items {
		if e.Regarding.Name == name {
			got = append(got, e.Type+"/"+e.Action+"/"+e.Reason)
		}
	}
	slices.Sort(got)
	return got
}

func cond(t, s, reason string) metav1.Condition {
	return metav1.Condition{Type: t, Status: metav1.ConditionStatus(s), Reason: reason, Message: t + " is " + reason + "."}
}

func TestPassWaitsThenConvergesWritingStatusOnce(t *testing.T) {
	ready := false
	f := newFixture(t, func(_ context.Context, u *unstructured.Unstructured) (reconciler.Result, error) {
		if !ready {
			setCondition(u, cond("Ready", "Unknown", "Progressing"))
			setCondition(u, cond(conditions.TypeDegraded, "False", "AsExpected"))
			return reconciler.Wait(3 * time.Second), nil
		}
		setCondition(u, cond("Ready", "True", "Succeeded"))
		setCondition(u, cond(conditions.TypeDegraded, "False", "AsExpected"))
		return reconciler.Done(), nil
	})
	r, err := reconciler.New(f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	createWidget(t, f.ns, "w")
	requeuedBefore := r.Metrics().Count(reconciler.OutcomeRequeued)

	res, err := f.reconcile(t, r, "w")
	if err != nil || res.RequeueAfter != 3*time.Second {
		t.Fatalf("waiting pass = %+v, %v; want RequeueAfter 3s", res, err)
	}
	if n := f.writes.Count(); n != 1 {
		t.Errorf("first pass wrote %d times, want one status write", n)
	}
	w := f.get(t, "w")
	if s, _, _ := unstructured.NestedString(w.Object, "status", "state"); s != string(conditions.StateReconciling) || observedGeneration(w) != w.GetGeneration() {
		t.Errorf("status after the waiting pass: state %q, observedGeneration %d of %d", s, observedGeneration(w), w.GetGeneration())
	}
	if got := r.Metrics().Count(reconciler.OutcomeRequeued) - requeuedBefore; got != 1 {
		t.Errorf("widget_operator_reconcile_total{outcome=requeued} rose by %v, want 1", got)
	}

	ready = true
	if res, err := f.reconcile(t, r, "w"); err != nil || res != (reconcile.Result{}) {
		t.Fatalf("converging pass = %+v, %v", res, err)
	}
	w = f.get(t, "w")
	// Degraded=False is healthy: the summary is Ready, not Failed.
	if s, _, _ := unstructured.NestedString(w.Object, "status", "state"); s != string(conditions.StateReady) {
		t.Errorf("state %q, want Ready", s)
	}
	before := f.writes.Count()
	for range 3 {
		if _, err := f.reconcile(t, r, "w"); err != nil {
			t.Fatal(err)
		}
	}
	if n := f.writes.Count() - before; n != 0 {
		t.Errorf("3 converged passes wrote %d times, want 0", n)
	}
	// One event per transition, none for the converged passes; Degraded=False is Normal.
	want := []string{"Normal/Degraded/AsExpected", "Normal/Ready/Progressing", "Normal/Ready/Succeeded"}
	testenv.Eventually(t, testenv.DefaultTimeout, "one event per transition", func() (bool, string) {
		got := f.events(t, "w")
		return slices.Equal(got, want), sliceString(got)
	})
}

func sliceString(s []string) string {
	out := ""
	for _, x := range s {
		out += x + "\n"
	}
	return out
}

// TestFoldNormalEvents: the Normal transitions of a pass of the types FoldNormalEvents
// lists are one event, named after the last, whose note lists them all; each Warning and
// other types keep their own.
func TestFoldNormalEvents(t *testing.T) {
	f := newFixture(t, func(_ context.Context, u *unstructured.Unstructured) (reconciler.Result, error) {
		setCondition(u, cond("Scheduled", "True", "Succeeded"))
		setCondition(u, cond(conditions.TypeDegraded, "True", "ReplicaLost"))
		setCondition(u, cond("Provisioned", "True", "Succeeded"))
		setCondition(u, cond("Ready", "True", "Done"))
		setCondition(u, cond("Upgraded", "True", "Done"))
		return reconciler.Done(), nil
	})
	f.cfg.FoldNormalEvents = []string{"Scheduled", conditions.TypeDegraded, "Provisioned", "Ready"}
	r, err := reconciler.New(f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	createWidget(t, f.ns, "w")
	if _, err := f.reconcile(t, r, "w"); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, testenv.DefaultTimeout, "one Normal event and the Warning", func() (bool, string) {
		got := f.events(t, "w")
		return slices.Equal(got, []string{"Normal/Ready/Done", "Normal/Upgraded/Done", "Warning/Degraded/ReplicaLost"}), sliceString(got)
	})
	evs := &eventsv1.EventList{}
	if err := env.Client.List(context.Background(), evs, client.InNamespace(f.ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range evs.Items {
		if want := "Ready: Ready is Done. (this pass: Scheduled Succeeded, Provisioned Succeeded, Ready Done)"; e.Action == "Ready" && e.Note != want {
			t.Errorf("folded event's note %q, want %q", e.Note, want)
		}
	}
}

func TestTerminalAndErrors(t *testing.T) {
	var runErr error
	f := newFixture(t, func(_ context.Context, u *unstructured.Unstructured) (reconciler.Result, error) {
		if runErr != nil {
			setCondition(u, cond("Ready", "Unknown", "Progressing"))
			return reconciler.Done(), runErr
		}
		setCondition(u, cond("Ready", "False", "Failed"))
		setCondition(u, cond(conditions.TypeDegraded, "True", "ReplicaLost"))
		return reconciler.Terminal(errors.New("spec.size is too large")), nil
	})
	r, err := reconciler.New(f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	createWidget(t, f.ns, "w")
	failedBefore, errorBefore := r.Metrics().Count(reconciler.OutcomeFailed), r.Metrics().Count(reconciler.OutcomeError)

	res, err := f.reconcile(t, r, "w")
	if !errors.Is(err, reconcile.TerminalError(nil)) || res.RequeueAfter != 0 {
		t.Fatalf("terminal pass = %+v, %v; want a terminal error", res, err)
	}
	w := f.get(t, "w")
	if observedGeneration(w) != w.GetGeneration() {
		t.Errorf("a terminal pass judged the spec: observedGeneration %d, want %d", observedGeneration(w), w.GetGeneration())
	}
	testenv.Eventually(t, testenv.DefaultTimeout, "warnings for the issues", func() (bool, string) {
		got := f.events(t, "w")
		return slices.Equal(got, []string{"Warning/Degraded/ReplicaLost", "Warning/Ready/Failed"}), sliceString(got)
	})

	// A transient error: status still written, the error returned for back-off, and the
	// new generation not claimed as observed.
	u := f.get(t, "w")
	u.Object["spec"] = map[string]any{"size": int64(2)}
	if err := env.Client.Update(context.Background(), u); err != nil {
		t.Fatal(err)
	}
	runErr = errors.New("the API server timed out")
	if _, err := f.reconcile(t, r, "w"); !errors.Is(err, runErr) || errors.Is(err, reconcile.TerminalError(nil)) {
		t.Fatalf("erroring pass returned %v, want the run's error", err)
	}
	w = f.get(t, "w")
	if observedGeneration(w) == w.GetGeneration() || conds(w)[0].Reason != "Progressing" {
		t.Errorf("after an error: observedGeneration %d of %d, conditions %+v", observedGeneration(w), w.GetGeneration(), conds(w))
	}
	if r.Metrics().Count(reconciler.OutcomeFailed)-failedBefore != 1 || r.Metrics().Count(reconciler.OutcomeError)-errorBefore != 1 {
		t.Errorf("outcomes: failed +%v, error +%v; want +1 each", r.Metrics().Count(reconciler.OutcomeFailed)-failedBefore, r.Metrics().Count(reconciler.OutcomeError)-errorBefore)
	}
}

func TestGoneObjects(t *testing.T) {
	f := newFixture(t, func(ctx context.Context, u *unstructured.Unstructured) (reconciler.Result, error) {
		// Deleted while the pass ran: the status write finds it gone.
		if err := env.Client.Delete(ctx, u.DeepCopy()); err != nil {
			return reconciler.Done(), err
		}
		setCondition(u, cond("Ready", "True", "Succeeded"))
		return reconciler.Done(), nil
	})
	r, err := reconciler.New(f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := f.reconcile(t, r, "never-created"); err != nil || res != (reconcile.Result{}) {
		t.Errorf("missing object: %+v, %v; want done", res, err)
	}
	createWidget(t, f.ns, "w")
	if res, err := f.reconcile(t, r, "w"); err != nil || res != (reconcile.Result{}) {
		t.Errorf("object deleted during the pass: %+v, %v; want done, the next event reconciles", res, err)
	}
}

func TestFinalizerStep(t *testing.T) {
	const fin = "test.opsuite.io/cleanup"
	var ran, finalized int
	cleanupDone := false
	f := newFixture(t, func(_ context.Context, u *unstructured.Unstructured) (reconciler.Result, error) {
		ran++
		setCondition(u, cond("Ready", "True", "Succeeded"))
		return reconciler.Done(), nil
	})
	f.cfg.Finalizer = fin
	f.cfg.Finalize = func(context.Context, *unstructured.Unstructured) (reconciler.Result, error) {
		finalized++
		if !cleanupDone {
			return reconciler.Wait(time.Second), nil
		}
		return reconciler.Done(), nil
	}
	r, err := reconciler.New(f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	createWidget(t, f.ns, "w")

	// First pass: add the finalizer and stop; the pass proper runs next time.
	if res, err := f.reconcile(t, r, "w"); err != nil || res != (reconcile.Result{}) {
		t.Fatal(res, err)
	}
	if w := f.get(t, "w"); !slices.Contains(w.GetFinalizers(), fin) || ran != 0 {
		t.Fatalf("after the first pass: finalizers %v, pass ran %d times", w.GetFinalizers(), ran)
	}
	if _, err := f.reconcile(t, r, "w"); err != nil || ran != 1 {
		t.Fatalf("second pass: %v, ran %d", err, ran)
	}

	// Deletion: the finalizer step runs; waiting keeps the finalizer, done removes it.
	if err := env.Client.Delete(context.Background(), f.get(t, "w")); err != nil {
		t.Fatal(err)
	}
	if res, err := f.reconcile(t, r, "w"); err != nil || res.RequeueAfter != time.Second || finalized != 1 {
		t.Fatalf("finalizing while cleanup waits: %+v, %v, finalize ran %d", res, err, finalized)
	}
	if w := f.get(t, "w"); !slices.Contains(w.GetFinalizers(), fin) {
		t.Fatal("finalizer removed before the cleanup finished")
	}
	cleanupDone = true
	if _, err := f.reconcile(t, r, "w"); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: f.ns, Name: "w"}, newWidget()); !apierrors.IsNotFound(err) {
		t.Fatalf("widget still there after its finalizer step: %v", err)
	}
	if ran != 1 {
		t.Errorf("the pass ran on an object being deleted (%d runs)", ran)
	}

	// Never add a finalizer to an object already being deleted.
	createWidget(t, f.ns, "held", "test.opsuite.io/hold")
	if err := env.Client.Delete(context.Background(), f.get(t, "held")); err != nil {
		t.Fatal(err)
	}
	held := f.get(t, "held")
	added, err := reconciler.EnsureFinalizer(context.Background(), env.Client, held, fin)
	if err != nil || added {
		t.Fatalf("EnsureFinalizer on a deleted object: added=%v, %v", added, err)
	}
	if _, err := f.reconcile(t, r, "held"); err != nil {
		t.Fatal(err)
	}
	if got := f.get(t, "held").GetFinalizers(); !slices.Equal(got, []string{"test.opsuite.io/hold"}) {
		t.Errorf("finalizers of an object being deleted: %v", got)
	}
	held.SetFinalizers(nil)
	if err := env.Client.Update(context.Background(), held); err != nil {
		t.Fatal(err)
	}
}

func TestConfigIsChecked(t *testing.T) {
	_, err := reconciler.New(reconciler.Config[*unstructured.Unstructured]{Finalize: func(context.Context, *unstructured.Unstructured) (reconciler.Result, error) {
		return reconciler.Done(), nil
	}, OwnEvents: true})
	for _, want := range []string{"Name is empty", "Client is nil", "New and Run are required", "Finalize needs a Finalizer", "OwnEvents needs Conditions"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not say %q", err, want)
		}
	}
}
