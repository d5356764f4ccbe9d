package controller

import (
	"slices"
	"testing"
	"time"

	valdv1 "github.com/opsuite/suite/api/vald/v1"
	"k8s.io/utils/ptr"
)

const deployedStatus = `{"conditions":[{"type":"Initialized","status":"True"},{"type":"Deployed","status":"True","reason":"InstallSuccessful"}]}`

// blueGreen is a release with two entries, "green" (cluster g) active and "blue" (cluster b)
// not.
func (h *harness) blueGreen(name string) *valdv1.ValdOperatorRelease {
	vor := h.release(name, "g=1")
	vor.Spec.Infrastructure = append(vor.Spec.Infrastructure, valdv1.Infrastructure{
		Role: "blue", Active: ptr.To(false), Clusters: []valdv1.Cluster{{Name: "b", ID: "2"}},
		NodePools: valdv1.NodePools{General: &valdv1.NodePool{Replicas: 2}},
	})
	return vor
}

// activate makes role the only active entry.
func (h *harness) activate(name, role string) {
	h.update(name, func(v *valdv1.ValdOperatorRelease) {
		for i := range v.Spec.Infrastructure {
			v.Spec.Infrastructure[i].Active = ptr.To(v.Spec.Infrastructure[i].Role == role)
		}
	})
}

// TestBlueGreenSwitch: when `active` moves from green to blue, blue's ValdRelease is
// created and green's stays until the Vald Helm Operator reports blue's Deployed (the
// Switchover condition says so, with events); a switch back mid-way keeps green, which is
// deployed already, and prunes the half-deployed blue; a full switch then prunes green only
// once blue is deployed, and not while blue's deployment fails.
func TestBlueGreenSwitch(t *testing.T) {
	h := start(t, func(o *Options) { o.RequireDeployed, o.HelmStatusWait = true, time.Hour })
	h.create(h.blueGreen("vor"))
	h.waitFor("green's ValdRelease", func() bool { return names(h.valdReleases()) == h.ns+"-g" })
	h.setHelmStatus("g", deployedStatus)
	h.waitStatus("vor", statusCompleted)

	const switching = "WaitingCreateVrs 1/3 Pending | WaitingClusterCreate=True/Succeeded WaitingCreateVrs=Unknown/Pending Completed=Unknown/Blocked Switchover=Unknown/Switching"
	const switched = statusCompleted + " Switchover=True/Switched"

	// green -> blue: both exist while blue is not deployed.
	h.activate("vor", "blue")
	vor := h.waitStatus("vor", switching)
	if msg := condition(vor, valdv1.ConditionSwitchover).Message; msg != `Switching from infrastructure entry "green" to "blue": the ValdReleases of "green" are kept until every ValdRelease of "blue" is deployed.` {
		t.Errorf("message %q", msg)
	}
	if msg := condition(vor, valdv1.ConditionWaitingCreateVrs).Message; msg != `Waiting for the Vald Helm Operator to deploy ValdRelease "`+h.ns+`-b".` {
		t.Errorf("WaitingCreateVrs message %q", msg)
	}
	// Several passes later (requeued every second) green is still there, unchanged.
	time.Sleep(2500 * time.Millisecond)
	vrs := h.valdReleases()
	if got := names(vrs); got != h.ns+"-b,"+h.ns+"-g" {
		t.Fatalf("ValdReleases during the switch: %s, want blue's and green's", got)
	}
	for _, vr := range vrs {
		if vr.Name == h.ns+"-g" && vr.Labels[valdv1.LabelManagedGeneration] != "1" {
			t.Errorf("green's ValdRelease was rewritten during the switch: labels %v", vr.Labels)
		}
	}

	// Switch back mid-way: green is deployed, so it serves at once and the half-deployed
	// blue goes.
	h.activate("vor", "green")
	vor = h.waitStatus("vor", switched)
	if msg := condition(vor, valdv1.ConditionSwitchover).Message; msg != `Switched to infrastructure entry "green": every ValdRelease of "green" is deployed and those of the entries no longer active are pruned.` {
		t.Errorf("message %q", msg)
	}
	if got := names(h.valdReleases()); got != h.ns+"-g" {
		t.Fatalf("ValdReleases after switching back: %s, want green's only", got)
	}

	// green -> blue to the end: green goes only after blue is deployed; a failed blue
	// deployment (Failed, no retry) keeps green serving meanwhile.
	h.activate("vor", "blue")
	h.waitStatus("vor", switching)
	h.waitFor("blue's ValdRelease", func() bool { return names(h.valdReleases()) == h.ns+"-b,"+h.ns+"-g" })
	h.setHelmStatus("b", `{"conditions":[{"type":"Initialized","status":"True"},{"type":"ReleaseFailed","status":"True","reason":"InstallError","message":"timed out waiting for the condition"}]}`)
	h.waitStatus("vor", "WaitingCreateVrs 1/3 Failed | WaitingClusterCreate=True/Succeeded WaitingCreateVrs=False/Failed Completed=Unknown/Blocked Switchover=Unknown/Switching")
	if got := names(h.valdReleases()); got != h.ns+"-b,"+h.ns+"-g" {
		t.Fatalf("ValdReleases while blue failed: %s, want green's kept", got)
	}
	h.setHelmStatus("b", deployedStatus)
	vor = h.waitStatus("vor", switched)
	if msg := condition(vor, valdv1.ConditionSwitchover).Message; msg != `Switched to infrastructure entry "blue": every ValdRelease of "blue" is deployed and those of the entries no longer active are pruned.` {
		t.Errorf("message %q", msg)
	}
	h.waitFor("green's ValdRelease to be pruned", func() bool { return names(h.valdReleases()) == h.ns+"-b" })

	// Each transition of the switch is an event.
	h.waitFor("Switchover events", func() bool {
		got := h.events("vor")
		return slices.Contains(got, "Normal Switchover/Switching") && slices.Contains(got, "Normal Switchover/Switched")
	})
}
