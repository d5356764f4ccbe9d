package conditions

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// The suite's state vocabulary. Every product's status.state (the STATE column) uses these
// words for the same situations; the ValkeyCluster's product document fixes them, and the
// other products follow it.
//
//   - Initializing: no status yet (the CRD default, before the operator's first write).
//   - Reconciling: the operator is bringing the object to its spec: creating, scaling,
//     updating, or waiting for its own work (pods starting) to finish.
//   - Ready: serving as declared, nothing in flight.
//   - Degraded: serving in part, or serving with a fault the operator reports.
//   - Failed: not serving, and nothing under way will change that: a person (or something
//     outside the operator) has to act.
//   - Pending: a step waits on something outside the operator (a condition Unknown with
//     reason Pending); only Summarize, for lifecycles built of such steps, reports it.
//
// Product-specific words do not appear in state: the reason column (status.reason) says
// which part is scaling, upgrading or stuck. ValdOperatorRelease's phases are the
// lifecycle the product document gives, not states, and keep their own names.
const (
	StateInitializing State = "Initializing"
	StateReconciling  State = "Reconciling"
	StateDegraded     State = "Degraded"
)

// Condition types StateOf reads by default.
const (
	TypeReady       = "Ready"
	TypeProgressing = "Progressing"
)

// StateOption says which of a product's conditions mean what to StateOf.
type StateOption func(*stateRules)

type stateRules struct {
	degraded      []string
	progressing   []string
	settling      []string
	inProgress    map[string]bool
	partlyServing []string
	degradedWhy   map[string]bool
}

// DegradedTypes replaces the negative-polarity types whose True is Degraded (default:
// Degraded). A warning type (ConfigurationWarning) is not one.
func DegradedTypes(types ...string) StateOption {
	return func(r *stateRules) { r.degraded = types }
}

// ProgressingTypes replaces the types whose True means the operator is at work (default:
// Progressing).
func ProgressingTypes(types ...string) StateOption {
	return func(r *stateRules) { r.progressing = types }
}

// Settling names positive types that, present and not True while Ready is True, mean a
// change is still in flight on a serving object: Reconciling, not Ready.
func Settling(types ...string) StateOption {
	return func(r *stateRules) { r.settling = append(r.settling, types...) }
}

// InProgress names reasons that mean the operator's own work is under way (pods starting,
// commands issued): a condition not True with one of them reads Reconciling, not Failed.
func InProgress(reasons ...string) StateOption {
	return func(r *stateRules) {
		for _, x := range reasons {
			r.inProgress[x] = true
		}
	}
}

// PartlyServing names positive types whose True, while Ready is False, means the object
// still serves in part: Degraded, not Failed.
func PartlyServing(types ...string) StateOption {
	return func(r *stateRules) { r.partlyServing = append(r.partlyServing, types...) }
}

// DegradedReasons names Ready reasons that, with Ready False, mean the object still serves
// in part: Degraded, not Failed.
func DegradedReasons(reasons ...string) StateOption {
	return func(r *stateRules) {
		for _, x := range reasons {
			r.degradedWhy[x] = true
		}
	}
}

// StateOf derives the state word from conds and returns with it the condition that
// decided it (its reason and message explain the state; zero for Initializing). The first
// rule that matches wins:
//
//  1. no Ready condition: Initializing;
//  2. a Degraded type True: Degraded;
//  3. Ready True: Ready, or Reconciling while a Settling type is not True;
//  4. a Progressing type True: Reconciling;
//  5. Ready Unknown: Reconciling;
//  6. Ready False for an InProgress reason, or another condition not True for one:
//     Reconciling;
//  7. Ready False with a PartlyServing type True or for a DegradedReasons reason: Degraded;
//  8. otherwise (Ready False): Failed.
//
// For the ValkeyCluster (no options) this is its document's order: Degraded=True,
// Ready=True, Progressing=True, else Failed.
func StateOf(conds []metav1.Condition, opts ...StateOption) (State, metav1.Condition) {
	r := &stateRules{degraded: []string{TypeDegraded}, progressing: []string{TypeProgressing},
		inProgress: map[string]bool{}, degradedWhy: map[string]bool{}}
	for _, o := range opts {
		o(r)
	}
	ready := Get(conds, TypeReady)
	if ready == nil {
		return StateInitializing, metav1.Condition{}
	}
	if c := firstWith(conds, r.degraded, metav1.ConditionTrue); c != nil {
		return StateDegraded, *c
	}
	if ready.Status == metav1.ConditionTrue {
		for _, t := range r.settling {
			if c := Get(conds, t); c != nil && c.Status != metav1.ConditionTrue {
				return StateReconciling, *c
			}
		}
		return StateReady, *ready
	}
	if c := firstWith(conds, r.progressing, metav1.ConditionTrue); c != nil {
		return StateReconciling, *c
	}
	if ready.Status == metav1.ConditionUnknown || r.inProgress[ready.Reason] {
		return StateReconciling, *ready
	}
	for i := range conds {
		if c := &conds[i]; c.Status != metav1.ConditionTrue && r.inProgress[c.Reason] {
			return StateReconciling, *c
		}
	}
	if firstWith(conds, r.partlyServing, metav1.ConditionTrue) != nil || r.degradedWhy[ready.Reason] {
		return StateDegraded, *ready
	}
	return StateFailed, *ready
}

// firstWith is the first condition, in the order of types, of one of types with status s.
func firstWith(conds []metav1.Condition, types []string, s metav1.ConditionStatus) *metav1.Condition {
	for _, t := range types {
		if c := Get(conds, t); c != nil && c.Status == s {
			return c
		}
	}
	return nil
}
