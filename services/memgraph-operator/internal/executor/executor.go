// Package executor runs one registration pass against a Memgraph HA cluster: it
// finds the Raft leader, plans with package planner and executes the plan there. The
// controller calls Reconcile once per reconcile and turns the Outcome into status,
// conditions, events and the StatefulSet shrink (RetiredCoordinators, RetiredData).
//
// Leader discovery (PickLeader, pure) asks every declared coordinator, retiring ones
// included and all at once, for SHOW INSTANCES and skips those naming no leader (quorum
// lost, stepped down, removed: their state may be arbitrarily stale). A coordinator whose
// view holds nothing but itself is fresh (a new pod, or one whose storage was wiped) and
// does not vote: it leads, or waits to join, a cluster of its own. Of the votes, the
// leader named most wins, ties to the first voter in id order, and it must confirm with a
// view of its own that names itself and is not fresh. With no vote at all, the cluster
// is bootstrapped on the lowest id leading itself, and only when every declared
// coordinator answered and all are fresh. Asking only the first coordinator that names a
// leader, as the product document did, bootstraps a second cluster on a wiped
// coordinator_1 while the real one still runs (TestPickLeader, and
// TestWipedCoordinatorIsNotTakenForTheLeader against the simulator).
//
// Every pass also dials each declared data instance, at the same time as the coordinators
// (probeData): a member that does not answer the operator while the leader shows it up
// stops the pass before anything is planned (Outcome.Unanswered, ReasonMembersUnreachable;
// planner rule 0), since only the operator's view is incomplete and the coordinators, which
// see the member, decide its fate. A pass stops at the first refusal or transport error
// (the next pass re-observes), after YIELD LEADERSHIP, and after a fallback promotion
// (planner.Execute). Reconcile returns an error only for a malformed Desired or a
// cancelled context; whatever the cluster did is in the Outcome, whose Reason is ""
// exactly when Converged.
package executor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	mgv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/services/memgraph-operator/internal/memgraph"
	"github.com/opsuite/suite/services/memgraph-operator/internal/planner"
)

// Desired is the declared topology (see planner.Desired).
type Desired = planner.Desired

// Outcome reasons, all the api's condition reasons.
const (
	ReasonRetirementInProgress         = mgv1.ReasonRetirementInProgress
	ReasonLeadershipTransferInProgress = mgv1.ReasonLeadershipTransferInProgress
	ReasonNoCoordinatorLeader          = mgv1.ReasonNoCoordinatorLeader
	ReasonCoordinatorUnreachable       = mgv1.ReasonCoordinatorUnreachable
	// ReasonRegistrationInProgress: commands ran this pass, or the plan waits (no MAIN
	// candidate up, a down MAIN the coordinators are failing over); the next pass confirms.
	ReasonRegistrationInProgress = mgv1.ReasonRegistrationInProgress
	// ReasonCommandRefused: Memgraph refused a command; Outcome.Refusal has its message.
	ReasonCommandRefused = mgv1.ReasonRegistrationFailed
	// ReasonMembersDown: nothing to do, but declared members are down in the leader's view.
	ReasonMembersDown = mgv1.ReasonMembersDown
	// ReasonMembersUnreachable: members the leader shows up do not answer the operator
	// (Outcome.Unanswered); nothing was planned (planner rule 0).
	ReasonMembersUnreachable = mgv1.ReasonMembersUnreachable
)

// Outcome is what one pass saw and did.
type Outcome struct {
	Leader string // the Raft leader's name ("" when none was found)
	Main   string // the MAIN after the pass ("" when none)
	// Instances is the leader's SHOW INSTANCES, read again after the pass when it wrote.
	Instances []memgraph.Instance
	// Converged: nothing was planned or waited for; membership is the declared set with
	// nothing retiring left in it, a MAIN serves. No write was made.
	Converged bool
	// Reason is "" when Converged, else one of the Reason constants; Message says more
	// (names of retiring members, the plan's waits; no addresses).
	Reason, Message string
	// RetiredCoordinators and RetiredData are the retiring members no longer in the
	// membership: their pods may go.
	RetiredCoordinators []int
	RetiredData         []string
	// Executed are the queries the cluster accepted this pass, in order.
	Executed []string
	// Refusal is the error that stopped the pass (Memgraph's message verbatim in
	// Refusal.Message), nil when none did.
	Refusal *memgraph.Error
	// Lag is SHOW REPLICATION LAG as read at the start of the pass: when a MAIN had to
	// move, or Desired.ReadLag asked; nil otherwise or when the leader could not serve it.
	Lag []memgraph.Lag
	// CoordinatorsBehind are the declared coordinators whose own SHOW INSTANCES, read at
	// the start of the pass, did not match the leader's (see Behind); nil when all did.
	CoordinatorsBehind []string
	// Unanswered are the declared members that did not answer the operator this pass (no
	// answer, or the connection broken; a refused one is not listening, which is the
	// coordinators' to see) and that the leader shows up (every one when no leader was
	// found), as "name (cause)" with memgraph.Cause's words, sorted; nil when
	// none. Every member is dialled at once, each within the Dialer's timeout.
	Unanswered []string
}

// Reconcile runs one registration pass.
func Reconcile(ctx context.Context, d memgraph.Dialer, want Desired) (Outcome, error) {
	out, ldr, found, err := look(ctx, d, want)
	defer found.close(ctx)
	if err != nil || ldr == nil {
		return out, err
	}
	seen := planner.Observed{Leader: ldr.name, Instances: ldr.rows, Unreachable: found.unreachable}
	if len(out.Unanswered) > 0 {
		// Planner rule 0: members the leader shows up that the operator cannot reach.
		// Nothing else is asked either: no lag, settings or SHOW REPLICAS.
		if m, ok := memgraph.MainOf(out.Instances); ok {
			out.Main = m.Name
		}
		out.Reason, out.Message = ReasonMembersUnreachable, unansweredMessage(out.Unanswered)
		return out, nil
	}
	if planner.NeedsLag(want, ldr.rows) || want.ReadLag {
		lag, err := ldr.sess.ReplicationLag(ctx)
		switch {
		case err == nil:
			seen.Lag, out.Lag = lag, lag
		case memgraph.IsUnreachable(err):
			return unreachableLeader(ctx, out, err)
		}
		// Refused (no MAIN to ask): without lag the planner moves no MAIN, it waits.
	}
	if len(want.Settings) > 0 {
		// Refused or unreadable (an older Memgraph): the planner sets nothing.
		if settings, err := ldr.sess.CoordinatorSettings(ctx); err == nil {
			seen.Settings = settings
		}
	}
	seen.Replicas = replicasOfMain(ctx, d, want, ldr.rows)
	plan := planner.Plan(want, seen)
	run := func(_ planner.Command, a planner.Attempt) error { return ldr.sess.Exec(ctx, a.Cypher) }
	rep := planner.Execute(plan.Commands, run)
	for _, a := range rep.Executed {
		out.Executed = append(out.Executed, a.Cypher)
	}
	if err := ctx.Err(); err != nil {
		return out, err
	}
	if rep.ModeBlocked {
		// The MAIN's own registered mode refused a replica's: plan again on what the
		// leader holds now, handing the MAIN over (with proof it is caught up).
		again := planner.Observed{Leader: ldr.name, MainBlocksMode: true}
		if rows, err := ldr.sess.ShowInstances(ctx); err == nil {
			again.Instances = rows
			if lag, err := ldr.sess.ReplicationLag(ctx); err == nil {
				again.Lag, out.Lag = lag, lag
			}
			again.Replicas = replicasOfMain(ctx, d, want, rows)
			plan = planner.Plan(want, again)
			rep = planner.Execute(plan.Commands, run)
			for _, a := range rep.Executed {
				out.Executed = append(out.Executed, a.Cypher)
			}
		}
		if err := ctx.Err(); err != nil {
			return out, err
		}
	}
	if len(out.Executed) > 0 {
		// Re-read so status and the shrink decision rest on what the leader holds now.
		if rows, err := ldr.sess.ShowInstances(ctx); err == nil {
			out.Instances = rows
		}
	}
	if m, ok := memgraph.MainOf(out.Instances); ok {
		out.Main = m.Name
	}
	out.RetiredCoordinators, out.RetiredData = retired(want, out.Instances)
	stillRetiring := retiringMembers(want, out.Instances)

	switch {
	case rep.Err != nil && memgraph.IsUnreachable(rep.Err):
		return unreachableLeader(ctx, out, rep.Err)
	case rep.Err != nil:
		out.Reason = ReasonCommandRefused
		var e *memgraph.Error
		if errors.As(rep.Err, &e) {
			out.Refusal = e
		} else {
			out.Refusal = &memgraph.Error{Kind: memgraph.KindProtocol, Err: rep.Err}
		}
		out.Message = fmt.Sprintf("Memgraph refused %s: %s", rep.Failed, refusalText(out.Refusal))
		switch out.Refusal.Refusal() {
		case memgraph.RefusalMainExists:
			// SHOW INSTANCES shows a down MAIN as "unknown"; the leader still records it
			// and is failing over. Nothing to fix on our side.
			out.Reason = ReasonRegistrationInProgress
			out.Message = "the coordinators still record a MAIN that does not answer; waiting for their failover"
		case memgraph.RefusalNotLeader, memgraph.RefusalNoLeader:
			// Leadership moved or was lost during the pass: the next pass looks again.
			out.Reason = ReasonNoCoordinatorLeader
			out.Message = fmt.Sprintf("%s stopped leading during the pass", ldr.name)
		}
	case rep.Yielded:
		out.Reason = ReasonLeadershipTransferInProgress
		out.Message = fmt.Sprintf("leader %s yielded leadership (retiring or draining); the next pass continues under its successor", ldr.name)
	case rep.FellBack:
		out.Reason = ReasonRetirementInProgress
		out.Message = fmt.Sprintf("every caught-up replica refused to become MAIN; %s was restored as MAIN and stays until a handover succeeds", out.Main)
	case len(stillRetiring) > 0:
		out.Reason = ReasonRetirementInProgress
		out.Message = "retiring " + strings.Join(stillRetiring, ", ")
		if len(plan.Waiting) > 0 {
			out.Message += "; " + strings.Join(plan.Waiting, "; ")
		}
	case len(out.Executed) > 0 || !plan.Converged():
		out.Reason = ReasonRegistrationInProgress
		out.Message = strings.Join(plan.Waiting, "; ")
		if out.Message == "" {
			out.Message = "registration commands ran; the next pass confirms"
		}
	default:
		if down := downMembers(want, out.Instances); len(down) > 0 {
			// Registered as declared, but not all serving: a restart, a failover, a
			// follower cut off from the leader. Nothing to run; a roll must not go on.
			out.Reason = ReasonMembersDown
			out.Message = strings.Join(down, ", ") + " down in the leader's view"
			break
		}
		out.Converged = true
	}
	return out, nil
}

// replicasOfMain is the MAIN's SHOW REPLICAS (the registered modes), nil when there is
// no up MAIN or it does not answer.
func replicasOfMain(ctx context.Context, d memgraph.Dialer, want Desired, rows []memgraph.Instance) []memgraph.Replica {
	m, ok := memgraph.MainOf(rows)
	addr := DialAddress(want, m)
	if !ok || !m.Up() || addr == "" {
		return nil
	}
	sess, err := d.Dial(ctx, addr)
	if err != nil {
		return nil
	}
	defer func() { _ = sess.Close(context.WithoutCancel(ctx)) }()
	reps, err := sess.Replicas(ctx)
	if err != nil {
		return nil
	}
	if reps == nil {
		reps = []memgraph.Replica{}
	}
	return reps
}

// DialAddress is where the operator reaches a member the leader lists: its declared
// BoltServer (the pod's DNS name), not the bolt_server it is registered with, which may be
// an address for clients outside Kubernetes (a load balancer the operator need not reach,
// or whose name a TLS certificate does not hold); a member not declared is dialled at its
// registered address.
func DialAddress(want Desired, row memgraph.Instance) string {
	if row.IsCoordinator() {
		if id, ok := memgraph.CoordinatorID(row.Name); ok {
			for _, c := range want.Coordinators {
				if c.ID == id {
					return c.BoltServer
				}
			}
		}
		return row.BoltServer
	}
	for _, d := range want.Data {
		if d.Name == row.Name && d.BoltServer != "" {
			return d.BoltServer
		}
	}
	return row.BoltServer
}

// downMembers names the declared members, retiring ones aside, that the leader's
// SHOW INSTANCES shows registered but not up. Pure.
func downMembers(want Desired, rows []memgraph.Instance) []string {
	coords, data := map[int]bool{}, map[string]bool{}
	for _, c := range want.Coordinators {
		coords[c.ID] = !slices.Contains(want.RetiringCoordinators, c.ID)
	}
	for _, d := range want.Data {
		data[d.Name] = !slices.Contains(want.RetiringData, d.Name)
	}
	var out []string
	for _, r := range rows {
		if r.Up() {
			continue
		}
		if id, ok := memgraph.CoordinatorID(r.Name); ok && r.IsCoordinator() && coords[id] {
			out = append(out, r.Name)
		} else if !r.IsCoordinator() && data[r.Name] {
			out = append(out, r.Name)
		}
	}
	return out
}

// unansweredMessage is Outcome.Message for ReasonMembersUnreachable.
func unansweredMessage(unanswered []string) string {
	return fmt.Sprintf("the operator cannot reach %s, which the leader shows up; nothing is changed until they answer or the coordinators mark them down",
		strings.Join(unanswered, ", "))
}

func unreachableLeader(ctx context.Context, out Outcome, err error) (Outcome, error) {
	if cerr := ctx.Err(); cerr != nil {
		return out, cerr
	}
	out.Reason = ReasonCoordinatorUnreachable
	out.Message = fmt.Sprintf("lost the connection to leader %s during the pass", out.Leader)
	var e *memgraph.Error
	if errors.As(err, &e) {
		out.Refusal = e
	}
	return out, nil
}

func refusalText(e *memgraph.Error) string {
	if e.Message != "" {
		return e.Message
	}
	if e.Err != nil {
		return e.Err.Error()
	}
	return e.Kind.String()
}

func validate(want Desired) error {
	if len(want.Coordinators) == 0 {
		return errors.New("registration: no coordinators declared")
	}
	ids := map[int]bool{}
	for _, c := range want.Coordinators {
		if c.ID <= 0 || ids[c.ID] || c.BoltServer == "" {
			return fmt.Errorf("registration: coordinator %d: ids must be positive and unique, bolt server set", c.ID)
		}
		ids[c.ID] = true
	}
	names := map[string]bool{}
	for _, d := range want.Data {
		if d.Name == "" || names[d.Name] {
			return fmt.Errorf("registration: data instance %q: names must be set and unique", d.Name)
		}
		names[d.Name] = true
	}
	return nil
}

// retired lists the retiring members absent from the membership.
func retired(want Desired, rows []memgraph.Instance) ([]int, []string) {
	coords, data := membership(rows)
	var rc []int
	for _, id := range want.RetiringCoordinators {
		if !coords[id] {
			rc = append(rc, id)
		}
	}
	sort.Ints(rc)
	var rd []string
	for _, n := range want.RetiringData {
		if !data[n] {
			rd = append(rd, n)
		}
	}
	return slices.Compact(rc), rd
}

// retiringMembers names the retiring members still in the membership.
func retiringMembers(want Desired, rows []memgraph.Instance) []string {
	coords, data := membership(rows)
	var out []string
	ids := slices.Clone(want.RetiringCoordinators)
	slices.Sort(ids)
	for _, id := range slices.Compact(ids) {
		if coords[id] {
			out = append(out, memgraph.CoordinatorName(id))
		}
	}
	for _, n := range want.RetiringData {
		if data[n] {
			out = append(out, n)
		}
	}
	return out
}

func membership(rows []memgraph.Instance) (map[int]bool, map[string]bool) {
	coords, data := map[int]bool{}, map[string]bool{}
	for _, r := range rows {
		if r.IsCoordinator() {
			if id, ok := memgraph.CoordinatorID(r.Name); ok {
				coords[id] = true
			}
			continue
		}
		data[r.Name] = true
	}
	return coords, data
}
