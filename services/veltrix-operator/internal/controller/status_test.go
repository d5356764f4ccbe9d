package controller

import (
	"testing"

	veltrixv1 "github.com/opsuite/suite/api/veltrix/v1alpha1"
	"github.com/opsuite/suite/services/veltrix-operator/internal/disks"
	"github.com/opsuite/suite/services/veltrix-operator/internal/planner"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestDisksCondition(t *testing.T) {
	ok := disks.NodeResult{Node: "a"}
	low := disks.NodeResult{Node: "b", MaxMapCountLow: true}
	for _, tc := range []struct {
		name     string
		r        disks.Result
		fallback bool
		status   metav1.ConditionStatus
		reason   string
		message  string
	}{
		{"enough", disks.Result{Wanted: 1, Nodes: []disks.NodeResult{ok}}, false, metav1.ConditionTrue, veltrixv1.ReasonPrepared, "disks prepared on 1 nodes"},
		{"too few candidates", disks.Result{Wanted: 2, Nodes: []disks.NodeResult{ok}}, false, metav1.ConditionFalse, veltrixv1.ReasonNotEnoughNodes,
			"1 of 2 nodes usable: too few nodes match nodeSelector, the required nodeAffinity, tolerations, the DoNotSchedule spread constraints' topology labels and the node-pool namespace label"},
		{"first problem is the reason", disks.Result{Wanted: 3, Nodes: []disks.NodeResult{
			ok,
			{Node: "c", Problem: disks.ProblemNoMatchingDisks, Message: "0 eligible devices match the selector, 1 requested"},
			{Node: "d", Problem: disks.ProblemUnreachable, Message: "the node agent did not answer"},
		}}, false, metav1.ConditionFalse, "NoMatchingDisks",
			"1 of 3 nodes usable; c: NoMatchingDisks (0 eligible devices match the selector, 1 requested); d: AgentUnreachable (the node agent did not answer)"},
		{"low sysctl without fallback", disks.Result{Wanted: 2, Nodes: []disks.NodeResult{ok, low}}, false, metav1.ConditionFalse, veltrixv1.ReasonNotEnoughNodes,
			"1 of 2 nodes usable; b: vm.max_map_count below 262144"},
		{"low sysctl with fallback", disks.Result{Wanted: 2, Nodes: []disks.NodeResult{ok, low}}, true, metav1.ConditionTrue, veltrixv1.ReasonPrepared, "disks prepared on 2 nodes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := disksCondition(tc.r, tc.fallback)
			if c.Status != tc.status || c.Reason != tc.reason || c.Message != tc.message {
				t.Errorf("got %s %s %q\nwant %s %s %q", c.Status, c.Reason, c.Message, tc.status, tc.reason, tc.message)
			}
		})
	}
}

func TestMaxMapCountCondition(t *testing.T) {
	r := disks.Result{Nodes: []disks.NodeResult{{Node: "a"}, {Node: "b", MaxMapCountLow: true}, {Node: "c", MaxMapCountLow: true}, {Node: "d", Problem: disks.ProblemUnreachable}}}
	if c := maxMapCountCondition(r, true); c.Status != metav1.ConditionTrue || c.Reason != veltrixv1.ReasonIndexMapFallback ||
		c.Message != "vm.max_map_count is below 262144 on b, c and the node agent may not raise it: members run with VELTRIXDB_INDEX=map" {
		t.Errorf("fallback: %s %s %q", c.Status, c.Reason, c.Message)
	}
	if c := maxMapCountCondition(r, false); c.Status != metav1.ConditionTrue || c.Reason != veltrixv1.ReasonNodesExcluded {
		t.Errorf("no fallback: %s %s %q", c.Status, c.Reason, c.Message)
	}
	met := disks.Result{Nodes: []disks.NodeResult{{Node: "a"}}}
	if c := maxMapCountCondition(met, false); c.Status != metav1.ConditionFalse || c.Reason != veltrixv1.ReasonMaxMapCountMet ||
		c.Message != "vm.max_map_count is at least 262144 on a" {
		t.Errorf("met: %s %s %q", c.Status, c.Reason, c.Message)
	}
}

func TestMembershipCondition(t *testing.T) {
	for _, tc := range []struct {
		d      planner.Decision
		status metav1.ConditionStatus
		reason string
	}{
		{planner.Decision{Replicas: 3}, metav1.ConditionTrue, veltrixv1.ReasonSettled},
		{planner.Decision{Replicas: 4, Reason: planner.ReasonScaling, Waiting: "waiting"}, metav1.ConditionUnknown, planner.ReasonScaling},
		{planner.Decision{Replicas: 4, Waiting: "waiting"}, metav1.ConditionUnknown, planner.ReasonScaling},
		{planner.Decision{Replicas: 4, Reason: planner.ReasonRemoving, Waiting: "w"}, metav1.ConditionUnknown, planner.ReasonRemoving},
		{planner.Decision{Replicas: 4, Reason: planner.ReasonRemovalRefused, Waiting: "w"}, metav1.ConditionFalse, planner.ReasonRemovalRefused},
		{planner.Decision{Replicas: 4, Reason: planner.ReasonRemovalStuck, Waiting: "w"}, metav1.ConditionFalse, planner.ReasonRemovalStuck},
	} {
		c := membershipCondition(tc.d)
		if c.Status != tc.status || c.Reason != tc.reason {
			t.Errorf("%+v: %s %s, want %s %s", tc.d, c.Status, c.Reason, tc.status, tc.reason)
		}
	}
}

// stateOf is the state and reason summarize derives from Ready and the replication
// condition of ready members.
func stateOf(ready metav1.Condition, readyMembers, rf int32) (veltrixv1.State, string) {
	st := veltrixv1.VeltrixClusterStatus{Conditions: []metav1.Condition{replicationCondition(readyMembers, rf), ready}}
	summarize(&st)
	return st.State, st.Reason
}

func TestState(t *testing.T) {
	for _, tc := range []struct {
		status    metav1.ConditionStatus
		reason    string
		ready, rf int32
		want      veltrixv1.State
	}{
		{metav1.ConditionTrue, veltrixv1.ReasonReady, 3, 3, veltrixv1.StateReady},
		{metav1.ConditionUnknown, planner.ReasonScaling, 3, 3, veltrixv1.StateReconciling},
		{metav1.ConditionUnknown, planner.ReasonRemoving, 3, 3, veltrixv1.StateReconciling},
		{metav1.ConditionUnknown, veltrixv1.ReasonUpgrading, 2, 3, veltrixv1.StateReconciling},
		{metav1.ConditionUnknown, veltrixv1.ReasonMembersNotReady, 0, 3, veltrixv1.StateReconciling},
		{metav1.ConditionFalse, planner.ReasonRemovalRefused, 4, 3, veltrixv1.StateDegraded},
		{metav1.ConditionFalse, veltrixv1.ReasonDisksNotPrepared, 0, 3, veltrixv1.StateFailed},
	} {
		got, reason := stateOf(metav1.Condition{Type: veltrixv1.ConditionReady, Status: tc.status, Reason: tc.reason}, tc.ready, tc.rf)
		if got != tc.want || reason != tc.reason {
			t.Errorf("Ready=%s %s with %d/%d ready: %s (%s), want %s (%s)", tc.status, tc.reason, tc.ready, tc.rf, got, reason, tc.want, tc.reason)
		}
	}
	var st veltrixv1.VeltrixClusterStatus
	if summarize(&st); st.State != veltrixv1.StateInitializing {
		t.Errorf("no conditions: %s, want Initializing", st.State)
	}
}

func TestVersionCondition(t *testing.T) {
	c := versionCondition("1.16.2")
	if c.Type != veltrixv1.ConditionReady || c.Status != metav1.ConditionFalse || c.Reason != veltrixv1.ReasonVersionUnsupported ||
		c.Message != "spec.version 1.16.2 is older than 1.17.0, the first VeltrixDB with online membership (--join, --advertise-addr, /admin/cluster/members) that the operator scales with: set spec.version to 1.17.0 or later; until then the StatefulSet is left as it is" {
		t.Errorf("%+v", c)
	}
	if got, _ := stateOf(c, 3, 3); got != veltrixv1.StateDegraded {
		t.Errorf("state with 3 ready members: %s, want Degraded", got)
	}
	if got, _ := stateOf(c, 0, 3); got != veltrixv1.StateFailed {
		t.Errorf("state with none ready: %s, want Failed", got)
	}
}
