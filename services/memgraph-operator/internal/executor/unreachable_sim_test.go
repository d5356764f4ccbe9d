package executor_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opsuite/suite/services/memgraph-operator/internal/executor"
	"github.com/opsuite/suite/services/memgraph-operator/internal/memgraph"
	"github.com/opsuite/suite/shared/testenv"
)

// cutOffDialer is the real Dialer (3 s timeout, as the package's dialer: shorter ones
// time out on a loaded machine) with the operator cut off from the members at addrs: their
// connections go to a black hole.
func cutOffDialer(t *testing.T, addrs ...string) memgraph.Dialer {
	t.Helper()
	hole := testenv.BlackHole(t)
	return memgraph.NewDialer(memgraph.Options{Timeout: 3 * time.Second, Resolve: func(a string) string {
		if slices.Contains(addrs, a) {
			return hole
		}
		return a
	}})
}

// TestMembersOnlyTheOperatorCannotReach (issue "Faults across the suite", item 2: an
// operator cut off from its data plane): the coordinators reach every member, the operator
// does not. Cut off from the MAIN, which is retiring (a pass would hand it over), the pass
// says so (MembersUnreachable, the MAIN named with the cause) and runs nothing; cut off
// from every member, it finds no leader and names all of them. Every member is dialled at
// once, so a pass takes one dial timeout, not one per member. Once the operator reaches
// them again the handover runs.
func TestMembersOnlyTheOperatorCannotReach(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, outs := bootstrap(t, ctx, 3, 3)
	main := last(outs).Main
	want := cl.Desired(nil, []string{main})

	d := cutOffDialer(t, cl.Data[main].Bolt)
	for i := range 3 {
		begin := time.Now()
		out, err := executor.Reconcile(ctx, d, want)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("cut off from the MAIN, pass %d (%s): %s %q", i, time.Since(begin).Round(time.Millisecond), out.Reason, out.Message)
		if out.Reason != executor.ReasonMembersUnreachable || !slices.Equal(out.Unanswered, []string{main + " (no answer within 3s)"}) ||
			len(out.Executed) != 0 || out.Converged || out.Main != main || out.Leader == "" {
			t.Fatalf("cut off from the MAIN %s: %+v; want MembersUnreachable naming it, the MAIN still %s, nothing run", main, out, main)
		}
		seen, err := executor.Observe(ctx, d, want)
		if err != nil {
			t.Fatal(err)
		}
		if seen.Reason != executor.ReasonMembersUnreachable || !strings.Contains(executor.ViewKey(seen), "unanswered: "+main) {
			t.Errorf("Observe cut off from the MAIN: %s, view %q", seen.Reason, executor.ViewKey(seen))
		}
	}

	var all []string
	for _, p := range cl.Coordinators {
		all = append(all, p.Bolt)
	}
	for _, p := range cl.Data {
		all = append(all, p.Bolt)
	}
	d = cutOffDialer(t, all...)
	begin := time.Now()
	out, err := executor.Reconcile(ctx, d, want)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(begin)
	t.Logf("cut off from every member (%s): %s %q; unanswered %q", took.Round(time.Millisecond), out.Reason, out.Message, out.Unanswered)
	var wantUnanswered []string
	for _, n := range []string{"coordinator_1", "coordinator_2", "coordinator_3", "d_0", "d_1", "d_2"} {
		wantUnanswered = append(wantUnanswered, n+" (no answer within 3s)")
	}
	if out.Reason != executor.ReasonCoordinatorUnreachable || !slices.Equal(out.Unanswered, wantUnanswered) || len(out.Executed) != 0 || out.Leader != "" {
		t.Errorf("cut off from every member: %+v; want CoordinatorUnreachable, all six unanswered, nothing run", out)
	}
	if n := len(all); took >= time.Duration(n)*3*time.Second {
		t.Errorf("a pass cut off from %d members took %s: not one dial timeout (3s) but one per member", n, took)
	}

	// Healed: the retirement goes on, the MAIN handed over first.
	got := executed(converge(t, ctx, want))
	if !slices.Contains(got, memgraph.DemoteInstance(main)) || !slices.Contains(got, memgraph.UnregisterInstance(main)) {
		t.Errorf("after healing: executed %q, want the handover and retirement of %s", got, main)
	}
	assertOneMainAtATime(t, cl)
}
