package executor

import (
	"context"
	"slices"
	"strings"

	"github.com/opsuite/suite/services/memgraph-operator/internal/memgraph"
)

// Observe reads the cluster the way a registration pass starts (every declared
// coordinator's SHOW INSTANCES at once, the leader picked by PickLeader) and changes
// nothing: no plan, no command, no read of a data instance. The controller calls it where
// it may not register (pods not ready) and between registrations of a steady cluster, so
// that status.main follows the coordinators' failover, which makes no Kubernetes event.
// The Outcome holds Leader, Main, Instances and CoordinatorsBehind; Reason is
// MembersDown when declared members are down in the leader's view, the discovery's reason
// when there is no leader, and "" otherwise (Converged stays false: nothing was planned).
func Observe(ctx context.Context, d memgraph.Dialer, want Desired) (Outcome, error) {
	out, ldr, found, err := look(ctx, d, want)
	defer found.close(ctx)
	if err != nil || ldr == nil {
		return out, err
	}
	if m, ok := memgraph.MainOf(out.Instances); ok {
		out.Main = m.Name
	}
	if down := downMembers(want, out.Instances); len(down) > 0 {
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
	ldr, found = discover(ctx, d, want)
	if err := ctx.Err(); err != nil {
		return out, nil, found, err
	}
	if ldr == nil {
		out.Reason, out.Message = found.reason, found.message
		return out, nil, found, nil
	}
	out.Leader, out.Instances = ldr.name, ldr.rows
	out.CoordinatorsBehind = Behind(found.views, ldr.name, ldr.rows)
	return out, ldr, found, nil
}

// ViewKey is what a watch of the cluster compares from one observation to the next: the
// leader, and each member's role and health in the leader's SHOW INSTANCES, sorted; the
// discovery's reason when there is no leader. Last-response times and addresses are left
// out, so a steady cluster always gives the same key. Pure.
func ViewKey(out Outcome) string {
	if out.Leader == "" {
		return "no leader: " + out.Reason
	}
	members := make([]string, 0, len(out.Instances))
	for _, r := range out.Instances {
		members = append(members, r.Name+"="+r.Role+"/"+r.Health)
	}
	slices.Sort(members)
	return "leader " + out.Leader + ": " + strings.Join(members, " ")
}
