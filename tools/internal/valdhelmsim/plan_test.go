package valdhelmsim

import (
	"strings"
	"testing"
	"time"
)

// step runs Next as the reconciler would at now for a try that began at started, and
// returns the observed object with the planned status in place.
func step(t *testing.T, o Observed, started, now time.Time, delay time.Duration) (Observed, Plan) {
	t.Helper()
	p, err := Next(o, started, now, delay, true)
	if err != nil {
		t.Fatal(err)
	}
	o.Status = p.Status
	o.HasFinalizer = (o.HasFinalizer || p.AddFinalizer) && !p.RemoveFinalizer
	return o, p
}

func cond(t *testing.T, s Status, typ string) Condition {
	t.Helper()
	c := s.Get(typ)
	if c == nil {
		t.Fatalf("no %s condition in %+v", typ, s.Conditions)
	}
	return *c
}

func wantCond(t *testing.T, s Status, typ, status, reason, message string) Condition {
	t.Helper()
	c := cond(t, s, typ)
	if c.Status != status || c.Reason != reason || c.Message != message {
		t.Fatalf("%s = %s/%s %q, want %s/%s %q", typ, c.Status, c.Reason, c.Message, status, reason, message)
	}
	return c
}

func wantNoCond(t *testing.T, s Status, typ string) {
	t.Helper()
	if c := s.Get(typ); c != nil {
		t.Fatalf("unexpected %s condition %+v", typ, *c)
	}
}

func TestInstallAfterDelayThenUpgradePerGeneration(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
	delay := 2 * time.Second
	o := Observed{Namespace: "ns", Name: "vr", Generation: 1, Spec: map[string]any{"agent": map[string]any{"ngt": map[string]any{"dimension": 3}}}}

	o, p := step(t, o, t0, t0, delay)
	wantCond(t, o.Status, ConditionInitialized, "True", "", "")
	wantNoCond(t, o.Status, ConditionDeployed)
	if p.RequeueAfter != delay || o.Status.DeployedRelease != nil || p.AddFinalizer {
		t.Fatalf("first pass: requeue %s, release %+v, finalizer %t; want %s, none, false", p.RequeueAfter, o.Status.DeployedRelease, p.AddFinalizer, delay)
	}
	o, p = step(t, o, t0, t0.Add(1500*time.Millisecond), delay)
	wantNoCond(t, o.Status, ConditionDeployed)
	if p.RequeueAfter != 500*time.Millisecond {
		t.Fatalf("requeue %s, want the rest of the delay", p.RequeueAfter)
	}
	o, p = step(t, o, t0, t0.Add(delay), delay)
	installed := wantCond(t, o.Status, ConditionDeployed, "True", ReasonInstallSuccessful, DeployedMessage)
	if p.RequeueAfter != 0 || o.Status.DeployedRelease == nil || o.Status.DeployedRelease.Name != "vr" || !p.AddFinalizer {
		t.Fatalf("after the delay: requeue %s, release %+v, finalizer added %t", p.RequeueAfter, o.Status.DeployedRelease, p.AddFinalizer)
	}
	if gen, ok := releasedGeneration(o.Status.DeployedRelease); !ok || gen != 1 {
		t.Fatalf("released generation %d (%t), want 1", gen, ok)
	}
	// Settled: another pass changes nothing.
	if again, _ := step(t, o, t0, t0.Add(time.Hour), delay); !statusEqual(again.Status, o.Status) {
		t.Fatalf("a settled release changed: %+v", again.Status)
	}

	// Generation 2: until its try ends the status still shows generation 1's release.
	t1 := t0.Add(time.Minute)
	o.Generation, o.Spec = 2, map[string]any{"agent": map[string]any{"ngt": map[string]any{"dimension": 4}}}
	o, p = step(t, o, t1, t1, delay)
	wantCond(t, o.Status, ConditionDeployed, "True", ReasonInstallSuccessful, DeployedMessage)
	if gen, _ := releasedGeneration(o.Status.DeployedRelease); gen != 1 || p.RequeueAfter != delay {
		t.Fatalf("during the upgrade: released generation %d, requeue %s", gen, p.RequeueAfter)
	}
	o, _ = step(t, o, t1, t1.Add(delay), delay)
	upgraded := wantCond(t, o.Status, ConditionDeployed, "True", ReasonUpgradeSuccessful, DeployedMessage)
	if !upgraded.LastTransitionTime.Equal(&installed.LastTransitionTime) {
		t.Fatalf("Deployed stayed True but its transition time moved: %s -> %s", installed.LastTransitionTime, upgraded.LastTransitionTime)
	}
	if gen, _ := releasedGeneration(o.Status.DeployedRelease); gen != 2 {
		t.Fatalf("released generation %d, want 2", gen)
	}
}

func TestFailAnnotation(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
	delay := time.Second
	o := Observed{Namespace: "ns", Name: "vr", Generation: 1, Annotations: map[string]string{AnnotationFail: "chart render failed"}}

	// Install fails after the try's time; Deployed never appears.
	o, _ = step(t, o, t0, t0, delay)
	wantNoCond(t, o.Status, ConditionReleaseFailed)
	o, p := step(t, o, t0, t0.Add(delay), delay)
	wantCond(t, o.Status, ConditionReleaseFailed, "True", ReasonInstallError, "chart render failed")
	wantNoCond(t, o.Status, ConditionDeployed)
	if p.RequeueAfter != 0 || o.Status.DeployedRelease != nil || o.HasFinalizer {
		t.Fatalf("failed install: requeue %s, release %+v, finalizer %t", p.RequeueAfter, o.Status.DeployedRelease, o.HasFinalizer)
	}

	// The annotation removed: a new try installs, and the failure goes.
	t1 := t0.Add(time.Minute)
	o.Annotations = nil
	o, _ = step(t, o, t1, t1, delay)
	wantCond(t, o.Status, ConditionReleaseFailed, "True", ReasonInstallError, "chart render failed")
	o, _ = step(t, o, t1, t1.Add(delay), delay)
	wantNoCond(t, o.Status, ConditionReleaseFailed)
	wantCond(t, o.Status, ConditionDeployed, "True", ReasonInstallSuccessful, DeployedMessage)

	// Failing an upgrade (or a re-release) keeps the deployed release and Deployed.
	t2 := t1.Add(time.Minute)
	o.Annotations = map[string]string{AnnotationFail: "upgrade refused"}
	o, _ = step(t, o, t2, t2.Add(delay), delay)
	wantCond(t, o.Status, ConditionReleaseFailed, "True", ReasonUpgradeError, "upgrade refused")
	wantCond(t, o.Status, ConditionDeployed, "True", ReasonInstallSuccessful, DeployedMessage)
	if gen, _ := releasedGeneration(o.Status.DeployedRelease); gen != 1 {
		t.Fatalf("released generation %d after a failed upgrade, want 1", gen)
	}
	// Removed again with the deployed generation current: nothing to upgrade, the
	// failure clears at once (the real operator drops an abandoned try's failure).
	o.Annotations = nil
	o, p = step(t, o, t2.Add(2*time.Minute), t2.Add(2*time.Minute), delay)
	wantNoCond(t, o.Status, ConditionReleaseFailed)
	if p.RequeueAfter != 0 {
		t.Fatalf("requeue %s with nothing to do", p.RequeueAfter)
	}
}

func TestIrreconcilableAnnotation(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
	o := Observed{Namespace: "ns", Name: "vr", Generation: 1, Annotations: map[string]string{AnnotationIrreconcilable: "release history unreadable"}}
	o, p := step(t, o, t0, t0.Add(time.Hour), time.Second)
	wantCond(t, o.Status, ConditionIrreconcilable, "True", ReasonReconcileError, "release history unreadable")
	wantCond(t, o.Status, ConditionInitialized, "True", "", "")
	wantNoCond(t, o.Status, ConditionDeployed)
	if p.RequeueAfter != 0 {
		t.Fatalf("requeue %s, want none (the annotation's removal wakes it)", p.RequeueAfter)
	}
	o.Annotations = nil
	o, _ = step(t, o, t0.Add(time.Hour), t0.Add(time.Hour+time.Second), time.Second)
	wantNoCond(t, o.Status, ConditionIrreconcilable)
	wantCond(t, o.Status, ConditionDeployed, "True", ReasonInstallSuccessful, DeployedMessage)
}

func TestUninstall(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
	delay := time.Second
	o := Observed{Namespace: "ns", Name: "vr", Generation: 1}
	o, _ = step(t, o, t0, t0.Add(delay), delay)
	wantCond(t, o.Status, ConditionDeployed, "True", ReasonInstallSuccessful, DeployedMessage)
	if !o.HasFinalizer {
		t.Fatal("a deployed release is not held by the finalizer")
	}

	// Deleted: held for the uninstall try, then Deployed=False and the finalizer goes.
	t1 := t0.Add(time.Minute)
	o.Deleting = true
	o, p := step(t, o, t1, t1.Add(delay/2), delay)
	wantCond(t, o.Status, ConditionDeployed, "True", ReasonInstallSuccessful, DeployedMessage)
	if p.RemoveFinalizer || p.RequeueAfter != delay/2 {
		t.Fatalf("during the uninstall: remove %t, requeue %s", p.RemoveFinalizer, p.RequeueAfter)
	}
	failing := o
	o, p = step(t, o, t1, t1.Add(delay), delay)
	wantCond(t, o.Status, ConditionDeployed, "False", ReasonUninstallSuccessful, "")
	if !p.RemoveFinalizer || o.Status.DeployedRelease != nil {
		t.Fatalf("after the uninstall: remove %t, release %+v", p.RemoveFinalizer, o.Status.DeployedRelease)
	}

	// A failing uninstall keeps the object and says why.
	failing.Annotations = map[string]string{AnnotationFail: "uninstall refused"}
	failing, p = step(t, failing, t1, t1.Add(delay), delay)
	wantCond(t, failing.Status, ConditionReleaseFailed, "True", ReasonUninstallError, "uninstall refused")
	wantCond(t, failing.Status, ConditionDeployed, "True", ReasonInstallSuccessful, DeployedMessage)
	if p.RemoveFinalizer {
		t.Fatal("a failed uninstall released the object")
	}

	// Never installed (no finalizer): nothing to do, nothing written.
	bare := Observed{Namespace: "ns", Name: "bare", Generation: 1, Deleting: true}
	if p, err := Next(bare, t1, t1.Add(time.Hour), delay, true); err != nil || p.RemoveFinalizer || len(p.Status.Conditions) != 0 {
		t.Fatalf("deleting an uninstalled release: %+v, %v", p, err)
	}
	// Without the finalizer modelled, a release is never held.
	if p, err := Next(Observed{Name: "vr", Generation: 1}, t0, t0.Add(delay), delay, false); err != nil || p.AddFinalizer {
		t.Fatalf("finalizer added when not modelled: %+v, %v", p, err)
	}
}

func TestReleasedGeneration(t *testing.T) {
	m, err := renderManifest(Observed{Namespace: "ns", Name: "vr", Generation: 42, Spec: map[string]any{"a": 1}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(m, "kind: ConfigMap") || !strings.Contains(m, `generation: "42"`) {
		t.Fatalf("manifest:\n%s", m)
	}
	for _, tc := range []struct {
		name string
		r    *Release
		gen  int64
		ok   bool
	}{
		{"none", nil, 0, false},
		{"ours", &Release{Name: "vr", Manifest: m}, 42, true},
		{"another operator's", &Release{Name: "vr", Manifest: "---\n# Source: vald/templates/gateway.yaml\nkind: Deployment\n"}, 0, true},
	} {
		gen, ok := releasedGeneration(tc.r)
		if gen != tc.gen || ok != tc.ok {
			t.Errorf("%s: generation %d (%t), want %d (%t)", tc.name, gen, ok, tc.gen, tc.ok)
		}
	}
}
