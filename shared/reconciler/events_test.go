package reconciler_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/opsuite/suite/shared/conditions"
	"github.com/opsuite/suite/shared/reconciler"
	"github.com/opsuite/suite/shared/testenv"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestOwnEvents: with OwnEvents the kit records the pass's own events, not one per
// condition transition: an action at once, even when the status write then fails; a
// state only once a status write carrying it succeeded, and once only, however many
// passes follow, those reading the object from before the write included.
func TestOwnEvents(t *testing.T) {
	passes := 0
	f := newFixture(t, func(ctx context.Context, u *unstructured.Unstructured) (reconciler.Result, error) {
		passes++
		ev := reconciler.EventsOf(ctx)
		if passes == 1 {
			ev.Record(reconciler.Event{Type: corev1.EventTypeNormal, Reason: "ChildCreated", Note: "Created the child"})
		}
		setCondition(u, cond("Ready", "False", "WaitingForShards"))
		ev.OnTransition(reconciler.Transition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "WaitingForShards"},
			reconciler.Event{Type: corev1.EventTypeNormal, Reason: "WaitingForShards", Note: "0 of 3 shards exist"})
		// A state this pass does not write: never announced.
		ev.OnTransition(reconciler.Transition{Type: conditions.TypeDegraded, Status: metav1.ConditionTrue, Reason: "ReplicaLost"},
			reconciler.Event{Type: corev1.EventTypeWarning, Reason: "ReplicaLost", Note: "a replica is gone"})
		if passes == 1 {
			// A status the API server refuses (state is a string): the write fails.
			_ = unstructured.SetNestedField(u.Object, int64(1), "status", "state")
		}
		return reconciler.Wait(time.Second), nil
	})
	f.cfg.OwnEvents = true
	stale := &testenv.StaleReads{Kind: newWidget(), Reads: 2}
	f.cfg.Client = stale.Wrap(f.cfg.Client)
	r, err := reconciler.New(f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	createWidget(t, f.ns, "w")

	if _, err := f.reconcile(t, r, "w"); err == nil {
		t.Fatal("the pass whose status the API server refuses returned no error")
	}
	// The action is recorded, the state is not: the status does not say it.
	testenv.Eventually(t, testenv.DefaultTimeout, "the action's event", func() (bool, string) {
		got := f.events(t, "w")
		return slices.Contains(got, "Normal/ChildCreated/ChildCreated"), sliceString(got)
	})
	time.Sleep(time.Second)
	if got := f.events(t, "w"); !slices.Equal(got, []string{"Normal/ChildCreated/ChildCreated"}) {
		t.Fatalf("after the failed status write, events:\n%s want the action's only", sliceString(got))
	}

	for range 4 {
		if _, err := f.reconcile(t, r, "w"); err != nil {
			t.Fatal(err)
		}
	}
	if stale.Served() != 2 {
		t.Fatalf("%d stale reads served, want 2", stale.Served())
	}
	if n := f.writes.Count(); n != 2 {
		t.Errorf("5 passes wrote status %d times, want 2 (the refused write and one more)", n)
	}
	// No per-condition event (Normal/Ready/WaitingForShards): the operator's own only.
	testenv.Eventually(t, testenv.DefaultTimeout, "the state's event", func() (bool, string) {
		got := f.events(t, "w")
		return slices.Equal(got, []string{"Normal/ChildCreated/ChildCreated", "Normal/WaitingForShards/WaitingForShards"}), sliceString(got)
	})
	assertEventOnce(t, f.ns, "w", "WaitingForShards/WaitingForShards")
}
