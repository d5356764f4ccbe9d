// Package conditions sets metav1.Conditions with observedGeneration and derives one summary
// state from them, so every controller reports its state the same way.
package conditions

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// State is the summary of a set of conditions, for printer columns and quick reads.
type State string

// Summary states, from best to worst.
const (
	StateReady       State = "Ready"
	StateProgressing State = "Progressing"
	StatePending     State = "Pending"
	StateFailed      State = "Failed"
)

// ReasonPending is the reason that marks an Unknown condition as waiting on something
// outside the controller rather than on the controller's own work.
const ReasonPending = "Pending"

// Set records cond in conds, stamped with generation. LastTransitionTime changes only when
// the status changes. It reports whether anything changed. Callers must not short-circuit
// calls to Set (`changed = changed || Set(...)` skips every later condition).
func Set(conds *[]metav1.Condition, cond metav1.Condition, generation int64) bool {
	cond.ObservedGeneration = generation
	return meta.SetStatusCondition(conds, cond)
}

// Get returns the condition of the given type, or nil.
func Get(conds []metav1.Condition, condType string) *metav1.Condition {
	return meta.FindStatusCondition(conds, condType)
}

// Summarize derives one state from conds: Failed if any is False, Pending if any Unknown
// condition waits on something external, Progressing if any other is Unknown or there are
// none, and Ready when all are True.
func Summarize(conds []metav1.Condition) State {
	if len(conds) == 0 {
		return StateProgressing
	}
	state := StateReady
	for _, c := range conds {
		switch {
		case c.Status == metav1.ConditionFalse:
			return StateFailed
		case c.Status == metav1.ConditionUnknown && c.Reason == ReasonPending:
			state = StatePending
		case c.Status == metav1.ConditionUnknown && state == StateReady:
			state = StateProgressing
		}
	}
	return state
}
