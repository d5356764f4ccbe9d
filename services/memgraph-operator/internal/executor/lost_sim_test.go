package executor_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opsuite/suite/services/memgraph-operator/internal/executor"
	"github.com/opsuite/suite/services/memgraph-operator/internal/planner"
	"github.com/opsuite/suite/shared/lostnodes"
	"github.com/opsuite/suite/shared/testenv"
)

// TestReplaceLostHeldWhileMembersUnanswered (issue "Faults across the suite", items 1 and
// 2): a replica lost with its node is taken out of the membership only while the operator
// sees every member the leader shows up. Cut off from the other replica (the leader shows
// it up), the pass removes nothing and says whom it waits for; once the operator reaches
// it, the lost replica is unregistered.
func TestReplaceLostHeldWhileMembersUnanswered(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, outs := bootstrap(t, ctx, 3, 3)
	main := last(outs).Main
	want := cl.Desired(nil, nil)
	var replicas []string
	for _, n := range []string{"d_0", "d_1", "d_2"} {
		if n != main {
			replicas = append(replicas, n)
		}
	}
	lost, hidden := replicas[0], replicas[1]
	cl.Kill(cl.Data[lost])
	testenv.Eventually(t, time.Minute, lost+" down in the leader's view", func() (bool, string) {
		out, err := executor.Observe(ctx, dialer, want)
		if err != nil {
			return false, err.Error()
		}
		for _, in := range out.Instances {
			if in.Name == lost {
				return !in.Up(), in.Health
			}
		}
		return false, "not listed"
	})
	// Its node is deleted (absent from Nodes); the other members' volumes are elsewhere.
	in := planner.LostInput{Now: time.Now(), Automatic: true, GracePeriod: 5 * time.Minute,
		Nodes:   lostnodes.Nodes{"n-other": {Health: lostnodes.Ready}},
		Members: []planner.PinnedMember{{Pod: "pod-" + lost, Instance: lost, Node: "n-lost"}}}

	held, err := executor.ReplaceLost(ctx, cutOffDialer(t, cl.Data[hidden].Bolt), want, in)
	if err != nil {
		t.Fatal(err)
	}
	cond, _ := held.Decision.Condition()
	t.Logf("cut off from %s: executed %q, MemberLost %s %s: %s", hidden, held.Executed, cond.Status, cond.Reason, cond.Message)
	if len(held.Executed) != 0 || len(held.Decision.Start) != 0 || !strings.Contains(cond.Message, "the operator reaches "+hidden) {
		t.Fatalf("cut off from %s, which the leader shows up: executed %q, starts %d, %q; want nothing removed and %s named",
			hidden, held.Executed, len(held.Decision.Start), cond.Message, hidden)
	}

	done, err := executor.ReplaceLost(ctx, dialer, want, in)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("every member answering: executed %q", done.Executed)
	if !slices.ContainsFunc(done.Executed, func(q string) bool { return strings.Contains(q, "UNREGISTER INSTANCE") && strings.Contains(q, lost) }) {
		t.Fatalf("every member answering: executed %q, want %s unregistered", done.Executed, lost)
	}
}
