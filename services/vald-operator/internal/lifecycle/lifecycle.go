package lifecycle

import (
	"context"
	"fmt"
	"time"

	"github.com/opsuite/suite/shared/conditions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Phase is one step of a lifecycle; its Type is the condition type.
type Phase struct {
	Type string
	// Desired is nil for a terminal phase, which succeeds as soon as it is reached.
	Desired Desired
	// Seed is the Progressing message the phase's condition gets when it is reached; for a
	// terminal phase, the Succeeded message.
	Seed string
}

// Phases are the phases of a lifecycle, in order.
type Phases []Phase

// Transition is a condition that changed status or reason during a pass.
type Transition struct {
	Type string
	// Before is the condition before the pass; nil when the phase was seeded.
	Before *metav1.Condition
	After  metav1.Condition
	// Elapsed is how long the condition held its previous status, when it had one.
	Elapsed time.Duration
}

// Outcome is what a pass found.
type Outcome struct {
	// Phase is the type of the phase being processed: the one that halted, the one just
	// seeded, or the last phase once every phase succeeded.
	Phase string
	// Halt is the result of the phase that stopped the pass; nil when none did.
	Halt *Result
	// Seeded is true when the pass reached a new phase that still has work to do (it then
	// also halted the pass).
	Seeded bool
	// Completed counts the phases whose condition is True; Total counts all phases.
	Completed, Total int32
	// Transitions lists the conditions that changed status or reason, in phase order.
	Transitions []Transition
	// Durations is the time each evaluated phase took in this pass.
	Durations map[string]time.Duration
	// Err is the transient failure (an API error) that halted the pass; Run returns it too.
	Err error
}

// Run evaluates the phases over conds, stamped with generation:
//   - every phase that already has a condition is evaluated again, in order; the first
//     that does not succeed halts the pass, and the phases after it that were reached
//     become Blocked until it recovers;
//   - when all of them succeed, the next phase is reached and evaluated in the same pass
//     (a terminal phase succeeds at once), and so on until one does not succeed. A
//     release whose phases all succeed at once thus costs one status write, not one per
//     phase; the conditions still accumulate in order, each phase at most once.
//
// Conditions are never removed and each phase has at most one. A phase whose evaluation
// fails with an error (a transient API failure, or a cause outside the spec) halts the pass
// as Progressing (Pending for a RetryError marked External) with a stable message, and Run returns the error: the conditions never keep claiming a
// success the pass could not confirm.
func (p Phases) Run(ctx context.Context, conds *[]metav1.Condition, generation int64, now time.Time) (Outcome, error) {
	out := Outcome{Total: int32(len(p)), Durations: map[string]time.Duration{}}
	record := func(phase string, res Result) {
		before := conditions.Get(*conds, phase)
		var prev *metav1.Condition
		if before != nil {
			c := *before
			prev = &c
		}
		conditions.Set(conds, res.condition(phase), generation)
		after := *conditions.Get(*conds, phase)
		if prev == nil || prev.Status != after.Status || prev.Reason != after.Reason {
			t := Transition{Type: phase, Before: prev, After: after}
			if prev != nil && prev.Status != after.Status {
				t.Elapsed = now.Sub(prev.LastTransitionTime.Time)
			}
			out.Transitions = append(out.Transitions, t)
		}
	}

	for i, ph := range p {
		reached := conditions.Get(*conds, ph.Type) == nil
		res := Succeeded(ph.Seed)
		if ph.Desired != nil {
			began := time.Now()
			var err error
			res, err = evaluate(ctx, ph.Desired)
			out.Durations[ph.Type] = time.Since(began)
			if err != nil {
				// A transient failure: the phase is not done, whatever it said before, so
				// it and every later phase stop claiming success until a pass gets through.
				res = retryResult(err)
				out.Err = fmt.Errorf("phase %s: %w", ph.Type, err)
			}
			if reached && res.Status == metav1.ConditionUnknown && res.Message == "" {
				res.Message = ph.Seed
			}
		}
		record(ph.Type, res)
		if !res.Succeeded() {
			out.Halt = &res
			out.Seeded = reached
			for _, later := range p[i+1:] {
				if conditions.Get(*conds, later.Type) != nil {
					record(later.Type, Blocked(fmt.Sprintf("Waiting for phase %s to succeed again.", ph.Type)))
				}
			}
			out.finish(p, *conds, ph.Type)
			return out, out.Err
		}
	}
	out.finish(p, *conds, p[len(p)-1].Type)
	return out, nil
}

func evaluate(ctx context.Context, d Desired) (Result, error) {
	res, err := d.Build(ctx)
	if err != nil || !res.Succeeded() {
		return res, err
	}
	return d.IsReady(ctx)
}

func (o *Outcome) finish(p Phases, conds []metav1.Condition, current string) {
	o.Phase = current
	o.Completed = 0
	for _, ph := range p {
		if c := conditions.Get(conds, ph.Type); c != nil && c.Status == metav1.ConditionTrue {
			o.Completed++
		}
	}
}
