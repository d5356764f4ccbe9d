package reconciler

import (
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Result is how a pass ended, apart from transient errors (returned as errors and retried
// with back-off): done until the next watch event, waiting for a while, or stopped on a
// spec no retry can fix.
type Result struct {
	after    time.Duration
	terminal error
}

// Done means nothing to look at again until something changes.
func Done() Result { return Result{} }

// Wait means look again after d (Pending or Progressing work; a watch event usually comes
// first). Waiting is never an error: errors back off exponentially and flood logs.
func Wait(d time.Duration) Result { return Result{after: d} }

// Terminal means the spec is wrong and no retry helps until it changes; err says what to change.
func Terminal(err error) Result {
	if err == nil {
		err = fmt.Errorf("terminal failure")
	}
	return Result{terminal: err}
}

// controllerResult maps r onto controller-runtime's result: Wait to RequeueAfter, Terminal
// to reconcile.TerminalError (logged, counted, not retried).
func (r Result) controllerResult() (reconcile.Result, error) {
	if r.terminal != nil {
		return reconcile.Result{}, reconcile.TerminalError(r.terminal)
	}
	return reconcile.Result{RequeueAfter: r.after}, nil
}
