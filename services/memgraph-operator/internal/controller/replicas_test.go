package controller

import (
	"strings"
	"testing"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestHeldReplicas(t *testing.T) {
	cases := []struct {
		declared int32
		live     *int32
		want     int32
	}{
		{3, nil, 3},              // new
		{3, ptr.To[int32](3), 3}, // unchanged
		{5, ptr.To[int32](3), 5}, // growing: at once
		{3, ptr.To[int32](5), 5}, // shrinking: held until retired
	}
	for _, tc := range cases {
		if got := heldReplicas(tc.declared, tc.live); got != tc.want {
			t.Errorf("heldReplicas(%d, %v) = %d, want %d", tc.declared, tc.live, got, tc.want)
		}
	}
}

func TestShrunkReplicas(t *testing.T) {
	set := func(ordinals ...int32) func(int32) bool {
		return func(o int32) bool {
			for _, x := range ordinals {
				if x == o {
					return true
				}
			}
			return false
		}
	}
	cases := []struct {
		name                     string
		declared, current, first int32
		retired                  func(int32) bool
		want                     int32
	}{
		{"nothing retired", 2, 4, 0, set(), 4},
		{"all retired", 2, 4, 0, set(2, 3), 2},
		{"highest retired only", 2, 4, 0, set(3), 3},
		{"a lower one retired, the highest not: hold", 2, 4, 0, set(2), 4},
		{"never below declared", 2, 4, 0, set(0, 1, 2, 3), 2},
		{"coordinators from ordinal 1", 3, 5, 1, set(4, 5), 3},
		{"coordinator leader (5) not yet retired", 3, 5, 1, set(4), 5},
		{"not shrinking", 3, 3, 1, set(1, 2, 3), 3},
	}
	for _, tc := range cases {
		if got := shrunkReplicas(tc.declared, tc.current, tc.first, tc.retired); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestSummarize(t *testing.T) {
	cond := func(typ string, s metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: s, Reason: reason}
	}
	ready := cond(memgraphv1.ConditionReady, metav1.ConditionTrue, memgraphv1.ReasonReady)
	converged := cond(memgraphv1.ConditionConverged, metav1.ConditionTrue, memgraphv1.ReasonConverged)
	updated := cond(memgraphv1.ConditionUpdated, metav1.ConditionTrue, memgraphv1.ReasonUpdated)
	retiring := cond(memgraphv1.ConditionConverged, metav1.ConditionFalse, memgraphv1.ReasonRetirementInProgress)
	registering := cond(memgraphv1.ConditionConverged, metav1.ConditionFalse, memgraphv1.ReasonRegistrationInProgress)
	pods := cond(memgraphv1.ConditionReady, metav1.ConditionFalse, memgraphv1.ReasonWorkloadsNotReady)
	noLeader := cond(memgraphv1.ConditionReady, metav1.ConditionFalse, memgraphv1.ReasonNoCoordinatorLeader)
	noMain := cond(memgraphv1.ConditionReady, metav1.ConditionFalse, memgraphv1.ReasonNoMain)
	tls := cond(memgraphv1.ConditionReady, metav1.ConditionFalse, memgraphv1.ReasonTLSVerificationFailed)
	cases := []struct {
		name   string
		conds  []metav1.Condition
		want   memgraphv1.ClusterState
		reason string
	}{
		{"no status yet", nil, memgraphv1.StateInitializing, ""},
		{"all good", []metav1.Condition{ready, converged, updated}, memgraphv1.StateReady, memgraphv1.ReasonReady},
		{"serving, retiring", []metav1.Condition{ready, retiring, updated}, memgraphv1.StateReconciling, memgraphv1.ReasonRetirementInProgress},
		{"pods starting", []metav1.Condition{pods}, memgraphv1.StateReconciling, memgraphv1.ReasonWorkloadsNotReady},
		{"registering at bootstrap, no MAIN yet", []metav1.Condition{noMain, registering}, memgraphv1.StateReconciling, memgraphv1.ReasonRegistrationInProgress},
		{"no MAIN", []metav1.Condition{noMain}, memgraphv1.StateDegraded, memgraphv1.ReasonNoMain},
		{"no leader", []metav1.Condition{noLeader}, memgraphv1.StateDegraded, memgraphv1.ReasonNoCoordinatorLeader},
		{"TLS not verified", []metav1.Condition{tls}, memgraphv1.StateFailed, memgraphv1.ReasonTLSVerificationFailed},
	}
	for _, tc := range cases {
		if got, reason := summarize(tc.conds); got != tc.want || reason != tc.reason {
			t.Errorf("%s: %s (%s), want %s (%s)", tc.name, got, reason, tc.want, tc.reason)
		}
	}
}

func TestCommandSummary(t *testing.T) {
	cmds := []string{
		`ADD COORDINATOR 2 WITH CONFIG {"bolt_server": "demo-coordinator-2.demo-coordinators.default.svc.cluster.local:7687"}`,
		`REGISTER INSTANCE demo_data_0 WITH CONFIG {"bolt_server": "x:7687"}`,
		`SET INSTANCE demo_data_0 TO MAIN`,
	}
	if got, want := commandSummary(cmds), "ADD COORDINATOR 2; REGISTER INSTANCE demo_data_0; SET INSTANCE demo_data_0 TO MAIN"; got != want {
		t.Errorf("summary %q, want %q", got, want)
	}
	var many []string
	for range 200 {
		many = append(many, "REGISTER INSTANCE some_long_instance_name WITH CONFIG {}")
	}
	if got := commandSummary(many); len(got) > maxEventNote || !strings.HasSuffix(got, "more") {
		t.Errorf("summary of 200 commands is %d bytes: %q", len(got), got[len(got)-40:])
	}
}
