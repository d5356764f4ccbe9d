package valdhelmsim

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opsuite/suite/shared/testenv"
)

// testDelay is long enough that a poll every 50 ms sees the state before each try ends.
const testDelay = 1500 * time.Millisecond

func newVR(ns, name string, spec map[string]any, annotations map[string]string) *unstructured.Unstructured {
	vr := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	vr.SetGroupVersionKind(ValdReleaseGVK)
	vr.SetNamespace(ns)
	vr.SetName(name)
	vr.SetAnnotations(annotations)
	return vr
}

// ownNames is chart values naming every component after the release, as the Vald
// operator does, so that the ValdReleases of one test do not render the same objects.
func ownNames(release string) map[string]any {
	named := func() map[string]any { return map[string]any{"name": release} }
	return map[string]any{
		"agent": named(),
		"discoverer": map[string]any{
			"name": release, "serviceAccountName": release,
			"clusterRole": named(), "clusterRoleBinding": named(),
		},
		"gateway": map[string]any{"lb": named()},
		"manager": map[string]any{"index": named()},
	}
}

func getVR(t *testing.T, ns, name string) *unstructured.Unstructured {
	t.Helper()
	vr := newVR(ns, name, nil, nil)
	if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, vr); err != nil {
		t.Fatal(err)
	}
	return vr
}

func describe(vr *unstructured.Unstructured) string {
	st := StatusOf(vr.Object)
	gen, ok := releasedGeneration(st.DeployedRelease)
	s := fmt.Sprintf("generation %d, released generation %d (%t), conditions:", vr.GetGeneration(), gen, ok)
	for _, c := range st.Conditions {
		s += fmt.Sprintf(" %s=%s/%s %q;", c.Type, c.Status, c.Reason, c.Message)
	}
	return s
}

// waitVR polls the ValdRelease until ok holds and returns it, with every status seen
// before (for "never earlier than" checks).
func waitVR(t *testing.T, ns, name, what string, ok func(*unstructured.Unstructured, Status) bool) (*unstructured.Unstructured, []Status) {
	t.Helper()
	var seen []Status
	var last *unstructured.Unstructured
	testenv.Eventually(t, 30*time.Second, fmt.Sprintf("ValdRelease %s/%s %s", ns, name, what), func() (bool, string) {
		last = getVR(t, ns, name)
		st := StatusOf(last.Object)
		if ok(last, st) {
			return true, ""
		}
		seen = append(seen, st)
		return false, describe(last)
	})
	return last, seen
}

func hasCond(st Status, typ, status, reason string) bool {
	c := st.Get(typ)
	return c != nil && c.Status == status && c.Reason == reason
}

func patchVR(t *testing.T, ns, name, patch string) {
	t.Helper()
	vr := newVR(ns, name, nil, nil)
	if err := env.Client.Patch(context.Background(), vr, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
}

func startSimulator(t *testing.T, ns string) {
	t.Helper()
	env.StartManager(t, func(mgr ctrl.Manager) error {
		return (&Reconciler{Client: mgr.GetClient(), DeployDelay: testDelay, Finalizer: true}).SetupWithManager(mgr, 2)
	}, testenv.InNamespaces(ns), func(o *ctrl.Options) { o.Client.Cache = &client.CacheOptions{Unstructured: true} })
}

// TestDeployAfterDelayAndUpgradePerGeneration: Initialized at once, Deployed
// (InstallSuccessful) no sooner than the delay, written through the status subresource;
// a new generation keeps showing the old release until its own try ends, then
// UpgradeSuccessful.
func TestDeployAfterDelayAndUpgradePerGeneration(t *testing.T) {
	ns := testenv.NewNamespace(t, env.Client, "vhs-deploy-")
	startSimulator(t, ns)
	ctx := context.Background()

	created := time.Now()
	if err := env.Client.Create(ctx, newVR(ns, "vr", map[string]any{"agent": map[string]any{"ngt": map[string]any{"dimension": int64(4)}}}, nil)); err != nil {
		t.Fatal(err)
	}
	_, before := waitVR(t, ns, "vr", "is Initialized", func(_ *unstructured.Unstructured, st Status) bool {
		return hasCond(st, ConditionInitialized, "True", "")
	})
	init := StatusOf(getVR(t, ns, "vr").Object)
	if init.Get(ConditionDeployed) != nil && time.Since(created) < testDelay {
		t.Fatalf("Deployed before the delay: %+v", init.Conditions)
	}
	for _, st := range before {
		if st.Get(ConditionDeployed) != nil {
			t.Fatalf("Deployed before Initialized: %+v", st.Conditions)
		}
	}
	vr, before := waitVR(t, ns, "vr", "is Deployed", func(_ *unstructured.Unstructured, st Status) bool {
		return hasCond(st, ConditionDeployed, "True", ReasonInstallSuccessful)
	})
	if took := time.Since(created); took < testDelay {
		t.Fatalf("Deployed %s after creation, before the %s delay", took, testDelay)
	}
	st := StatusOf(vr.Object)
	if st.DeployedRelease == nil || st.DeployedRelease.Name != "vr" || !strings.Contains(st.DeployedRelease.Manifest, `generation: "1"`) {
		t.Fatalf("deployedRelease %+v", st.DeployedRelease)
	}
	if len(before) == 0 {
		t.Fatal("never saw the release before it was Deployed")
	}
	// The status subresource was written (the spec is the user's alone).
	viaStatus := false
	for _, mf := range vr.GetManagedFields() {
		viaStatus = viaStatus || mf.Subresource == "status"
	}
	if !viaStatus {
		t.Fatalf("no managedFields entry for the status subresource: %+v", vr.GetManagedFields())
	}
	if dim, _, _ := unstructured.NestedInt64(vr.Object, "spec", "agent", "ngt", "dimension"); dim != 4 {
		t.Fatalf("spec changed: %v", vr.Object["spec"])
	}
	installedAt := st.Get(ConditionDeployed).LastTransitionTime

	// Generation 2.
	changed := time.Now()
	patchVR(t, ns, "vr", `{"spec":{"agent":{"ngt":{"dimension":8}}}}`)
	vr, before = waitVR(t, ns, "vr", "is upgraded to generation 2", func(vr *unstructured.Unstructured, st Status) bool {
		gen, _ := releasedGeneration(st.DeployedRelease)
		return vr.GetGeneration() == 2 && gen == 2
	})
	if took := time.Since(changed); took < testDelay {
		t.Fatalf("upgraded %s after the change, before the %s delay", took, testDelay)
	}
	if len(before) == 0 {
		t.Fatal("never saw generation 2 before its release")
	}
	for _, prev := range before {
		if !hasCond(prev, ConditionDeployed, "True", ReasonInstallSuccessful) {
			t.Fatalf("while upgrading, Deployed was not the installed release's: %+v", prev.Conditions)
		}
	}
	st = StatusOf(vr.Object)
	d := st.Get(ConditionDeployed)
	if d == nil || d.Status != "True" || d.Reason != ReasonUpgradeSuccessful || !d.LastTransitionTime.Equal(&installedAt) {
		t.Fatalf("after the upgrade: %s (installed at %s)", describe(vr), installedAt)
	}
}

// TestFailAndIrreconcilableAnnotations: the fail annotation fails the install
// (ReleaseFailed/InstallError with its message, no Deployed) and its removal recovers; on
// a deployed release it fails the upgrade (UpgradeError, Deployed kept); the
// irreconcilable annotation sets Irreconcilable at once and its removal clears it.
func TestFailAndIrreconcilableAnnotations(t *testing.T) {
	ns := testenv.NewNamespace(t, env.Client, "vhs-fail-")
	startSimulator(t, ns)
	ctx := context.Background()

	if err := env.Client.Create(ctx, newVR(ns, "bad", map[string]any{}, map[string]string{AnnotationFail: "values don't meet the specifications of the schema"})); err != nil {
		t.Fatal(err)
	}
	vr, _ := waitVR(t, ns, "bad", "failed to install", func(_ *unstructured.Unstructured, st Status) bool {
		return hasCond(st, ConditionReleaseFailed, "True", ReasonInstallError)
	})
	st := StatusOf(vr.Object)
	if c := st.Get(ConditionReleaseFailed); c.Message != "values don't meet the specifications of the schema" {
		t.Fatalf("ReleaseFailed message %q", c.Message)
	}
	if st.Get(ConditionDeployed) != nil || st.DeployedRelease != nil {
		t.Fatalf("a failed install shows a release: %s", describe(vr))
	}

	patchVR(t, ns, "bad", `{"metadata":{"annotations":{"`+AnnotationFail+`":null}}}`)
	vr, _ = waitVR(t, ns, "bad", "recovers once the annotation is gone", func(_ *unstructured.Unstructured, st Status) bool {
		return hasCond(st, ConditionDeployed, "True", ReasonInstallSuccessful)
	})
	if st := StatusOf(vr.Object); st.Get(ConditionReleaseFailed) != nil {
		t.Fatalf("ReleaseFailed kept after a successful install: %s", describe(vr))
	}

	// A failed upgrade keeps the deployed release.
	patchVR(t, ns, "bad", `{"metadata":{"annotations":{"`+AnnotationFail+`":"upgrade refused"}},"spec":{"x":1}}`)
	vr, _ = waitVR(t, ns, "bad", "failed to upgrade", func(_ *unstructured.Unstructured, st Status) bool {
		return hasCond(st, ConditionReleaseFailed, "True", ReasonUpgradeError)
	})
	st = StatusOf(vr.Object)
	if gen, _ := releasedGeneration(st.DeployedRelease); !hasCond(st, ConditionDeployed, "True", ReasonInstallSuccessful) || gen != 1 {
		t.Fatalf("a failed upgrade lost the deployed release: %s", describe(vr))
	}

	// Irreconcilable, at once, on top of everything else; cleared when removed.
	patchVR(t, ns, "bad", `{"metadata":{"annotations":{"`+AnnotationFail+`":null,"`+AnnotationIrreconcilable+`":"failed to get release history"}}}`)
	vr, _ = waitVR(t, ns, "bad", "is Irreconcilable", func(_ *unstructured.Unstructured, st Status) bool {
		return hasCond(st, ConditionIrreconcilable, "True", ReasonReconcileError)
	})
	if st := StatusOf(vr.Object); st.Get(ConditionIrreconcilable).Message != "failed to get release history" {
		t.Fatalf("Irreconcilable message: %s", describe(vr))
	}
	patchVR(t, ns, "bad", `{"metadata":{"annotations":{"`+AnnotationIrreconcilable+`":null}}}`)
	vr, _ = waitVR(t, ns, "bad", "is upgraded once nothing fails", func(_ *unstructured.Unstructured, st Status) bool {
		return hasCond(st, ConditionDeployed, "True", ReasonUpgradeSuccessful)
	})
	st = StatusOf(vr.Object)
	if st.Get(ConditionIrreconcilable) != nil || st.Get(ConditionReleaseFailed) != nil {
		t.Fatalf("failures kept after the upgrade: %s", describe(vr))
	}
	if gen, _ := releasedGeneration(st.DeployedRelease); gen != vr.GetGeneration() {
		t.Fatalf("released generation %d, want %d", gen, vr.GetGeneration())
	}
}

// TestDeletionWaitsForTheUninstall: a deployed ValdRelease carries the helm-operator's
// finalizer; deleted, it stays (deletionTimestamp set) for the uninstall try and then
// goes; with the fail annotation the uninstall fails (ReleaseFailed/UninstallError) and
// the object stays until the annotation is removed.
func TestDeletionWaitsForTheUninstall(t *testing.T) {
	ns := testenv.NewNamespace(t, env.Client, "vhs-delete-")
	startSimulator(t, ns)
	ctx := context.Background()
	for _, name := range []string{"vr", "stuck"} {
		if err := env.Client.Create(ctx, newVR(ns, name, ownNames(name), nil)); err != nil {
			t.Fatal(err)
		}
		vr, _ := waitVR(t, ns, name, "is Deployed", func(_ *unstructured.Unstructured, st Status) bool {
			return hasCond(st, ConditionDeployed, "True", ReasonInstallSuccessful)
		})
		if got := vr.GetFinalizers(); len(got) != 1 || got[0] != Finalizer {
			t.Fatalf("finalizers of a deployed release: %v", got)
		}
	}

	deleted := time.Now()
	if err := env.Client.Delete(ctx, newVR(ns, "vr", nil, nil)); err != nil {
		t.Fatal(err)
	}
	if vr := getVR(t, ns, "vr"); vr.GetDeletionTimestamp() == nil && time.Since(deleted) < testDelay {
		t.Fatalf("deleted but not held: %s", describe(vr))
	}
	testenv.Eventually(t, 30*time.Second, "the deleted ValdRelease is gone", func() (bool, string) {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "vr"}, newVR(ns, "vr", nil, nil))
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	if took := time.Since(deleted); took < testDelay {
		t.Fatalf("gone %s after the delete, before the %s uninstall", took, testDelay)
	}

	patchVR(t, ns, "stuck", `{"metadata":{"annotations":{"`+AnnotationFail+`":"uninstall refused"}}}`)
	waitVR(t, ns, "stuck", "fails its upgrade", func(_ *unstructured.Unstructured, st Status) bool {
		return hasCond(st, ConditionReleaseFailed, "True", ReasonUpgradeError)
	})
	if err := env.Client.Delete(ctx, newVR(ns, "stuck", nil, nil)); err != nil {
		t.Fatal(err)
	}
	vr, _ := waitVR(t, ns, "stuck", "fails its uninstall", func(_ *unstructured.Unstructured, st Status) bool {
		return hasCond(st, ConditionReleaseFailed, "True", ReasonUninstallError)
	})
	if vr.GetDeletionTimestamp() == nil || len(vr.GetFinalizers()) != 1 {
		t.Fatalf("a failed uninstall let go: %s, finalizers %v", describe(vr), vr.GetFinalizers())
	}
	patchVR(t, ns, "stuck", `{"metadata":{"annotations":{"`+AnnotationFail+`":null}}}`)
	testenv.Eventually(t, 30*time.Second, "the ValdRelease is gone once the uninstall succeeds", func() (bool, string) {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "stuck"}, newVR(ns, "stuck", nil, nil))
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}

// TestRestartedSimulatorWritesNothing: a simulator started afresh (a restart, or a newly
// elected leader) finds the deployed generation in deployedRelease and the finalizer in
// place, so it releases nothing again: no write at all, nothing pending.
func TestRestartedSimulatorWritesNothing(t *testing.T) {
	ns := testenv.NewNamespace(t, env.Client, "vhs-restart-")
	ctx := context.Background()
	if err := env.Client.Create(ctx, newVR(ns, "vr", map[string]any{"a": int64(1)}, nil)); err != nil {
		t.Fatal(err)
	}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "vr"}}
	const delay = 200 * time.Millisecond
	first := &Reconciler{Client: env.Client, DeployDelay: delay, Finalizer: true}
	testenv.Eventually(t, 30*time.Second, "the first simulator deploys the release", func() (bool, string) {
		res, err := first.Reconcile(ctx, req)
		if err != nil {
			return false, err.Error()
		}
		time.Sleep(res.RequeueAfter)
		vr := getVR(t, ns, "vr")
		return hasCond(StatusOf(vr.Object), ConditionDeployed, "True", ReasonInstallSuccessful) && len(vr.GetFinalizers()) == 1, describe(vr)
	})
	settled := getVR(t, ns, "vr").GetResourceVersion()

	var writes testenv.WriteCounter
	second := &Reconciler{Client: writes.Wrap(env.Client), DeployDelay: delay, Finalizer: true}
	for end := time.Now().Add(3 * delay); time.Now().Before(end); time.Sleep(delay / 4) {
		res, err := second.Reconcile(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if res.RequeueAfter != 0 {
			t.Fatalf("the restarted simulator started a try for a deployed release (requeue %s)", res.RequeueAfter)
		}
	}
	if n := writes.Count(); n != 0 {
		t.Fatalf("the restarted simulator wrote %d times", n)
	}
	if rv := getVR(t, ns, "vr").GetResourceVersion(); rv != settled {
		t.Fatalf("resourceVersion moved from %s to %s", settled, rv)
	}
}
