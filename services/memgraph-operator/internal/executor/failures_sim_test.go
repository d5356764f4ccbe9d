package executor_test

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/opsuite/suite/services/memgraph-operator/internal/executor"
	"github.com/opsuite/suite/services/memgraph-operator/internal/memgraph"
)

// TestNoLeaderVersusUnreachable: coordinators that answer but name no leader are
// NoCoordinatorLeader; coordinators that do not answer are CoordinatorUnreachable.
func TestNoLeaderVersusUnreachable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cl, _ := bootstrap(t, ctx, 3, 1)
	want := cl.Desired(nil, nil)

	// Two of three gone: the survivor loses its leader (no quorum) and says so.
	cl.Stop(cl.Coordinators[2])
	cl.Stop(cl.Coordinators[3])
	out := waitReason(t, ctx, want, executor.ReasonNoCoordinatorLeader)
	if out.Leader != "" || len(out.Executed) != 0 || out.Converged {
		t.Errorf("without a leader: %+v; want nothing done", out)
	}

	cl.Stop(cl.Coordinators[1])
	out = waitReason(t, ctx, want, executor.ReasonCoordinatorUnreachable)
	if len(out.Executed) != 0 || out.Message == "" {
		t.Errorf("all unreachable: %+v", out)
	}

	// Back: the cluster re-elects from its retained Raft state and nothing needs writing.
	for id := 1; id <= 3; id++ {
		cl.Restart(cl.Coordinators[id])
	}
	outs := converge(t, ctx, want)
	if got := executed(outs); len(got) != 0 {
		t.Errorf("after the coordinators returned: executed %q, want nothing", got)
	}
}

// TestWipedCoordinatorIsNotTakenForTheLeader: coordinator_1 loses its storage and starts
// as the leader of a new one-member cluster; the pass must act on the real cluster's
// leader, never bootstrap a second cluster on coordinator_1.
func TestWipedCoordinatorIsNotTakenForTheLeader(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cl, outs := bootstrap(t, ctx, 3, 2)
	main := last(outs).Main
	c1 := cl.Coordinators[1]
	cl.Stop(c1)
	if err := os.RemoveAll(c1.DataDir); err != nil {
		t.Fatal(err)
	}
	cl.Restart(c1)
	for i := 0; i < 15; i++ {
		out, err := executor.Reconcile(ctx, dialer, cl.Desired(nil, nil))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("pass %d after the wipe: leader %q reason %s %q executed %q", i, out.Leader, out.Reason, out.Message, out.Executed)
		if out.Leader == "coordinator_1" {
			if _, ok := memgraph.MainOf(out.Instances); !ok {
				t.Fatalf("pass %d acted on the wiped coordinator_1 (a cluster without the data instances): %+v", i, out)
			}
		}
		if slices.ContainsFunc(out.Executed, func(q string) bool {
			return q == memgraph.SetInstanceToMain("d_0") || q == memgraph.SetInstanceToMain("d_1")
		}) {
			t.Fatalf("pass %d promoted again: %q", i, out.Executed)
		}
		time.Sleep(300 * time.Millisecond)
	}
	out := last(converge(t, ctx, cl.Desired(nil, nil)))
	if out.Main != main {
		t.Errorf("MAIN %q, was %q", out.Main, main)
	}
	assertOneMainAtATime(t, cl)
}

// TestKilledBetweenDemoteAndPromote: a pass that died right after DEMOTE leaves the
// cluster without a MAIN; the next pass restores the demoted MAIN (the one copy
// nothing is ahead of) and the one after hands over with proof.
func TestKilledBetweenDemoteAndPromote(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const nodes = 12
	cl, _, s := parkedCluster(t, ctx, 3, 3, nodes)
	// The first command of the handover, then the operator "dies".
	if err := s.Exec(ctx, memgraph.DemoteInstance("d_2")); err != nil {
		t.Fatal(err)
	}

	outs := converge(t, ctx, cl.Desired(nil, []string{"d_2"}))
	got := executed(outs)
	want := []string{memgraph.SetInstanceToMain("d_2"), memgraph.DemoteInstance("d_2"),
		memgraph.SetInstanceToMain("d_0"), memgraph.UnregisterInstance("d_2")}
	if !slices.Equal(got, want) {
		t.Errorf("executed %q, want %q", got, want)
	}
	if n := countNodes(t, ctx, cl.Data["d_0"].Bolt); n != nodes {
		t.Errorf("d_0 holds %d nodes, want %d", n, nodes)
	}
	assertOneMainAtATime(t, cl)
}

// TestMainKilled: the coordinators fail over by themselves; the pass never promotes
// over a MAIN they still record, and converges once the old MAIN is back as a replica.
func TestMainKilled(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cl, outs := bootstrap(t, ctx, 3, 2)
	old := last(outs).Main
	writeNodes(t, ctx, cl.Data[old].Bolt, 7)
	killed := time.Now()
	cl.Kill(cl.Data[old])
	out := last(passUntil(t, ctx, cl.Desired(nil, nil), func(o executor.Outcome) bool {
		if o.Reason == executor.ReasonCommandRefused {
			t.Fatalf("refused while the coordinators fail over: %+v", o)
		}
		return o.Main != "" && o.Main != old
	}))
	t.Logf("failover to %s %v after the kill", out.Main, time.Since(killed).Round(time.Millisecond))
	cl.Restart(cl.Data[old])
	// The coordinators demote the returning MAIN; registration has nothing to add.
	for back := false; !back; {
		outs := converge(t, ctx, cl.Desired(nil, nil))
		out = last(outs)
		if len(executed(outs)) != 0 {
			t.Fatalf("registration wrote after the failover: %q", executed(outs))
		}
		for _, in := range out.Instances {
			if in.Name == old && in.Up() {
				back = true
				if in.Role != memgraph.RoleReplica {
					t.Errorf("old MAIN %s came back as %q", old, in.Role)
				}
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	if n := countNodes(t, ctx, cl.Data[out.Main].Bolt); n != 7 {
		t.Errorf("new MAIN holds %d nodes, want 7", n)
	}
	assertOneMainAtATime(t, cl)
}

func waitReason(t *testing.T, ctx context.Context, want executor.Desired, reason string) executor.Outcome {
	t.Helper()
	return last(passUntil(t, ctx, want, func(o executor.Outcome) bool { return o.Reason == reason }))
}
