package executor

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/opsuite/suite/services/memgraph-operator/internal/memgraph"
	"github.com/opsuite/suite/services/memgraph-operator/internal/planner"
)

// Observe reads the cluster the way a registration pass starts (every declared
// coordinator's SHOW INSTANCES at once, the leader picked by PickLeader) and changes
// nothing: no plan, no command, no query to a data instance. The controller calls it where
// it may not register (pods not ready) and between registrations of a steady cluster, so
// that status.main follows the coordinators' failover, which makes no Kubernetes event.
// The Outcome holds Leader, Main, Instances, CoordinatorsBehind and Unanswered; Reason is
// MembersUnreachable when members the leader shows up do not answer the operator, MembersDown when declared members are down in the leader's view, the
// discovery's reason when there is no leader, and "" otherwise (Converged stays false:
// nothing was planned). Like a pass, it dials every declared data instance.
func Observe(ctx context.Context, d memgraph.Dialer, want Desired) (Outcome, error) {
	out, ldr, found, err := look(ctx, d, want)
	defer found.close(ctx)
	if err != nil || ldr == nil {
		return out, err
	}
	if m, ok := memgraph.MainOf(out.Instances); ok {
		out.Main = m.Name
	}
	switch down := downMembers(want, out.Instances); {
	case len(out.Unanswered) > 0:
		out.Reason, out.Message = ReasonMembersUnreachable, unansweredMessage(out.Unanswered)
	case len(down) > 0:
		out.Reason = ReasonMembersDown
		out.Message = strings.Join(down, ", ") + " down in the leader's view"
	}
	return out, nil
}

// look is how every pass starts: validate want, ask every coordinator, pick the leader.
// The Outcome holds the leader, its rows and the coordinators behind it, or the reason
// there is none (ldr nil). The caller closes found (never nil).
func look(ctx context.Context, d memgraph.Dialer, want Desired) (out Outcome, ldr *leaderConn, found *discovery, err error) {
	if err := validate(want); err != nil {
		return Outcome{}, nil, &discovery{}, err
	}
	// The data instances are probed while the coordinators are asked: one observation
	// takes as long as the slowest member, however many do not answer.
	probed := make(chan map[string]error, 1)
	go func() { probed <- probeData(ctx, d, want) }()
	ldr, found = discover(ctx, d, want)
	dataErrs := <-probed
	if err := ctx.Err(); err != nil {
		return out, nil, found, err
	}
	// A member whose address refuses the connection is not listening (its process is down
	// or starting): the coordinators see it so too, and it is theirs (MembersDown). One
	// that gives no answer may be serving, out of the operator's sight only.
	found.unreachable = map[string]string{}
	for _, v := range found.views {
		if memgraph.IsUnreachable(v.Err) && !memgraph.NotListening(v.Err) {
			found.unreachable[v.Coordinator.Name] = memgraph.Cause(v.Err)
		}
	}
	for name, err := range dataErrs {
		if memgraph.IsUnreachable(err) && !memgraph.NotListening(err) {
			found.unreachable[name] = memgraph.Cause(err)
		}
	}
	if ldr == nil {
		out.Reason, out.Message = found.reason, found.message
		// No leader's view says who is down: every member not answering counts.
		out.Unanswered = unanswered(found.unreachable, slices.Sorted(maps.Keys(found.unreachable)))
		return out, nil, found, nil
	}
	out.Leader, out.Instances = ldr.name, ldr.rows
	out.CoordinatorsBehind = Behind(found.views, ldr.name, ldr.rows)
	out.Unanswered = unanswered(found.unreachable, planner.Unanswered(planner.Observed{Instances: ldr.rows, Unreachable: found.unreachable}))
	return out, ldr, found, nil
}

// unanswered is names with their causes, "name (cause)", in names' order.
func unanswered(causes map[string]string, names []string) []string {
	if len(names) == 0 {
		return nil
	}
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = fmt.Sprintf("%s (%s)", n, causes[n])
	}
	return out
}

// ViewKey is what a watch of the cluster compares from one observation to the next: the
// leader, and each member's role and health in the leader's SHOW INSTANCES, sorted; the
// discovery's reason when there is no leader; the members that do not answer the
// operator. Last-response times and addresses are left out, so a steady cluster always
// gives the same key. Pure.
func ViewKey(out Outcome) string {
	var unanswered string
	if len(out.Unanswered) > 0 {
		unanswered = "; unanswered: " + strings.Join(out.Unanswered, ", ")
	}
	if out.Leader == "" {
		return "no leader: " + out.Reason + unanswered
	}
	members := make([]string, 0, len(out.Instances))
	for _, r := range out.Instances {
		members = append(members, r.Name+"="+r.Role+"/"+r.Health)
	}
	slices.Sort(members)
	return "leader " + out.Leader + ": " + strings.Join(members, " ") + unanswered
}
