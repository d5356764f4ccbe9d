// Package conditions sets metav1.Conditions with observedGeneration and derives one summary
// state from them, so every controller reports its state the same way.
package conditions

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// State is the summary of a set of conditions, for printer columns and quick reads.
type State string

// Summary states Summarize reports, from best to worst (the whole vocabulary, and what
// each word means, is in state.go).
const (
	StateReady   State = "Ready"
	StatePending State = "Pending"
	StateFailed  State = "Failed"
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

// Condition types whose True status is abnormal ("negative polarity"): a healthy object
// has them False or not at all.
const (
	TypeDegraded             = "Degraded"
	TypeConfigurationWarning = "ConfigurationWarning"
)

// DefaultNegativePolarity are the negative-polarity types Summarize knows without options.
var DefaultNegativePolarity = []string{TypeDegraded, TypeConfigurationWarning}

// SummaryOption changes how Summarize reads conditions.
type SummaryOption func(*summary)

type summary struct {
	negative map[string]bool
	expected []string
	ignore   map[string]bool
}

// NegativePolarity replaces the default set of types whose True status is an issue and
// whose False status is healthy.
func NegativePolarity(types ...string) SummaryOption {
	return func(s *summary) {
		s.negative = map[string]bool{}
		for _, t := range types {
			s.negative[t] = true
		}
	}
}

// Expect names types that must be present: a missing one counts as Unknown (the
// controller has not got to it), unless IgnoreIfMissing names it too.
func Expect(types ...string) SummaryOption {
	return func(s *summary) { s.expected = append(s.expected, types...) }
}

// IgnoreIfMissing names expected types whose absence is normal (a feature turned off).
func IgnoreIfMissing(types ...string) SummaryOption {
	return func(s *summary) {
		for _, t := range types {
			s.ignore[t] = true
		}
	}
}

// IsIssue reports whether c is abnormal: a positive-polarity condition False, or a
// negative-polarity one (see NegativePolarity; Degraded and ConfigurationWarning by
// default) True.
func IsIssue(c metav1.Condition, opts ...SummaryOption) bool {
	return newSummary(opts).issue(c)
}

func newSummary(opts []SummaryOption) *summary {
	s := &summary{negative: map[string]bool{}, ignore: map[string]bool{}}
	for _, t := range DefaultNegativePolarity {
		s.negative[t] = true
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

func (s *summary) issue(c metav1.Condition) bool {
	if s.negative[c.Type] {
		return c.Status == metav1.ConditionTrue
	}
	return c.Status == metav1.ConditionFalse
}

// Summarize derives one state from conds, for objects whose conditions are a list of
// steps (ValdOperatorRelease's phases) rather than Ready/Progressing/Degraded (see
// StateOf): Failed if any is an issue (a positive type False, a negative type True),
// Pending if any Unknown condition waits on something external, Reconciling if any other
// is Unknown (or an expected one is missing) or there are none, and Ready when every
// condition is in its healthy status (True, or False for a negative-polarity type).
func Summarize(conds []metav1.Condition, opts ...SummaryOption) State {
	s := newSummary(opts)
	if len(conds) == 0 {
		return StateReconciling
	}
	state := StateReady
	for _, c := range conds {
		switch {
		case s.issue(c):
			return StateFailed
		case c.Status == metav1.ConditionUnknown && c.Reason == ReasonPending:
			state = StatePending
		case c.Status == metav1.ConditionUnknown && state == StateReady:
			state = StateReconciling
		}
	}
	if state == StateReady {
		for _, t := range s.expected {
			if !s.ignore[t] && Get(conds, t) == nil {
				return StateReconciling
			}
		}
	}
	return state
}
