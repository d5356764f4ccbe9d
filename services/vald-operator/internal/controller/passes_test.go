package controller

import (
	"fmt"
	"testing"
	"time"

	"github.com/opsuite/suite/shared/reconciler"
)

// TestOnePassPerRelease: a release whose ValdReleases are ready at once converges in one
// pass and three writes (two applies, one status); the events of its own writes (its status
// update, the ValdReleases it created) bring no further pass, and a converged release
// writes nothing more.
func TestOnePassPerRelease(t *testing.T) {
	const n = 40
	h := start(t, func(o *Options) { o.RequeueAfter = time.Minute })
	// Once the ValdRelease watch starts, every release is woken once (see valdReleaseWatch):
	// a release converged before the count begins shows that is behind us.
	h.create(h.release("warm-up", "w=1"))
	h.waitStatus("warm-up", statusCompleted)
	time.Sleep(time.Second)
	m := h.r.pass.Metrics()
	passes := func() float64 {
		return m.Count(reconciler.OutcomeDone) + m.Count(reconciler.OutcomeRequeued) + m.Count(reconciler.OutcomeFailed) + m.Count(reconciler.OutcomeError)
	}
	before, writesBefore := passes(), h.writes.Count()
	for i := range n {
		h.create(h.release(fmt.Sprintf("r%02d", i), fmt.Sprintf("a%02d=1", i), fmt.Sprintf("b%02d=2", i)))
	}
	for i := range n {
		h.waitStatus(fmt.Sprintf("r%02d", i), statusCompleted)
	}
	time.Sleep(2 * time.Second) // the watch events of those writes have arrived by now
	if got := passes() - before; got != n {
		t.Errorf("%.0f passes for %d releases, want one each", got, n)
	}
	if got := h.writes.Count() - writesBefore; got != 3*n {
		t.Errorf("%d writes for %d releases, want 3 each (two applies, one status)", got, n)
	}
}
