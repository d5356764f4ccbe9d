package valdhelmsim

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/opsuite/suite/api/vald/valdchart"
	"github.com/opsuite/suite/shared/testenv"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// TestRefusesWrongTypes: values of the wrong type for a key whose type the chart declares
// fail as Helm's schema check does, in the helm-operator's words: an install is
// ReleaseFailed/InstallError "failed to install release: <Helm's message>"; an upgrade
// fails the candidate release's dry run, Irreconcilable/ReconcileError "failed to get
// candidate release: <Helm's message>", at once, with the deployed release kept and no
// ReleaseFailed. Neither is retried until the values change.
func TestRefusesWrongTypes(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
	var spec map[string]any
	if err := json.Unmarshal([]byte(`{"discoverer": {"kind": "DaemonSet", "rollingUpdate": {"maxUnavailable": 1}}}`), &spec); err != nil {
		t.Fatal(err)
	}
	o := Observed{Namespace: "ns", Name: "vr", Generation: 1, Spec: spec}
	p, err := Next(o, t0, t0.Add(time.Second), time.Second, false)
	if err != nil {
		t.Fatal(err)
	}
	failed := p.Status.Get(ConditionReleaseFailed)
	helm := "values don't meet the specifications of the schema(s) in the following chart(s):\nvald:\n- at '/discoverer/rollingUpdate/maxUnavailable': got number, want string"
	if failed == nil || failed.Reason != ReasonInstallError || failed.Message != "failed to install release: "+helm || p.Status.Get(ConditionDeployed) != nil || p.Installed || p.RequeueAfter != 0 {
		t.Fatalf("plan %+v", p)
	}

	// Deployed with the string; a later generation with a number fails the upgrade.
	o.Spec = map[string]any{"discoverer": map[string]any{"rollingUpdate": map[string]any{"maxUnavailable": "1"}}}
	o.Status = p.Status
	p, err = Next(o, t0, t0.Add(2*time.Second), time.Second, false)
	if err != nil || !hasCond(p.Status, ConditionDeployed, "True", ReasonInstallSuccessful) || p.Status.Get(ConditionReleaseFailed) != nil {
		t.Fatalf("plan %+v, %v", p, err)
	}
	o.Status, o.Generation, o.Spec = p.Status, 2, spec
	deployed := p.Status.DeployedRelease
	// At the try's start, not after the deploy delay: the dry run comes first.
	p, err = Next(o, t0.Add(4*time.Second), t0.Add(4*time.Second), time.Second, false)
	if err != nil {
		t.Fatal(err)
	}
	wantCond(t, p.Status, ConditionIrreconcilable, "True", ReasonReconcileError, "failed to get candidate release: "+helm)
	wantNoCond(t, p.Status, ConditionReleaseFailed)
	if !hasCond(p.Status, ConditionDeployed, "True", ReasonInstallSuccessful) || !reflect.DeepEqual(p.Status.DeployedRelease, deployed) || p.Installed || p.RequeueAfter != 0 {
		t.Fatalf("plan %+v", p)
	}
	// Values fixed: the dry run passes, Irreconcilable goes, the upgrade is tried.
	o.Status, o.Generation, o.Spec = p.Status, 3, map[string]any{"discoverer": map[string]any{"rollingUpdate": map[string]any{"maxUnavailable": "2"}}}
	p, err = Next(o, t0.Add(5*time.Second), t0.Add(6*time.Second), time.Second, false)
	if err != nil || !p.Installed || !hasCond(p.Status, ConditionDeployed, "True", ReasonUpgradeSuccessful) {
		t.Fatalf("plan %+v, %v", p, err)
	}
	wantNoCond(t, p.Status, ConditionIrreconcilable)
}

// TestNewKeysTyped: the keys the operator writes since issue 22 item 4 pass with the types
// the chart declares and are refused, naming each, with any other; the Kubernetes objects
// inside the open ones (spread constraints, annotations, placement) are not looked into.
func TestNewKeysTyped(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
	try := func(values string) *Plan {
		t.Helper()
		var spec map[string]any
		if err := json.Unmarshal([]byte(values), &spec); err != nil {
			t.Fatal(err)
		}
		p, err := Next(Observed{Namespace: "ns", Name: "vr", Generation: 1, Spec: spec}, t0, t0.Add(time.Second), time.Second, false)
		if err != nil {
			t.Fatal(err)
		}
		return &p
	}
	good := try(`{
		"agent": {"resources": {"requests": {"memory": "24Gi"}, "limits": {"memory": "28Gi"}},
			"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule", "nodeTaintsPolicy": "Honor"}]},
		"discoverer": {"topologySpreadConstraints": []},
		"gateway": {"lb": {"minReplicas": 3, "maxReplicas": 6, "topologySpreadConstraints": [{"maxSkew": 1}],
			"ingress": {"enabled": true, "annotations": {"team": "search"}}}},
		"manager": {"index": {"topologySpreadConstraints": [],
			"creator": {"suspend": true, "schedule": "@every 6h", "nodeSelector": {"type": "general"}, "tolerations": [{"key": "type"}]},
			"saver": {"suspend": false, "nodeSelector": {}, "tolerations": []}}}
	}`)
	if !hasCond(good.Status, ConditionDeployed, "True", ReasonInstallSuccessful) {
		t.Fatalf("the keys' chart types refused: %+v", good.Status)
	}
	bad := try(`{
		"agent": {"topologySpreadConstraints": {"maxSkew": 1}},
		"discoverer": {"topologySpreadConstraints": "spread"},
		"gateway": {"lb": {"maxReplicas": "6", "topologySpreadConstraints": 1, "ingress": {"annotations": ["team=search"]}}},
		"manager": {"index": {"topologySpreadConstraints": {},
			"creator": {"suspend": "true", "nodeSelector": [], "tolerations": {}},
			"saver": {"suspend": 1, "nodeSelector": "general", "tolerations": "general"}}}
	}`)
	failed := bad.Status.Get(ConditionReleaseFailed)
	if failed == nil {
		t.Fatalf("wrong types installed: %+v", bad.Status)
	}
	for _, want := range []string{
		"at '/agent/topologySpreadConstraints': got object, want array",
		"at '/discoverer/topologySpreadConstraints': got string, want array",
		"at '/gateway/lb/maxReplicas': got string, want integer",
		"at '/gateway/lb/topologySpreadConstraints': got number, want array",
		"at '/gateway/lb/ingress/annotations': got array, want object",
		"at '/manager/index/topologySpreadConstraints': got object, want array",
		"at '/manager/index/creator/suspend': got string, want boolean",
		"at '/manager/index/creator/nodeSelector': got array, want object",
		"at '/manager/index/creator/tolerations': got object, want array",
		"at '/manager/index/saver/suspend': got number, want boolean",
		"at '/manager/index/saver/nodeSelector': got string, want object",
		"at '/manager/index/saver/tolerations': got string, want array",
	} {
		if !strings.Contains(failed.Message, want) {
			t.Errorf("refusal %q does not name %s", failed.Message, want)
		}
	}
}

// TestPlacementKeysTyped: the placement keys the operator writes since issue 26 (affinity,
// podPriority, terminationGracePeriodSeconds of every long-running component, affinity of
// the index jobs) pass with the types the chart declares and are refused, naming each, with
// any other; the Kubernetes terms inside the affinity's lists are not looked into.
func TestPlacementKeysTyped(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
	try := func(values string) *Plan {
		t.Helper()
		var spec map[string]any
		if err := json.Unmarshal([]byte(values), &spec); err != nil {
			t.Fatal(err)
		}
		p, err := Next(Observed{Namespace: "ns", Name: "vr", Generation: 1, Spec: spec}, t0, t0.Add(time.Second), time.Second, false)
		if err != nil {
			t.Fatal(err)
		}
		return &p
	}
	good := try(`{
		"agent": {"podPriority": {"enabled": true, "value": 1000000000}, "terminationGracePeriodSeconds": 600,
			"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]},
				"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference": {}}]}}},
		"discoverer": {"podPriority": {"enabled": false}, "terminationGracePeriodSeconds": 30,
			"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "kubernetes.io/hostname"}], "preferredDuringSchedulingIgnoredDuringExecution": []}}},
		"gateway": {"lb": {"podPriority": {"value": 5}, "affinity": {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 10, "podAffinityTerm": {}}]}}}},
		"manager": {"index": {"terminationGracePeriodSeconds": 120, "affinity": {},
			"creator": {"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}}},
			"saver": {"affinity": {"podAntiAffinity": {}}}}}
	}`)
	if !hasCond(good.Status, ConditionDeployed, "True", ReasonInstallSuccessful) {
		t.Fatalf("the placement keys' chart types refused: %+v", good.Status)
	}
	bad := try(`{
		"agent": {"podPriority": {"enabled": "true", "value": 1.5}, "terminationGracePeriodSeconds": "600",
			"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"matchExpressions": []}]}}},
		"discoverer": {"podPriority": true, "affinity": []},
		"gateway": {"lb": {"terminationGracePeriodSeconds": 30.5, "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"topologyKey": "x"}}}}},
		"manager": {"index": {"podPriority": {"value": "high"},
			"creator": {"affinity": "anywhere"},
			"saver": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": {}}}}}}}
	}`)
	failed := bad.Status.Get(ConditionReleaseFailed)
	if failed == nil {
		t.Fatalf("wrong types installed: %+v", bad.Status)
	}
	for _, want := range []string{
		"at '/agent/podPriority/enabled': got string, want boolean",
		"at '/agent/podPriority/value': got number, want integer",
		"at '/agent/terminationGracePeriodSeconds': got string, want integer",
		"at '/agent/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution': got array, want object",
		"at '/discoverer/podPriority': got boolean, want object",
		"at '/discoverer/affinity': got array, want object",
		"at '/gateway/lb/terminationGracePeriodSeconds': got number, want integer",
		"at '/gateway/lb/affinity/podAntiAffinity/requiredDuringSchedulingIgnoredDuringExecution': got object, want array",
		"at '/manager/index/podPriority/value': got string, want integer",
		"at '/manager/index/creator/affinity': got string, want object",
		"at '/manager/index/saver/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms': got object, want array",
	} {
		if !strings.Contains(failed.Message, want) {
			t.Errorf("refusal %q does not name %s", failed.Message, want)
		}
	}
}

// TestRefusesOwnedObjects: a render sharing an object with another installed release fails
// as Helm's ownership check does, naming the object and the owner, and is tried again: an
// install as ReleaseFailed, an upgrade as the candidate release's Irreconcilable.
func TestRefusesOwnedObjects(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
	owner := types.NamespacedName{Namespace: "a", Name: "first"}
	crb := valdchart.Resource{Kind: "ClusterRoleBinding", Name: "discoverer"}
	o := Observed{Namespace: "b", Name: "second", Generation: 1, Spec: map[string]any{}, Taken: []Taken{{Object: crb, Owner: owner}}}
	p, err := Next(o, t0, t0.Add(time.Second), time.Second, false)
	if err != nil {
		t.Fatal(err)
	}
	want := `failed to install release: rendered manifests contain a resource that already exists. Unable to continue with install: ClusterRoleBinding "discoverer" in namespace "" exists and cannot be imported into the current release: invalid ownership metadata; annotation validation error: key "meta.helm.sh/release-name" must equal "second": current value is "first"`
	failed := p.Status.Get(ConditionReleaseFailed)
	if failed == nil || failed.Reason != ReasonInstallError || failed.Message != want || p.Installed || p.RequeueAfter != time.Second {
		t.Fatalf("plan %+v", p)
	}
	// The same release name in another namespace: Helm names the namespace annotation.
	o.Name = "first"
	p, _ = Next(o, t0, t0.Add(time.Second), time.Second, false)
	if msg := p.Status.Get(ConditionReleaseFailed).Message; !strings.HasSuffix(msg, `key "meta.helm.sh/release-namespace" must equal "b": current value is "a"`) {
		t.Fatalf("message %q", msg)
	}
	// Nothing taken: installed, and the manifest records the render.
	o.Taken, o.Render = nil, []valdchart.Resource{crb}
	p, _ = Next(o, t0, t0.Add(time.Second), time.Second, false)
	if !p.Installed || !hasCond(p.Status, ConditionDeployed, "True", ReasonInstallSuccessful) {
		t.Fatalf("plan %+v", p)
	}
	if got := releasedObjects(p.Status.DeployedRelease); len(got) != 1 || got[0] != crb {
		t.Fatalf("released objects %v from %q", got, p.Status.DeployedRelease.Manifest)
	}

	// An upgrade whose render adds an object "first" owns fails the candidate release's
	// dry run: Irreconcilable at once, Helm's update wording, retried; the deployed
	// release stays.
	cm := valdchart.Resource{Kind: "ConfigMap", Namespace: "b", Name: "vald-agent-config"}
	o.Name, o.Generation, o.Status = "second", 2, p.Status
	o.Render, o.Taken = []valdchart.Resource{crb, cm}, []Taken{{Object: cm, Owner: owner}}
	p, _ = Next(o, t0.Add(2*time.Second), t0.Add(2*time.Second), time.Second, false)
	wantCond(t, p.Status, ConditionIrreconcilable, "True", ReasonReconcileError,
		`failed to get candidate release: Unable to continue with update: ConfigMap "vald-agent-config" in namespace "b" exists and cannot be imported into the current release: invalid ownership metadata; annotation validation error: key "meta.helm.sh/release-name" must equal "second": current value is "first"`)
	wantNoCond(t, p.Status, ConditionReleaseFailed)
	if p.Installed || p.RequeueAfter != time.Second || !hasCond(p.Status, ConditionDeployed, "True", ReasonInstallSuccessful) {
		t.Fatalf("plan %+v", p)
	}
	// The owner gone: the dry run passes and the upgrade installs both objects.
	o.Status, o.Taken = p.Status, nil
	p, _ = Next(o, t0.Add(3*time.Second), t0.Add(4*time.Second), time.Second, false)
	wantNoCond(t, p.Status, ConditionIrreconcilable)
	if !p.Installed || !hasCond(p.Status, ConditionDeployed, "True", ReasonUpgradeSuccessful) {
		t.Fatalf("plan %+v", p)
	}
}

// TestTwoReleasesOneObject: on the API server, two ValdReleases with the chart's default
// names in one namespace: the first is Deployed, the second fails (ReleaseFailed,
// InstallError, the helm-operator's message naming the first), and installs once the first
// is gone.
// With names of their own both deploy.
func TestTwoReleasesOneObject(t *testing.T) {
	ns := testenv.NewNamespace(t, env.Client, "vhs-owned-")
	startSimulator(t, ns)
	ctx := context.Background()
	defaults := map[string]any{"agent": map[string]any{"ngt": map[string]any{"dimension": int64(4)}}}
	if err := env.Client.Create(ctx, newVR(ns, "first", defaults, nil)); err != nil {
		t.Fatal(err)
	}
	waitVR(t, ns, "first", "is Deployed", func(_ *unstructured.Unstructured, st Status) bool {
		return hasCond(st, ConditionDeployed, "True", ReasonInstallSuccessful)
	})
	if err := env.Client.Create(ctx, newVR(ns, "second", defaults, nil)); err != nil {
		t.Fatal(err)
	}
	vr, _ := waitVR(t, ns, "second", "fails", func(_ *unstructured.Unstructured, st Status) bool {
		return hasCond(st, ConditionReleaseFailed, "True", ReasonInstallError)
	})
	st := StatusOf(vr.Object)
	msg := st.Get(ConditionReleaseFailed).Message
	if !strings.HasPrefix(msg, "failed to install release: rendered manifests contain a resource that already exists. Unable to continue with install: ") || !strings.HasSuffix(msg, `must equal "second": current value is "first"`) {
		t.Fatalf("message %q", msg)
	}
	if st.Get(ConditionDeployed) != nil {
		t.Fatalf("second deployed: %s", describe(vr))
	}
	if err := env.Client.Create(ctx, newVR(ns, "third", ownNames("third"), nil)); err != nil {
		t.Fatal(err)
	}
	waitVR(t, ns, "third", "is Deployed", func(_ *unstructured.Unstructured, st Status) bool {
		return hasCond(st, ConditionDeployed, "True", ReasonInstallSuccessful)
	})
	if err := env.Client.Delete(ctx, newVR(ns, "first", nil, nil)); err != nil {
		t.Fatal(err)
	}
	waitVR(t, ns, "second", "is Deployed once first is uninstalled", func(_ *unstructured.Unstructured, st Status) bool {
		return hasCond(st, ConditionDeployed, "True", ReasonInstallSuccessful) && st.Get(ConditionReleaseFailed) == nil
	})
}

// release runs one try of generation gen with values (JSON) to its end on o, and returns
// the object with the planned status in place.
func release(t *testing.T, o Observed, gen int64, values string) (Observed, Plan) {
	t.Helper()
	var spec map[string]any
	if err := json.Unmarshal([]byte(values), &spec); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC).Add(time.Duration(gen) * time.Minute)
	o.Generation, o.Spec = gen, spec
	o.Render = valdchart.Objects(o.Name, o.Namespace, spec)
	p, err := Next(o, t0, t0.Add(time.Second), time.Second, false)
	if err != nil {
		t.Fatal(err)
	}
	o.Status = p.Status
	return o, p
}

// priorityRefused is the real operator's message for an upgrade that changes the value of
// the PriorityClass name.
func priorityRefused(name string) string {
	return `cannot patch "` + name + `" with kind PriorityClass: PriorityClass.scheduling.k8s.io "` + name + `" is invalid: value: Forbidden: may not be changed in an update.`
}

// TestRefusesPriorityValueChange: an upgrade whose values change the value of a
// PriorityClass the deployed release has fails as the real operator's does: ReleaseFailed
// UpgradeError with Helm's patch error for each class (the API server refuses the new
// value), the deployed release and Deployed kept, and no retry until the values change. A
// first value given to a class at the chart's default changes it too.
func TestRefusesPriorityValueChange(t *testing.T) {
	o := Observed{Namespace: "ns", Name: "vr"}
	o, p := release(t, o, 1, `{"agent": {"name": "vald-agent-tokyo", "podPriority": {"value": 2000000}}}`)
	if !p.Installed || !hasCond(p.Status, ConditionDeployed, "True", ReasonInstallSuccessful) {
		t.Fatalf("install: %+v", p.Status)
	}
	deployed := *p.Status.DeployedRelease

	o, p = release(t, o, 2, `{"agent": {"name": "vald-agent-tokyo", "podPriority": {"value": 3000000}}}`)
	wantCond(t, o.Status, ConditionReleaseFailed, "True", ReasonUpgradeError,
		"failed to upgrade release: "+priorityRefused("ns-vald-agent-tokyo-priority"))
	wantCond(t, o.Status, ConditionDeployed, "True", ReasonInstallSuccessful, DeployedMessage)
	if p.Installed || p.RequeueAfter != 0 || *o.Status.DeployedRelease != deployed {
		t.Fatalf("refused upgrade: installed %t, requeue %s, release %+v", p.Installed, p.RequeueAfter, o.Status.DeployedRelease)
	}
	// Later passes of the same try change nothing and schedule nothing.
	again, err := Next(o, o.Status.Get(ConditionReleaseFailed).LastTransitionTime.Time, time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC), time.Second, false)
	if err != nil || !statusEqual(again.Status, o.Status) || again.RequeueAfter != 0 {
		t.Fatalf("a refused upgrade moved: %+v, %v", again, err)
	}

	// Back to generation 1's values: upgraded. Then values for two components at the chart's
	// default: both patches fail, in the order Helm applies the classes.
	o, p = release(t, o, 3, `{"agent": {"name": "vald-agent-tokyo", "podPriority": {"value": 2000000}}, "discoverer": {"terminationGracePeriodSeconds": 60}}`)
	if !hasCond(p.Status, ConditionDeployed, "True", ReasonUpgradeSuccessful) || p.Status.Get(ConditionReleaseFailed) != nil {
		t.Fatalf("upgrade to the deployed value: %+v", p.Status)
	}
	o, _ = release(t, o, 4, `{"agent": {"name": "vald-agent-tokyo", "podPriority": {"value": 2000000}},
		"discoverer": {"podPriority": {"value": 5}}, "gateway": {"lb": {"podPriority": {"enabled": false}}}, "manager": {"index": {"podPriority": {"value": 7}}}}`)
	wantCond(t, o.Status, ConditionReleaseFailed, "True", ReasonUpgradeError,
		"failed to upgrade release: "+priorityRefused("ns-vald-discoverer-priority")+" && "+priorityRefused("ns-vald-manager-index-priority"))
	wantCond(t, o.Status, ConditionDeployed, "True", ReasonUpgradeSuccessful, DeployedMessage)
}

// steps releases each values in turn, a generation each, and checks whether the release
// deploys them or refuses them (UpgradeError, the deployed release kept).
func steps(t *testing.T, o Observed, steps []struct {
	values  string
	refused bool
}) Observed {
	t.Helper()
	for i, s := range steps {
		before := o.Status.DeployedRelease
		var p Plan
		o, p = release(t, o, int64(i+1), s.values)
		failed := o.Status.Get(ConditionReleaseFailed)
		switch {
		case s.refused && (p.Installed || failed == nil || failed.Reason != ReasonUpgradeError || !reflect.DeepEqual(o.Status.DeployedRelease, before)):
			t.Fatalf("step %d (%s) not refused: %+v", i+1, s.values, o.Status)
		case !s.refused && (!p.Installed || failed != nil):
			t.Fatalf("step %d (%s) not deployed: %+v", i+1, s.values, o.Status)
		}
	}
	return o
}

// TestPriorityClassRecreatedWithNewValue: a new value for a class that exists is refused;
// the class disabled (the upgrade deletes it) and then enabled with the new value (the
// upgrade creates it) deploys in two steps, as does a component disabled and enabled
// again, or renamed (a class of another name).
func TestPriorityClassRecreatedWithNewValue(t *testing.T) {
	o := steps(t, Observed{Namespace: "ns", Name: "vr"}, []struct {
		values  string
		refused bool
	}{
		{`{"agent": {"podPriority": {"value": 2000000}}}`, false},
		{`{"agent": {"podPriority": {"value": 3000000}}}`, true},
		{`{"agent": {"podPriority": {"enabled": false, "value": 2000000}}}`, false},
		{`{"agent": {"podPriority": {"enabled": true, "value": 3000000}}}`, false},
		{`{"agent": {"podPriority": {"value": 3000000}}, "manager": {"index": {"podPriority": {"value": 9}}}}`, true},
		{`{"agent": {"podPriority": {"value": 3000000}}, "manager": {"index": {"enabled": false}}}`, false},
		{`{"agent": {"podPriority": {"value": 3000000}}, "manager": {"index": {"podPriority": {"value": 9}}}}`, false},
		{`{"agent": {"name": "vald-agent-osaka", "podPriority": {"value": 4000000}}, "manager": {"index": {"podPriority": {"value": 9}}}}`, false},
	})
	got := releasedPriorities(o.Status.DeployedRelease)
	want := map[string]int64{"ns-vald-agent-osaka-priority": 4000000, "ns-vald-discoverer-priority": 1000000,
		"ns-vald-lb-gateway-priority": 1000000, "ns-vald-manager-index-priority": 9}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("released classes %v, want %v", got, want)
	}
}

// TestPriorityValueUnchanged: upgrades that leave every class's value as deployed succeed
// (another key changed, the chart's default given as the value, enabled given as true),
// before and after one that changes a value is refused.
func TestPriorityValueUnchanged(t *testing.T) {
	steps(t, Observed{Namespace: "ns", Name: "vr"}, []struct {
		values  string
		refused bool
	}{
		{`{}`, false},
		{`{"agent": {"terminationGracePeriodSeconds": 600}}`, false},
		{`{"agent": {"podPriority": {"value": 1000000000}}, "discoverer": {"podPriority": {"enabled": true, "value": 1000000}}}`, false},
		{`{"agent": {"podPriority": {"value": 999}}}`, true},
		{`{"agent": {"podPriority": {"enabled": true}}, "gateway": {"lb": {"podPriority": {"value": 1000000}}}}`, false},
	})
}

// TestPriorityValueFixedThroughAPIServer: on the API server, a ValdRelease whose new values
// change its agents' class's value fails the upgrade with the real operator's message and
// keeps the deployed release; disabled, then enabled with the new value, it deploys.
func TestPriorityValueFixedThroughAPIServer(t *testing.T) {
	ns := testenv.NewNamespace(t, env.Client, "vhs-priority-")
	startSimulator(t, ns)
	agent := func(podPriority map[string]any) map[string]any {
		return map[string]any{"agent": map[string]any{"ngt": map[string]any{"dimension": int64(4)}, "podPriority": podPriority}}
	}
	if err := env.Client.Create(context.Background(), newVR(ns, "vr", agent(map[string]any{"value": int64(2000000)}), nil)); err != nil {
		t.Fatal(err)
	}
	vr, _ := waitVR(t, ns, "vr", "is Deployed", func(_ *unstructured.Unstructured, st Status) bool {
		return hasCond(st, ConditionDeployed, "True", ReasonInstallSuccessful)
	})
	deployed := StatusOf(vr.Object).DeployedRelease

	patchVR(t, ns, "vr", `{"spec": {"agent": {"podPriority": {"value": 3000000}}}}`)
	vr, _ = waitVR(t, ns, "vr", "fails the upgrade", func(_ *unstructured.Unstructured, st Status) bool {
		return hasCond(st, ConditionReleaseFailed, "True", ReasonUpgradeError)
	})
	st := StatusOf(vr.Object)
	class := ns + "-vald-agent-priority"
	wantCond(t, st, ConditionReleaseFailed, "True", ReasonUpgradeError, "failed to upgrade release: "+priorityRefused(class))
	wantCond(t, st, ConditionDeployed, "True", ReasonInstallSuccessful, DeployedMessage)
	if !reflect.DeepEqual(st.DeployedRelease, deployed) {
		t.Fatalf("the refused upgrade replaced the release: %s", describe(vr))
	}

	patchVR(t, ns, "vr", `{"spec": {"agent": {"podPriority": {"enabled": false}}}}`)
	waitVR(t, ns, "vr", "deploys without the class", func(_ *unstructured.Unstructured, st Status) bool {
		return hasCond(st, ConditionDeployed, "True", ReasonUpgradeSuccessful) && st.Get(ConditionReleaseFailed) == nil
	})
	patchVR(t, ns, "vr", `{"spec": {"agent": {"podPriority": {"enabled": true}}}}`)
	waitVR(t, ns, "vr", "deploys the class with the new value", func(_ *unstructured.Unstructured, st Status) bool {
		return st.Get(ConditionReleaseFailed) == nil && releasedPriorities(st.DeployedRelease)[class] == 3000000
	})
}
