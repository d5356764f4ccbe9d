package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// settable is a desired state whose result the test sets between passes.
type settable struct {
	res Result
	err error
}

func (s *settable) Build(context.Context) (Result, error)   { return Succeeded(""), nil }
func (s *settable) IsReady(context.Context) (Result, error) { return s.res, s.err }

// summary renders conditions as Type=Status/Reason, in order.
func summary(conds []metav1.Condition) string {
	var parts []string
	for _, c := range conds {
		parts = append(parts, fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason))
	}
	return strings.Join(parts, " ")
}

func TestRunPasses(t *testing.T) {
	clusters := &settable{res: Pending("waiting for ids")}
	vrs := &settable{res: Progressing("creating")}
	phases := Phases{
		{Type: "WaitingClusterCreate", Desired: Prop{Check: func() Result { return clusters.res }}, Seed: "Checking."},
		{Type: "WaitingCreateVrs", Desired: vrs, Seed: "Creating."},
		{Type: "Completed", Seed: "Done."},
	}
	var conds []metav1.Condition
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

	steps := []struct {
		before    func()
		want      string
		phase     string
		completed int32
		halt      string // reason of the halting result, "" for none
		seeded    bool
		changes   int
	}{
		// A phase reached is evaluated in the same pass.
		{want: "WaitingClusterCreate=Unknown/Pending", phase: "WaitingClusterCreate", halt: "Pending", seeded: true, changes: 1},
		{want: "WaitingClusterCreate=Unknown/Pending", phase: "WaitingClusterCreate", halt: "Pending"},
		{before: func() { clusters.res = Succeeded("ok") },
			want: "WaitingClusterCreate=True/Succeeded WaitingCreateVrs=Unknown/Progressing", phase: "WaitingCreateVrs", completed: 1, halt: "Progressing", seeded: true, changes: 2},
		{want: "WaitingClusterCreate=True/Succeeded WaitingCreateVrs=Unknown/Progressing", phase: "WaitingCreateVrs", completed: 1, halt: "Progressing"},
		{before: func() { vrs.res = Succeeded("created") },
			want: "WaitingClusterCreate=True/Succeeded WaitingCreateVrs=True/Succeeded Completed=True/Succeeded", phase: "Completed", completed: 3, changes: 2},
		{want: "WaitingClusterCreate=True/Succeeded WaitingCreateVrs=True/Succeeded Completed=True/Succeeded", phase: "Completed", completed: 3},
		// A ValdRelease deleted: the phase goes back, the terminal phase is blocked.
		{before: func() { vrs.res = Progressing("creating") },
			want: "WaitingClusterCreate=True/Succeeded WaitingCreateVrs=Unknown/Progressing Completed=Unknown/Blocked", phase: "WaitingCreateVrs", completed: 1, halt: "Progressing", changes: 2},
		// The spec broken: the first phase fails, every later one is blocked.
		{before: func() { clusters.res = Failed("no clusters") },
			want: "WaitingClusterCreate=False/Failed WaitingCreateVrs=Unknown/Blocked Completed=Unknown/Blocked", phase: "WaitingClusterCreate", halt: "Failed", changes: 2},
		// Both recover in one pass.
		{before: func() { clusters.res, vrs.res = Succeeded("ok"), Succeeded("created") },
			want: "WaitingClusterCreate=True/Succeeded WaitingCreateVrs=True/Succeeded Completed=True/Succeeded", phase: "Completed", completed: 3, changes: 3},
	}
	for i, s := range steps {
		if s.before != nil {
			s.before()
		}
		now = now.Add(time.Minute)
		out, err := phases.Run(context.Background(), &conds, 7, now)
		if err != nil {
			t.Fatalf("pass %d: %v", i, err)
		}
		if got := summary(conds); got != s.want {
			t.Errorf("pass %d: conditions %s, want %s", i, got, s.want)
		}
		haltReason := ""
		if out.Halt != nil {
			haltReason = out.Halt.Reason
		}
		if out.Phase != s.phase || out.Completed != s.completed || out.Total != 3 || haltReason != s.halt || out.Seeded != s.seeded || len(out.Transitions) != s.changes {
			t.Errorf("pass %d: outcome phase=%s completed=%d/%d halt=%q seeded=%v transitions=%d, want phase=%s completed=%d/3 halt=%q seeded=%v transitions=%d",
				i, out.Phase, out.Completed, out.Total, haltReason, out.Seeded, len(out.Transitions), s.phase, s.completed, s.halt, s.seeded, s.changes)
		}
		for _, c := range conds {
			if c.ObservedGeneration != 7 {
				t.Errorf("pass %d: %s has observedGeneration %d", i, c.Type, c.ObservedGeneration)
			}
		}
	}
}

// A release whose phases all succeed at once reaches Completed in its first pass: one
// status write instead of one per phase, the conditions in order and each phase once.
func TestRunAllPhasesInOnePass(t *testing.T) {
	phases := Phases{
		{Type: "A", Desired: Prop{Check: func() Result { return Succeeded("a") }}, Seed: "Checking."},
		{Type: "B", Desired: Prop{Check: func() Result { return Progressing("") }}, Seed: "Creating."},
		{Type: "C", Seed: "Done."},
	}
	var conds []metav1.Condition
	out, err := phases.Run(context.Background(), &conds, 1, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	// A phase reached that reports no message of its own shows its seed.
	if got := summary(conds); got != "A=True/Succeeded B=Unknown/Progressing" || conds[1].Message != "Creating." || !out.Seeded || out.Phase != "B" {
		t.Errorf("conditions %s (B says %q), outcome %+v", got, conds[1].Message, out)
	}
	phases[1].Desired = Prop{Check: func() Result { return Succeeded("b") }}
	conds = nil
	out, err = phases.Run(context.Background(), &conds, 1, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if got := summary(conds); got != "A=True/Succeeded B=True/Succeeded C=True/Succeeded" || out.Phase != "C" || out.Completed != 3 || out.Seeded || out.Halt != nil || len(out.Transitions) != 3 {
		t.Errorf("conditions %s, outcome %+v", got, out)
	}
	for _, tr := range out.Transitions {
		if tr.Before != nil {
			t.Errorf("%s: a phase reached in this pass has no earlier condition, got %+v", tr.Type, tr.Before)
		}
	}
}

func TestRunErrorStopsClaimingSuccess(t *testing.T) {
	failing := &settable{err: errors.New("apiserver unavailable")}
	phases := Phases{
		{Type: "A", Desired: Prop{Check: func() Result { return Succeeded("a") }}},
		{Type: "B", Desired: failing},
		{Type: "C"},
	}
	// B and C succeeded in an earlier pass; an API error now must not leave them True.
	conds := []metav1.Condition{
		{Type: "A", Status: metav1.ConditionUnknown, Reason: "Progressing"},
		{Type: "B", Status: metav1.ConditionTrue, Reason: "Succeeded"},
		{Type: "C", Status: metav1.ConditionTrue, Reason: "Succeeded"},
	}
	out, err := phases.Run(context.Background(), &conds, 1, time.Now())
	if err == nil || !strings.Contains(err.Error(), "phase B") || !errors.Is(out.Err, err) {
		t.Fatalf("error %v (outcome %v), want one naming phase B", err, out.Err)
	}
	if got := summary(conds); got != "A=True/Succeeded B=Unknown/Progressing C=Unknown/Blocked" {
		t.Errorf("conditions %s", got)
	}
	if msg := conds[1].Message; msg != "A request to the API server failed (an error); retrying. The operator's log has the details." {
		t.Errorf("message %q", msg)
	}
	if out.Phase != "B" || out.Completed != 1 || out.Halt == nil || out.Halt.Reason != "Progressing" {
		t.Errorf("outcome phase=%s completed=%d halt=%+v", out.Phase, out.Completed, out.Halt)
	}

	// A RetryError's own message stands in the condition.
	failing.err = Retry("Writing X failed (Forbidden); retrying.", errors.New("forbidden: user cannot patch"))
	if _, err := phases.Run(context.Background(), &conds, 1, time.Now()); err == nil {
		t.Fatal("no error")
	}
	if msg := conds[1].Message; msg != "Writing X failed (Forbidden); retrying." {
		t.Errorf("message %q", msg)
	}

	// A cause outside the controller waits: Pending.
	failing.err = WaitFor("Name taken; waiting.", errors.New("not controlled"))
	if _, err := phases.Run(context.Background(), &conds, 1, time.Now()); err == nil {
		t.Fatal("no error")
	}
	if got := summary(conds); got != "A=True/Succeeded B=Unknown/Pending C=Unknown/Blocked" || conds[1].Message != "Name taken; waiting." {
		t.Errorf("conditions %s, message %q", got, conds[1].Message)
	}
}

func TestTransitionElapsed(t *testing.T) {
	d := &settable{res: Progressing("x")}
	phases := Phases{{Type: "A", Desired: d}, {Type: "Done"}}
	var conds []metav1.Condition
	t0 := time.Now().Truncate(time.Second)
	if _, err := phases.Run(context.Background(), &conds, 1, t0); err != nil {
		t.Fatal(err)
	}
	// The condition's transition time is the wall clock when it was set.
	conds[0].LastTransitionTime = metav1.NewTime(t0)
	d.res = Succeeded("y")
	out, err := phases.Run(context.Background(), &conds, 1, t0.Add(90*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Transitions) != 2 || out.Transitions[0].Elapsed != 90*time.Second || out.Transitions[1].Before != nil {
		t.Errorf("transitions %+v", out.Transitions)
	}
}
