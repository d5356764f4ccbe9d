package controller

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	valdv1 "github.com/opsuite/suite/api/vald/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

const (
	statusCompleted = "Completed 3/3 Ready | WaitingClusterCreate=True/Succeeded WaitingCreateVrs=True/Succeeded Completed=True/Succeeded"
)

func TestPhasesInOrder(t *testing.T) {
	h := start(t, nil)
	rec := h.recordStatuses("vor")
	h.create(h.release("vor", "a=id-a", "b=id-b"))
	vor := h.waitStatus("vor", statusCompleted)

	// Every status the API server stored, in order: every phase reached and evaluated in
	// the first pass, so one status write takes the release to Completed.
	want := []string{
		"   | ",
		statusCompleted,
	}
	h.waitFor("the watch to deliver the final status", func() bool { s := rec.statuses(); return len(s) > 0 && s[len(s)-1] == statusCompleted })
	if got := rec.statuses(); !slices.Equal(got, want) {
		t.Errorf("statuses in order:\n got  %q\n want %q", got, want)
	}

	// The exact conditions.
	wantConds := []metav1.Condition{
		{Type: valdv1.ConditionWaitingClusterCreate, Status: metav1.ConditionTrue, Reason: valdv1.ReasonSucceeded, Message: "Every cluster of the active infrastructure entries has an id and a name."},
		{Type: valdv1.ConditionWaitingCreateVrs, Status: metav1.ConditionTrue, Reason: valdv1.ReasonSucceeded, Message: "Every ValdRelease exists with the current generation."},
		{Type: valdv1.ConditionCompleted, Status: metav1.ConditionTrue, Reason: valdv1.ReasonSucceeded, Message: "Every phase succeeded."},
	}
	for i, c := range vor.Status.Conditions {
		w := wantConds[i]
		if c.Type != w.Type || c.Status != w.Status || c.Reason != w.Reason || c.Message != w.Message || c.ObservedGeneration != vor.Generation {
			t.Errorf("condition %d: %+v, want %+v at generation %d", i, c, w, vor.Generation)
		}
	}
	if vor.Status.Progress != (valdv1.Progress{Total: 3, Completed: 3}) {
		t.Errorf("progress %+v", vor.Status.Progress)
	}

	// The ValdReleases: named <namespace>-<cluster>, labelled, owned, created by our field manager.
	vrs := h.valdReleases()
	if got := names(vrs); got != h.ns+"-a,"+h.ns+"-b" {
		t.Fatalf("ValdReleases %s", got)
	}
	for _, vr := range vrs {
		owner := metav1.GetControllerOf(&vr)
		if owner == nil || owner.UID != vor.UID || owner.Kind != "ValdOperatorRelease" {
			t.Errorf("%s: controller reference %+v", vr.Name, owner)
		}
		if vr.Labels[valdv1.LabelManagedGeneration] != "1" || vr.Labels[valdv1.LabelOperatorRelease] != "vor" {
			t.Errorf("%s: labels %v", vr.Name, vr.Labels)
		}
		var managers []string
		for _, mf := range vr.ManagedFields {
			managers = append(managers, mf.Manager+"/"+string(mf.Operation))
		}
		// Created, not applied (see createFirstClient): the first apply takes the fields over.
		if !slices.Equal(managers, []string{"vald-operator/Update"}) {
			t.Errorf("%s: field managers %v", vr.Name, managers)
		}
		if !strings.Contains(string(vr.Spec.Raw), `"dimension":8`) {
			t.Errorf("%s: spec %s", vr.Name, vr.Spec.Raw)
		}
	}

	// The phases passed in one pass are one event, named after the last, its reason the
	// condition's reason, its note listing every transition.
	h.waitFor("events", func() bool {
		return slices.Equal(h.events("vor"), []string{"Normal Completed/Succeeded"})
	})
	if note := h.eventNotes("vor")[0]; note != "Completed: Every phase succeeded. (this pass: WaitingClusterCreate Succeeded, WaitingCreateVrs Succeeded, Completed Succeeded)" {
		t.Errorf("event note %q", note)
	}
}

func TestPendingUntilClusterIDIsSet(t *testing.T) {
	h := start(t, nil)
	h.create(h.release("vor", "a=id-a", "b="))
	vor := h.waitStatus("vor", "WaitingClusterCreate 0/3 Pending | WaitingClusterCreate=Unknown/Pending")
	if msg := condition(vor, valdv1.ConditionWaitingClusterCreate).Message; msg != "Waiting for an external system to set 1 cluster id(s) and 0 cluster name(s) of the active infrastructure entries." {
		t.Errorf("message %q", msg)
	}
	if n := len(h.valdReleases()); n != 0 {
		t.Errorf("%d ValdReleases while Pending", n)
	}

	// Pending requeues after the configured interval; it is not an error.
	res, err := h.r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: h.ns, Name: "vor"}})
	if err != nil || res.RequeueAfter != h.opts.RequeueAfter {
		t.Errorf("Reconcile while Pending = %+v, %v; want RequeueAfter %s and no error", res, err, h.opts.RequeueAfter)
	}

	h.update("vor", func(v *valdv1.ValdOperatorRelease) { v.Spec.Infrastructure[0].Clusters[1].ID = "id-b" })
	h.waitStatus("vor", statusCompleted)
	if got := names(h.valdReleases()); got != h.ns+"-a,"+h.ns+"-b" {
		t.Errorf("ValdReleases %s", got)
	}
}

func TestFailedInfrastructure(t *testing.T) {
	h := start(t, nil)
	empty := h.release("empty")
	empty.Spec.Infrastructure = nil
	h.create(empty)
	vor := h.waitStatus("empty", "WaitingClusterCreate 0/3 Failed | WaitingClusterCreate=False/Failed")
	if msg := condition(vor, valdv1.ConditionWaitingClusterCreate).Message; msg != "spec.infrastructure is empty: add an entry with the clusters to release Vald to." {
		t.Errorf("message %q", msg)
	}

	// Failed waits for a spec change: no requeue, a terminal error.
	res, err := h.r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: h.ns, Name: "empty"}})
	if !errors.Is(err, reconcile.TerminalError(nil)) || res.RequeueAfter != 0 {
		t.Errorf("Reconcile while Failed = %+v, %v; want a terminal error without requeue", res, err)
	}

	h.create(h.release("noclusters"))
	vor = h.waitStatus("noclusters", "WaitingClusterCreate 0/3 Failed | WaitingClusterCreate=False/Failed")
	if msg := condition(vor, valdv1.ConditionWaitingClusterCreate).Message; msg != `Infrastructure entry "green" has no clusters: add at least one cluster.` {
		t.Errorf("message %q", msg)
	}

	// Fixing the spec recovers.
	h.update("noclusters", func(v *valdv1.ValdOperatorRelease) {
		v.Spec.Infrastructure[0].Clusters = []valdv1.Cluster{{Name: "a", ID: "1"}}
	})
	h.waitStatus("noclusters", statusCompleted)
}

func TestSelfHealing(t *testing.T) {
	h := start(t, nil)
	h.create(h.release("vor", "a=1", "b=2"))
	h.waitStatus("vor", statusCompleted)

	// A ValdRelease deleted behind the controller's back comes back.
	vr := h.valdReleases()[0]
	if err := env.Client.Delete(context.Background(), &vr); err != nil {
		t.Fatal(err)
	}
	h.waitFor("the ValdRelease to be recreated", func() bool {
		for _, v := range h.valdReleases() {
			if v.Name == vr.Name && v.UID != vr.UID {
				return true
			}
		}
		return false
	})
	h.waitStatus("vor", statusCompleted)

	// A broken spec.infrastructure sends the lifecycle back; the later phases wait.
	h.update("vor", func(v *valdv1.ValdOperatorRelease) { v.Spec.Infrastructure[0].Clusters[0].ID = "" })
	vor := h.waitStatus("vor", "WaitingClusterCreate 0/3 Pending | WaitingClusterCreate=Unknown/Pending WaitingCreateVrs=Unknown/Blocked Completed=Unknown/Blocked")
	if msg := condition(vor, valdv1.ConditionCompleted).Message; msg != "Waiting for phase WaitingClusterCreate to succeed again." {
		t.Errorf("message %q", msg)
	}
	h.update("vor", func(v *valdv1.ValdOperatorRelease) { v.Spec.Infrastructure[0].Clusters[0].ID = "1" })
	vor = h.waitStatus("vor", statusCompleted)
	if len(vor.Status.Conditions) != 3 {
		t.Errorf("conditions %v", vor.Status.Conditions)
	}
}

func TestPruning(t *testing.T) {
	h := start(t, nil)
	h.create(h.release("vor", "a=1", "b=2", "c=3"))
	h.waitStatus("vor", statusCompleted)

	// Renamed cluster: the old ValdRelease goes, the new one comes.
	h.update("vor", func(v *valdv1.ValdOperatorRelease) { v.Spec.Infrastructure[0].Clusters[1].Name = "b2" })
	h.waitStatus("vor", statusCompleted)
	h.waitFor("the renamed ValdRelease", func() bool { return names(h.valdReleases()) == h.ns+"-a,"+h.ns+"-b2,"+h.ns+"-c" })

	// Removed cluster.
	h.update("vor", func(v *valdv1.ValdOperatorRelease) {
		v.Spec.Infrastructure[0].Clusters = v.Spec.Infrastructure[0].Clusters[:1]
	})
	h.waitStatus("vor", statusCompleted)
	h.waitFor("the pruned ValdReleases", func() bool { return names(h.valdReleases()) == h.ns+"-a" })
	if g := h.valdReleases()[0].Labels[valdv1.LabelManagedGeneration]; g != "3" {
		t.Errorf("managed-generation %s, want 3", g)
	}

	// A ValdRelease labelled for this release but owned by nobody is not pruned.
	stray := &valdv1.ValdRelease{ObjectMeta: metav1.ObjectMeta{Name: "stray", Namespace: h.ns, Labels: map[string]string{valdv1.LabelOperatorRelease: "vor"}}}
	h.create(stray)
	h.update("vor", func(v *valdv1.ValdOperatorRelease) { v.Spec.Infrastructure[0].Clusters[0].Name = "a2" })
	h.waitStatus("vor", statusCompleted)
	h.waitFor("only the stray and the renamed ValdRelease", func() bool { return names(h.valdReleases()) == "stray,"+h.ns+"-a2" })
}

func TestEmptyRenderPrunesNothing(t *testing.T) {
	h := start(t, nil)
	h.create(h.release("vor", "a=1", "b=2"))
	h.waitStatus("vor", statusCompleted)

	inactive := false
	h.update("vor", func(v *valdv1.ValdOperatorRelease) { v.Spec.Infrastructure[0].Active = &inactive })
	vor := h.waitStatus("vor", "WaitingCreateVrs 1/3 Failed | WaitingClusterCreate=True/Succeeded WaitingCreateVrs=False/Failed Completed=Unknown/Blocked")
	if msg := condition(vor, valdv1.ConditionWaitingCreateVrs).Message; !strings.HasPrefix(msg, "No infrastructure entry is active") {
		t.Errorf("message %q", msg)
	}
	if got := names(h.valdReleases()); got != h.ns+"-a,"+h.ns+"-b" {
		t.Errorf("ValdReleases after an empty render: %s", got)
	}

	h.update("vor", func(v *valdv1.ValdOperatorRelease) { v.Spec.Infrastructure[0].Active = nil })
	h.waitStatus("vor", statusCompleted)
}

func TestNameTooLong(t *testing.T) {
	h := start(t, nil)
	long := strings.Repeat("x", 63-len(h.ns)) // <namespace>-<name> is 64 characters
	h.create(h.release("vor", long+"=1"))
	vor := h.waitStatus("vor", "WaitingCreateVrs 1/3 Failed | WaitingClusterCreate=True/Succeeded WaitingCreateVrs=False/Failed")
	if msg := condition(vor, valdv1.ConditionWaitingCreateVrs).Message; !strings.Contains(msg, "is 64 characters, longer than 63: shorten cluster name") {
		t.Errorf("message %q", msg)
	}
}

func TestConvergedPassWritesNothing(t *testing.T) {
	h := start(t, nil)
	h.create(h.release("vor", "a=1", "b=2"))
	h.waitStatus("vor", statusCompleted)
	h.waitFor("the cache to settle", func() bool {
		before := h.writes.Count()
		_, err := h.r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: h.ns, Name: "vor"}})
		return err == nil && h.writes.Count() == before
	})
	before := h.writes.Count()
	for range 5 {
		res, err := h.r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: h.ns, Name: "vor"}})
		if err != nil || res != (reconcile.Result{}) {
			t.Fatalf("converged Reconcile = %+v, %v", res, err)
		}
	}
	if n := h.writes.Count() - before; n != 0 {
		t.Errorf("5 converged passes wrote %d times, want 0", n)
	}
}
