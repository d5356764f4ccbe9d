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
		want  State
	}{
		{"none", nil, StateProgressing},
		{"all true", []metav1.Condition{cond("A", "True", "Succeeded"), cond("B", "True", "Succeeded")}, StateReady},
		{"unknown", []metav1.Condition{cond("A", "True", "Succeeded"), cond("B", "Unknown", "Progressing")}, StateProgressing},
		{"pending wins over progressing", []metav1.Condition{cond("A", "Unknown", "Progressing"), cond("B", "Unknown", ReasonPending)}, StatePending},
		{"false wins", []metav1.Condition{cond("A", "Unknown", ReasonPending), cond("B", "False", "Failed")}, StateFailed},
	} {
		if got := Summarize(tc.conds); got != tc.want {
			t.Errorf("%s: Summarize = %s, want %s", tc.name, got, tc.want)
		}
	}
}
