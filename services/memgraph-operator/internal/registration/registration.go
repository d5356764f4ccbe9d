// Package registration runs one registration pass against a Memgraph HA cluster: it
// finds the Raft leader, plans with package planner and executes the plan there.
// M-CTRL's controller calls Reconcile once per reconcile and turns the Outcome into
// status, conditions, events and the StatefulSet shrink.
//
// Leader discovery asks every declared coordinator (retiring ones included, concurrently)
// for SHOW INSTANCES and skips those naming no leader (quorum lost, stepped down,
// removed: their state may be arbitrarily stale). Of the rest, the leader named by the
// most coordinators wins, ties to the first in id order; the commands then go to that
// leader, whose own answer must name itself. A coordinator whose view holds nothing but
// itself is fresh (a new pod, or one whose storage was wiped): it calls itself leader of
// a one-member cluster, so its vote does not count, and the cluster is bootstrapped on
// the lowest id only when every declared coordinator answered and all are fresh. Asking
// only the first coordinator that names a leader, as the product document did, would
// bootstrap a second cluster on a wiped coordinator_1 while the real one still runs.
//
// A pass stops at the first refusal or transport error (the next pass re-observes), and
// after YIELD LEADERSHIP or a fallback promotion. Errors are returned only for a
// malformed Desired or a cancelled context; everything the cluster does is in Outcome.
package registration

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	mgv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/services/memgraph-operator/internal/memgraph"
	"github.com/opsuite/suite/services/memgraph-operator/internal/planner"
)

// Desired is the declared topology (see planner.Desired).
type Desired = planner.Desired

// Outcome reasons: the api's condition reasons, plus two of registration's own.
const (
	ReasonRetirementInProgress         = mgv1.ReasonRetirementInProgress
	ReasonLeadershipTransferInProgress = mgv1.ReasonLeadershipTransferInProgress
	ReasonNoCoordinatorLeader          = mgv1.ReasonNoCoordinatorLeader
	ReasonCoordinatorUnreachable       = mgv1.ReasonCoordinatorUnreachable
	// ReasonRegistrationInProgress: commands ran this pass, or the plan waits (no MAIN
	// candidate up); the next pass confirms.
	ReasonRegistrationInProgress = "RegistrationInProgress"
	// ReasonCommandRefused: Memgraph refused a command; Refusal has its message.
	ReasonCommandRefused = "CommandRefused"
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
}

// Reconcile runs one registration pass.
func Reconcile(ctx context.Context, d memgraph.Dialer, want Desired) (Outcome, error) {
	if err := validate(want); err != nil {
		return Outcome{}, err
	}
	var out Outcome
	ldr, found := discover(ctx, d, want)
	defer found.close(ctx)
	if err := ctx.Err(); err != nil {
		return out, err
	}
	if ldr == nil {
		out.Reason, out.Message = found.reason, found.message
		return out, nil
	}
	out.Leader = ldr.name
	out.Instances = ldr.rows
	seen := planner.Observed{Leader: ldr.name, Instances: ldr.rows}
	if planner.NeedsLag(want, ldr.rows) {
		lag, err := ldr.sess.ReplicationLag(ctx)
		switch {
		case err == nil:
			seen.Lag = lag
		case memgraph.IsUnreachable(err):
			return unreachableLeader(ctx, out, err)
		}
		// Refused: without lag the planner moves no MAIN (it waits), which is safe.
	}
	plan := planner.Plan(want, seen)
	rep := planner.Execute(plan.Commands, func(_ planner.Command, a planner.Attempt) error {
		return ldr.sess.Exec(ctx, a.Cypher)
	})
	for _, a := range rep.Executed {
		out.Executed = append(out.Executed, a.Cypher)
	}
	if err := ctx.Err(); err != nil {
		return out, err
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
		if out.Refusal.Refusal() == memgraph.RefusalMainExists {
			// SHOW INSTANCES shows a down MAIN as "unknown"; the leader still records it
			// and is failing over. Nothing to fix on our side.
			out.Reason = ReasonRegistrationInProgress
			out.Message = "the coordinators still record a MAIN that does not answer; waiting for their failover"
		}
	case rep.Yielded:
		out.Reason = ReasonLeadershipTransferInProgress
		out.Message = fmt.Sprintf("leader %s is retiring and yielded leadership; the next pass continues under its successor", ldr.name)
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
		out.Converged = true
	}
	return out, nil
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

// coordView is one coordinator's answer.
type coordView struct {
	c    planner.Coordinator
	sess memgraph.Session
	rows []memgraph.Instance
	err  error
}

// fresh: the coordinator knows nothing but itself (a new or wiped pod).
func (v *coordView) fresh() bool {
	for _, r := range v.rows {
		if !r.IsCoordinator() || r.Name != v.c.Name {
			return false
		}
	}
	return true
}

type leaderConn struct {
	name string
	sess memgraph.Session
	rows []memgraph.Instance
}

type discovery struct {
	views           []*coordView
	extra           memgraph.Session // a leader outside the declared set
	reason, message string
}

func (f *discovery) close(ctx context.Context) {
	ctx = context.WithoutCancel(ctx)
	for _, v := range f.views {
		if v.sess != nil {
			_ = v.sess.Close(ctx)
		}
	}
	if f.extra != nil {
		_ = f.extra.Close(ctx)
	}
}

// discover finds the leader; nil with a reason when there is none to act on.
func discover(ctx context.Context, d memgraph.Dialer, want Desired) (*leaderConn, *discovery) {
	coords := slices.Clone(want.Coordinators)
	slices.SortStableFunc(coords, func(a, b planner.Coordinator) int { return a.ID - b.ID })
	f := &discovery{views: make([]*coordView, len(coords))}
	var wg sync.WaitGroup
	for i, c := range coords {
		if c.Name == "" {
			c.Name = memgraph.CoordinatorName(c.ID)
		}
		v := &coordView{c: c}
		f.views[i] = v
		wg.Add(1)
		go func() {
			defer wg.Done()
			v.sess, v.err = d.Dial(ctx, c.BoltServer)
			if v.err != nil {
				return
			}
			v.rows, v.err = v.sess.ShowInstances(ctx)
		}()
	}
	wg.Wait()

	var answered, unreachable, freshCount int
	votes := map[string]int{}
	firstVote := map[string]int{}
	leaderRow := map[string]memgraph.Instance{}
	for i, v := range f.views {
		if v.err != nil {
			unreachable++
			continue
		}
		answered++
		if v.fresh() {
			freshCount++
			continue
		}
		l, ok := memgraph.LeaderOf(v.rows)
		if !ok {
			continue // names no leader: its view may be stale
		}
		if _, seen := votes[l.Name]; !seen {
			firstVote[l.Name] = i
			leaderRow[l.Name] = l
		}
		votes[l.Name]++
	}

	if len(votes) == 0 {
		switch {
		case answered == 0:
			f.reason = ReasonCoordinatorUnreachable
			f.message = fmt.Sprintf("none of the %d coordinators answered", len(f.views))
		case freshCount == answered && unreachable == 0:
			// Bootstrap: all fresh; the lowest id naming itself leader of its own
			// one-member cluster forms the cluster.
			for _, v := range f.views {
				if l, ok := memgraph.LeaderOf(v.rows); ok && l.Name == v.c.Name {
					return &leaderConn{name: v.c.Name, sess: v.sess, rows: v.rows}, f
				}
			}
			f.reason = ReasonNoCoordinatorLeader
			f.message = fmt.Sprintf("none of the %d new coordinators leads yet", len(f.views))
		case freshCount == answered:
			f.reason = ReasonCoordinatorUnreachable
			f.message = fmt.Sprintf("%d of %d coordinators did not answer; a new cluster is formed only when all answer", unreachable, len(f.views))
		default:
			f.reason = ReasonNoCoordinatorLeader
			f.message = fmt.Sprintf("no coordinator names a leader (%d of %d answered)", answered, len(f.views))
		}
		return nil, f
	}

	names := make([]string, 0, len(votes))
	for n := range votes {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		if votes[names[i]] != votes[names[j]] {
			return votes[names[i]] > votes[names[j]]
		}
		return firstVote[names[i]] < firstVote[names[j]]
	})
	leader := names[0]
	for _, v := range f.views {
		if v.c.Name != leader {
			continue
		}
		if v.err != nil {
			f.reason = ReasonCoordinatorUnreachable
			f.message = fmt.Sprintf("leader %s does not answer", leader)
			return nil, f
		}
		if l, ok := memgraph.LeaderOf(v.rows); !ok || l.Name != leader {
			f.reason = ReasonNoCoordinatorLeader
			f.message = fmt.Sprintf("coordinators name %s leader but it does not (%d votes)", leader, votes[leader])
			return nil, f
		}
		return &leaderConn{name: leader, sess: v.sess, rows: v.rows}, f
	}
	// A leader outside the declared set (e.g. an id a human added): reach it by the
	// address it was registered with.
	addr := leaderRow[leader].BoltServer
	if addr == "" {
		f.reason = ReasonNoCoordinatorLeader
		f.message = fmt.Sprintf("leader %s is not declared and shows no bolt server", leader)
		return nil, f
	}
	sess, err := d.Dial(ctx, addr)
	if err != nil {
		f.reason = ReasonCoordinatorUnreachable
		f.message = fmt.Sprintf("leader %s does not answer", leader)
		return nil, f
	}
	f.extra = sess
	rows, err := sess.ShowInstances(ctx)
	if l, ok := memgraph.LeaderOf(rows); err != nil || !ok || l.Name != leader {
		f.reason = ReasonNoCoordinatorLeader
		f.message = fmt.Sprintf("coordinators name %s leader but it does not", leader)
		return nil, f
	}
	return &leaderConn{name: leader, sess: sess, rows: rows}, f
}
