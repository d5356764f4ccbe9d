package executor

import (
	"context"
	"fmt"
	"slices"

	"github.com/opsuite/suite/services/memgraph-operator/internal/memgraph"
	"github.com/opsuite/suite/services/memgraph-operator/internal/planner"
)

// LostOutcome is what ReplaceLost saw and did.
type LostOutcome struct {
	// Decision is planner.PlanLost's on the leader's view, less the starts whose removal
	// failed (reported in its notes instead).
	Decision planner.LostDecision
	// Leader is the Raft leader the view came from ("" when none was found).
	Leader string
	// Executed are the removals the leader accepted, in order.
	Executed []string
	// Failed are the removals that failed, with the error (for the log).
	Failed map[string]error
}

// ReplaceLost plans what to do about members on lost nodes (planner.PlanLost, given the
// leader's SHOW INSTANCES) and runs on the leader the membership removal of each
// replacement that starts now: UNREGISTER INSTANCE, REMOVE COORDINATOR. It never
// registers, promotes or adds: the registration does, once the new pods run. While members
// the leader shows up do not answer the operator, nothing starts (planner rule 0). A removal
// that fails drops its start (the member is judged again next pass). Without a leader
// the plan starts nothing. The error is only a malformed want or a cancelled context.
func ReplaceLost(ctx context.Context, d memgraph.Dialer, want Desired, in planner.LostInput) (LostOutcome, error) {
	out, ldr, found, err := look(ctx, d, want)
	defer found.close(ctx)
	if err != nil {
		return LostOutcome{}, err
	}
	in.Leader, in.Instances, in.Unanswered = "", nil, out.Unanswered
	if ldr != nil {
		in.Leader, in.Instances = ldr.name, ldr.rows
	}
	lo := LostOutcome{Leader: out.Leader, Decision: planner.PlanLost(in)}
	for _, s := range slices.Clone(lo.Decision.Start) {
		if s.Remove == nil {
			continue
		}
		q := s.Remove.Cypher()
		if ldr == nil {
			lo.Decision.Refuse(s, refusedRemoval(s))
			continue
		}
		if err := ldr.sess.Exec(ctx, q); err != nil {
			if cerr := ctx.Err(); cerr != nil {
				return lo, cerr
			}
			if lo.Failed == nil {
				lo.Failed = map[string]error{}
			}
			lo.Failed[q] = err
			lo.Decision.Refuse(s, refusedRemoval(s))
			continue
		}
		lo.Executed = append(lo.Executed, q)
	}
	return lo, nil
}

// refusedRemoval is the condition's message for a removal the leader did not take: stable,
// without the error (the log has it).
func refusedRemoval(s planner.LostStart) string {
	return fmt.Sprintf("member %s of lost node %s (%s) is not replaced yet: the leader did not take %s (the operator's log has the cause); it is tried again",
		s.Entry.Member, s.Entry.Node, s.Entry.Reason, s.Remove.String())
}
