package conditions

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func cond(t string, s metav1.ConditionStatus, reason string) metav1.Condition {
	return metav1.Condition{Type: t, Status: s, Reason: reason, Message: "m"}
}

func TestSetStampsGenerationAndKeepsTransitionTime(t *testing.T) {
	var conds []metav1.Condition
	if !Set(&conds, cond("A", metav1.ConditionTrue, "Succeeded"), 3) {
		t.Fatal("first Set reported no change")
	}
	if conds[0].ObservedGeneration != 3 {
		t.Fatalf("observedGeneration = %d, want 3", conds[0].ObservedGeneration)
	}
	first := metav1.NewTime(time.Unix(1000, 0))
	conds[0].LastTransitionTime = first
	if Set(&conds, cond("A", metav1.ConditionTrue, "Succeeded"), 3) {
		t.Fatal("identical Set reported a change")
	}
	if !Set(&conds, cond("A", metav1.ConditionTrue, "Succeeded"), 4) {
		t.Fatal("new generation not reported as a change")
	}
	if !conds[0].LastTransitionTime.Equal(&first) {
		t.Fatal("lastTransitionTime moved without a status change")
	}
	if !Set(&conds, cond("A", metav1.ConditionFalse, "Failed"), 4) || conds[0].LastTransitionTime.Equal(&first) {
		t.Fatal("status change did not move lastTransitionTime")
	}
	if Get(conds, "A").Reason != "Failed" || Get(conds, "B") != nil {
		t.Fatal("Get returned the wrong condition")
	}
}

func TestSummarize(t *testing.T) {
	for _, tc := range []struct {
		name  string
		conds []metav1.Condition
		opts  []SummaryOption
		want  State
	}{
		{"none", nil, nil, StateReconciling},
		{"all true", []metav1.Condition{cond("A", "True", "Succeeded"), cond("B", "True", "Succeeded")}, nil, StateReady},
		{"unknown", []metav1.Condition{cond("A", "True", "Succeeded"), cond("B", "Unknown", "Progressing")}, nil, StateReconciling},
		{"pending wins over progressing", []metav1.Condition{cond("A", "Unknown", "Progressing"), cond("B", "Unknown", ReasonPending)}, nil, StatePending},
		{"false wins", []metav1.Condition{cond("A", "Unknown", ReasonPending), cond("B", "False", "Failed")}, nil, StateFailed},
		// Negative polarity: False is healthy, True is the issue.
		{"healthy degraded=false is ready", []metav1.Condition{cond("Ready", "True", "Succeeded"), cond(TypeDegraded, "False", "AsExpected")}, nil, StateReady},
		{"degraded=true is an issue", []metav1.Condition{cond("Ready", "True", "Succeeded"), cond(TypeDegraded, "True", "ReplicaLost")}, nil, StateFailed},
		{"configuration warning=false is ready", []metav1.Condition{cond(TypeConfigurationWarning, "False", "AsExpected")}, nil, StateReady},
		{"configuration warning=true is an issue", []metav1.Condition{cond("Ready", "True", "Succeeded"), cond(TypeConfigurationWarning, "True", "Deprecated")}, nil, StateFailed},
		{"degraded unknown is progressing", []metav1.Condition{cond("Ready", "True", "Succeeded"), cond(TypeDegraded, "Unknown", "Progressing")}, nil, StateReconciling},
		{"degraded unknown pending", []metav1.Condition{cond(TypeDegraded, "Unknown", ReasonPending)}, nil, StatePending},
		{"own negative set", []metav1.Condition{cond("Ready", "True", "Succeeded"), cond("Paused", "False", "Running")}, []SummaryOption{NegativePolarity("Paused")}, StateReady},
		{"own set replaces the default", []metav1.Condition{cond(TypeDegraded, "False", "AsExpected")}, []SummaryOption{NegativePolarity("Paused")}, StateFailed},
		{"expected missing is progressing", []metav1.Condition{cond("A", "True", "Succeeded")}, []SummaryOption{Expect("A", "B")}, StateReconciling},
		{"expected missing but ignored", []metav1.Condition{cond("A", "True", "Succeeded")}, []SummaryOption{Expect("A", "B"), IgnoreIfMissing("B")}, StateReady},
		{"expected missing does not hide pending", []metav1.Condition{cond("A", "Unknown", ReasonPending)}, []SummaryOption{Expect("A", "B")}, StatePending},
		{"expected missing does not hide an issue", []metav1.Condition{cond("A", "False", "Failed")}, []SummaryOption{Expect("B")}, StateFailed},
	} {
		if got := Summarize(tc.conds, tc.opts...); got != tc.want {
			t.Errorf("%s: Summarize = %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestIsIssue(t *testing.T) {
	for _, tc := range []struct {
		c    metav1.Condition
		opts []SummaryOption
		want bool
	}{
		{cond("Ready", "False", "Failed"), nil, true},
		{cond("Ready", "True", "Succeeded"), nil, false},
		{cond("Ready", "Unknown", "Progressing"), nil, false},
		{cond(TypeDegraded, "False", "AsExpected"), nil, false},
		{cond(TypeDegraded, "True", "ReplicaLost"), nil, true},
		{cond(TypeDegraded, "Unknown", "Progressing"), nil, false},
		{cond("Paused", "True", "ByUser"), []SummaryOption{NegativePolarity("Paused")}, true},
	} {
		if got := IsIssue(tc.c, tc.opts...); got != tc.want {
			t.Errorf("IsIssue(%s=%s, %d options) = %v, want %v", tc.c.Type, tc.c.Status, len(tc.opts), got, tc.want)
		}
	}
}
