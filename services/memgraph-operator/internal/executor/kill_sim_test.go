package executor_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/opsuite/suite/services/memgraph-operator/internal/executor"
	"github.com/opsuite/suite/services/memgraph-operator/internal/memgraph"
)

// dyingDialer is the real Dialer whose sessions let `left` admin commands through, then
// cancel the pass as if the operator process died right there.
type dyingDialer struct {
	memgraph.Dialer
	mu     sync.Mutex
	left   int
	cancel context.CancelFunc
}

func (d *dyingDialer) Dial(ctx context.Context, addr string) (memgraph.Session, error) {
	s, err := d.Dialer.Dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	return dyingSession{Session: s, d: d}, nil
}

type dyingSession struct {
	memgraph.Session
	d *dyingDialer
}

func (s dyingSession) Exec(ctx context.Context, q string) error {
	s.d.mu.Lock()
	dead := s.d.left == 0
	s.d.left--
	s.d.mu.Unlock()
	if dead {
		s.d.cancel()
		return context.Canceled
	}
	return s.Session.Exec(ctx, q)
}

// TestKilledMidRetirement shrinks data 3 -> 2 (the MAIN parked on the retiring d_2) and
// coordinators 5 -> 3 in one edit, killing the first pass after each possible number of
// commands; every run must end converged with the nodes kept and one MAIN at a time.
func TestKilledMidRetirement(t *testing.T) {
	const commands = 5 // DEMOTE d_2, SET d_0 TO MAIN, UNREGISTER d_2, REMOVE 4, REMOVE 5
	for k := 0; k <= commands; k++ {
		t.Run(fmt.Sprintf("killed after %d", k), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
			defer cancel()
			cl, out, _ := parkedCluster(t, ctx, 5, 3, 9)
			if out.Leader != "coordinator_1" {
				t.Fatalf("leader %s; the scenario assumes coordinator_1", out.Leader)
			}
			want := cl.Desired([]int{4, 5}, []string{"d_2"})

			passCtx, die := context.WithCancel(ctx)
			dying := &dyingDialer{Dialer: dialer, left: k, cancel: die}
			first, err := executor.Reconcile(passCtx, dying, want)
			die()
			if k < commands && !errors.Is(err, context.Canceled) {
				t.Fatalf("killed pass: %v, %+v; want it cancelled", err, first)
			}
			if len(first.Executed) != k {
				t.Errorf("killed pass ran %q, want %d commands", first.Executed, k)
			}

			outs := converge(t, ctx, want)
			out = last(outs)
			if !slices.Equal(out.RetiredData, []string{"d_2"}) || !slices.Equal(out.RetiredCoordinators, []int{4, 5}) {
				t.Errorf("retired %v %v", out.RetiredData, out.RetiredCoordinators)
			}
			assertMembership(t, out, []string{"coordinator_1", "coordinator_2", "coordinator_3"}, []string{"d_0", "d_1"})
			if n := countNodes(t, ctx, cl.Data[out.Main].Bolt); n != 9 {
				t.Errorf("MAIN %s holds %d nodes, want 9", out.Main, n)
			}
			assertOneMainAtATime(t, cl)
		})
	}
}
