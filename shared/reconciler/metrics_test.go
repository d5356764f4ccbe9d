package reconciler

import (
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func TestMetricsAreNamedAfterTheOperator(t *testing.T) {
	m := MetricsFor("demo-operator")
	if MetricsFor("demo-operator") != m {
		t.Fatal("a second reconciler of the same operator registered its metrics again")
	}
	// Four outcome series at zero and one histogram, before any pass.
	n, err := testutil.GatherAndCount(metrics.Registry, "demo_operator_reconcile_total", "demo_operator_reconcile_duration_seconds")
	if err != nil || n != 5 {
		t.Errorf("demo_operator_* series on controller-runtime's registry: %d, %v; want 5", n, err)
	}
}

func TestOutcome(t *testing.T) {
	for _, tc := range []struct {
		res  reconcile.Result
		err  error
		want string
	}{
		{reconcile.Result{}, nil, OutcomeDone},
		{reconcile.Result{RequeueAfter: 1}, nil, OutcomeRequeued},
		{reconcile.Result{}, reconcile.TerminalError(errors.New("bad spec")), OutcomeFailed},
		{reconcile.Result{}, errors.New("timeout"), OutcomeError},
	} {
		if got := Outcome(tc.res, tc.err); got != tc.want {
			t.Errorf("Outcome(%+v, %v) = %s, want %s", tc.res, tc.err, got, tc.want)
		}
	}
	if r, err := Wait(5).controllerResult(); err != nil || r.RequeueAfter != 5 {
		t.Errorf("Wait maps to %+v, %v", r, err)
	}
	if _, err := Terminal(errors.New("x")).controllerResult(); !errors.Is(err, reconcile.TerminalError(nil)) {
		t.Errorf("Terminal maps to %v", err)
	}
}
