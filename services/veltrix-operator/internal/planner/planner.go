// Package planner decides VeltrixDB's online membership changes for a VeltrixCluster's
// StatefulSet, one step per reconcile pass; it is pure (package executor carries the
// decision out against the admin API).
//
// The rules (Plan):
//   - Grow at once: when the StatefulSet has fewer replicas than wanted, Replicas is the
//     wanted size; new pods join by themselves (--join).
//   - Shrink one member at a time, highest ordinal first: DELETE its member, wait while it
//     is leaving (its data moving), and lower Replicas by one only once it is gone from the
//     member list. A removal starts only when no member is joining or leaving and every pod
//     is Ready (search-ready included), so data never moves off a member while another
//     copy is unavailable.
//   - Never below replicationFactor: the wanted size is max(spec.size, replicationFactor);
//     a smaller spec.size is reported as BelowReplicationFactor.
//   - Members unreachable (serving pods whose admin API did not answer the operator,
//     Input.Unreachable): hold; Replicas stays, nothing is removed or added back, even
//     with the member list read from another member. The pods are Ready, so the members
//     may well serve and only the operator's view is incomplete (a partition between the
//     operator and the data plane): it changes nothing it cannot see. A member that is
//     down (its pod not Ready) is no such hold: removals wait for every pod to be Ready,
//     and a lost node's member is PlanLost's.
//   - Members unknown (no ready pod answered): hold; Replicas stays, nothing is removed
//     (growing still happens, as it needs no membership).
//   - A member whose pod no longer exists (ordinal >= the StatefulSet's replicas, e.g. a pod
//     that re-joined while it was being deleted) is removed the same way.
//   - A pod the cluster keeps whose member is missing while every pod is Ready (its member
//     was removed, then spec.size was raised again before its pod went) is added back
//     with POST /admin/cluster/members, when the caller gives Input.MemberAddr.
//   - A member leaving for longer than StuckAfter, measured on the caller's clock from the
//     removal record (Input.Now - Input.Removal.Since), is RemovalStuck; it is not retried
//     or abandoned. The record is the planner's own output (Decision.Removal): the caller
//     stores it (in the cluster's status, so it outlives the operator process) and passes it
//     back, so the limit does not restart with the operator.
//
// When several apply, the first of these wins: grow; members unreachable; members unknown; a member leaving;
// a member whose pod is gone; a member to add back; shrink; members yet to join;
// BelowReplicationFactor; converged. One pass changes one thing.
//
// The executor's Step runs one pass against the admin API: it reads the members, plans,
// and sends at most one DELETE or POST; a DELETE the server declines is RemovalRefused, and
// Replicas is not lowered. Once the server accepts a DELETE, RemovalAccepted says what the
// pass decided.
//
// Waiting messages are stable while the state they describe lasts (they name members,
// sizes and StuckAfter, never errors or clock times), so they can be condition messages.
package planner

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	veltrixv1 "github.com/opsuite/suite/api/veltrix/v1alpha1"
	"github.com/opsuite/suite/services/veltrix-operator/internal/veltrix"
)

// Condition reasons a Decision carries.
const (
	// ReasonScaling: the StatefulSet grows, or members have yet to join.
	ReasonScaling = "Scaling"
	// ReasonRemoving: a member is being removed (or about to be), or the StatefulSet is being
	// lowered after one left.
	ReasonRemoving = "Removing"
	// ReasonRemovalRefused: the server declined the DELETE of a member; the StatefulSet is
	// not shrunk.
	ReasonRemovalRefused = "RemovalRefused"
	// ReasonRemovalStuck: a member has been leaving for longer than StuckAfter.
	ReasonRemovalStuck = "RemovalStuck"
	// ReasonBelowReplicationFactor: spec.size is below replicationFactor; the cluster keeps
	// replicationFactor members.
	ReasonBelowReplicationFactor = "BelowReplicationFactor"
	// ReasonMembersUnknown: no ready pod answered with the member list; nothing is removed.
	ReasonMembersUnknown = "MembersUnknown"
	// ReasonMembersUnreachable: serving pods did not answer the operator; nothing is
	// removed or added until they do.
	ReasonMembersUnreachable = veltrixv1.ReasonMembersUnreachable
)

// DefaultStuckAfter is StuckAfter when Input leaves it zero: data moves at a bounded rate,
// so a removal still leaving after this long needs a person to look.
const DefaultStuckAfter = 15 * time.Minute

// Input is what one pass observed.
type Input struct {
	// SpecSize and ReplicationFactor are the VeltrixCluster's spec.
	SpecSize, ReplicationFactor int32
	// StatefulSetReplicas is the StatefulSet's live .spec.replicas (0 when it does not
	// exist yet).
	StatefulSetReplicas int32
	// ReadyPods counts the StatefulSet's pods that are Ready (readiness gate included).
	ReadyPods int32
	// Members is GET /admin/cluster/members from a ready pod; nil when unknown. The
	// executor's Step fills it itself.
	Members []veltrix.Member
	// PodName names the pod (and member id) of an ordinal: "<cluster>-<ordinal>". Required.
	PodName func(ordinal int32) string

	// MemberAddr is the text-protocol address an ordinal's member advertises
	// (<pod>.<cluster>-headless.<ns>.svc.cluster.local:<serverPort>); nil never adds members
	// back (see Decision.Add).
	MemberAddr func(ordinal int32) string

	// Admins are the admin HTTP addresses (host:metricsPort) of the serving pods (Ready
	// and search-ready), lowest ordinal first; the executor's Step asks them all at once
	// for the members, takes the first in this order that answered and sends its DELETE
	// there. Plan ignores them.
	Admins []Endpoint
	// Unreachable are the serving pods (by name, the member id) whose admin API did not
	// answer the operator this pass, each with a short cause (veltrix.Cause); the
	// executor's Step fills it. Plan holds while there are any.
	Unreachable map[string]string

	// Removal is the last pass's Decision.Removal as the caller stored it (zero: none).
	Removal Removal
	// Now is the caller's clock.
	Now time.Time
	// StuckAfter is how long a member may be leaving before RemovalStuck; zero means
	// DefaultStuckAfter.
	StuckAfter time.Duration
}

// Endpoint is a serving pod's admin HTTP address.
type Endpoint struct {
	// Pod is the pod's name, which is its member's id.
	Pod string
	// Addr is host:metricsPort.
	Addr string
}

// Decision is what to do now.
type Decision struct {
	// Replicas is what the StatefulSet's replicas must be now: the wanted size at once when
	// growing; when shrinking, one less than now only after the highest member is gone.
	Replicas int32
	// Remove is the member id to DELETE now ("" = none). After the executor's Step, the
	// member a DELETE was sent for in this pass (Reason says whether the server accepted it).
	Remove string
	// Add is the member to POST now (zero = none): a pod the cluster keeps that runs, Ready,
	// without being a member.
	Add veltrix.Member
	// Leaving is the member whose removal is under way (state leaving), "" when none.
	Leaving string
	// Removal is the record the caller stores and passes back as Input.Removal: Leaving and
	// when its removal started (kept from Input.Removal while the same member leaves, Now
	// when another one does); zero when no member leaves; Input.Removal unchanged when the
	// members are unknown.
	Removal Removal
	// Waiting says why the cluster has not converged (stable), "" when converged.
	Waiting string
	// Reason is the condition reason (Reason* constants), "" when converged.
	Reason string
	// Detail is the server's own message for RemovalRefused, for an event or a log; it may
	// vary, so it does not belong in a condition message.
	Detail string
	// Unreachable are the pods the MembersUnreachable hold waits for, sorted; nil
	// otherwise.
	Unreachable []string
}

// Removal is a member removal under way as the caller recorded it.
type Removal struct {
	// Member is the leaving member's id.
	Member string
	// Since is when its removal started (the DELETE, or the first pass that saw it leaving).
	Since time.Time
}

// IsZero reports whether r records nothing.
func (r Removal) IsZero() bool { return r.Member == "" }

// removalRecord is the record to keep after a pass that decided d.
func removalRecord(in Input, d Decision) Removal {
	switch {
	case in.Members == nil:
		return in.Removal
	case d.Leaving == "":
		return Removal{}
	case in.Removal.Member == d.Leaving && !in.Removal.Since.IsZero():
		return in.Removal
	default:
		return Removal{Member: d.Leaving, Since: in.Now}
	}
}

// RemovalAccepted is d once the server accepted the DELETE of d.Remove in the pass that
// observed in: the member is leaving, its removal record starts now, and Waiting reads as
// the next pass's will, so the condition message does not change between them. A DELETE is
// planned only while no member leaves, so a record the caller still holds for the same
// member is an earlier removal's (it left, re-joined while its pod was deleted, and is
// removed again, all between two passes that saw the members): keeping its start would
// report the new removal stuck at once.
func RemovalAccepted(in Input, d Decision) Decision {
	d.Leaving = d.Remove
	d.Removal = Removal{Member: d.Remove, Since: in.Now}
	d.Waiting = leavingMessage(d.Remove)
	return d
}

// Converged reports whether nothing is left to do.
func (d Decision) Converged() bool { return d.Waiting == "" }

// Plan decides one step from what a pass observed. It is pure and deterministic.
func Plan(in Input) Decision {
	d := plan(in)
	d.Removal = removalRecord(in, d)
	return d
}

func plan(in Input) Decision {
	rf := max(in.ReplicationFactor, 1)
	wanted := max(in.SpecSize, rf)
	cur := in.StatefulSetReplicas

	if cur < wanted {
		d := Decision{Replicas: wanted, Reason: ReasonScaling, Waiting: fmt.Sprintf("scaling up to %d members", wanted)}
		if in.Members != nil {
			d.Leaving = leavingMember(in.Members)
		}
		return d
	}
	if len(in.Unreachable) > 0 {
		return unreachable(in, cur)
	}
	if in.Members == nil {
		return Decision{Replicas: cur, Reason: ReasonMembersUnknown,
			Waiting: "membership unknown: no ready pod answered GET /admin/cluster/members"}
	}

	v := newView(in, cur, wanted)
	if v.leaving != "" {
		return v.holdLeaving(in)
	}
	// A member above the StatefulSet (its pod is gone) goes first: it cannot serve.
	if len(v.orphans) > 0 {
		return v.startRemoval(in, v.orphans[0], "whose pod no longer exists")
	}
	if d, ok := v.addBack(in, min(cur, wanted)); ok {
		return d
	}
	if cur > wanted {
		victim := in.PodName(cur - 1)
		if _, present := v.state[victim]; !present {
			return Decision{Replicas: cur - 1, Reason: ReasonRemoving,
				Waiting: fmt.Sprintf("member %s left; lowering the StatefulSet to %d replicas", victim, cur-1)}
		}
		return v.startRemoval(in, victim, "to shrink to "+fmt.Sprint(wanted)+" members")
	}
	if n := v.notActive(); n > 0 {
		return Decision{Replicas: cur, Reason: ReasonScaling,
			Waiting: fmt.Sprintf("waiting for %d of %d members to join", n, cur)}
	}
	if in.SpecSize < rf {
		return Decision{Replicas: cur, Reason: ReasonBelowReplicationFactor,
			Waiting: fmt.Sprintf("spec.size %d is below replicationFactor %d; keeping %d members", in.SpecSize, rf, rf)}
	}
	return Decision{Replicas: cur}
}

// view indexes the member list for one plan.
type view struct {
	cur     int32
	state   map[string]veltrix.MemberState
	leaving string   // the first leaving member by id, "" when none
	joining int      // members joining
	orphans []string // members named after an ordinal >= cur, highest ordinal first
	want    []string // pod names of ordinals [0, cur)
}

func newView(in Input, cur, wanted int32) view {
	v := view{cur: cur, state: make(map[string]veltrix.MemberState, len(in.Members))}
	for _, m := range in.Members {
		v.state[m.ID] = m.State
		if m.State == veltrix.MemberJoining {
			v.joining++
		}
	}
	v.leaving = leavingMember(in.Members)
	v.want = make([]string, cur)
	for i := range cur {
		v.want[i] = in.PodName(i)
	}
	// Orphans are found by name: ordinals from cur up to as many as there could be members
	// beyond the StatefulSet. Ids naming no ordinal (added by hand) are left alone.
	for i := max(cur, wanted) + int32(len(in.Members)) - 1; i >= cur; i-- {
		if name := in.PodName(i); v.has(name) {
			v.orphans = append(v.orphans, name)
		}
	}
	return v
}

func (v view) has(id string) bool { _, ok := v.state[id]; return ok }

// notActive counts the pods of the StatefulSet that are not active members.
func (v view) notActive() int {
	n := 0
	for _, name := range v.want {
		if v.state[name] != veltrix.MemberActive {
			n++
		}
	}
	return n
}

// addBack adds the lowest missing member among ordinals [0, keep) once nothing else is
// changing and every pod is Ready: a Ready pod that is no member will not join by itself.
func (v view) addBack(in Input, keep int32) (Decision, bool) {
	if in.MemberAddr == nil || v.joining > 0 || in.ReadyPods < v.cur {
		return Decision{}, false
	}
	for i := range keep {
		if id := v.want[i]; !v.has(id) {
			return Decision{Replicas: v.cur, Add: veltrix.Member{ID: id, Addr: in.MemberAddr(i)}, Reason: ReasonScaling,
				Waiting: fmt.Sprintf("adding member %s back: its pod runs but it is no member", id)}, true
		}
	}
	return Decision{}, false
}

func (v view) holdLeaving(in Input) Decision {
	d := Decision{Replicas: v.cur, Leaving: v.leaving, Reason: ReasonRemoving,
		Waiting: leavingMessage(v.leaving)}
	stuckAfter := cmp.Or(in.StuckAfter, DefaultStuckAfter)
	since := in.Removal.Since
	if in.Removal.Member == v.leaving && !since.IsZero() && !in.Now.IsZero() && in.Now.Sub(since) > stuckAfter {
		d.Reason = ReasonRemovalStuck
		d.Waiting = fmt.Sprintf("member %s has been leaving for more than %s; its data has not finished moving", v.leaving, stuckAfter)
	}
	return d
}

// startRemoval removes id once nothing else is changing and every pod is Ready.
func (v view) startRemoval(in Input, id, why string) Decision {
	d := Decision{Replicas: v.cur, Reason: ReasonRemoving}
	switch {
	case v.joining > 0:
		d.Waiting = fmt.Sprintf("waiting for %d joining members before removing member %s", v.joining, id)
	case in.ReadyPods < v.cur:
		d.Waiting = fmt.Sprintf("waiting for all %d pods to be ready before removing member %s", v.cur, id)
	default:
		d.Remove = id
		d.Waiting = fmt.Sprintf("removing member %s %s", id, why)
	}
	return d
}

// unreachable holds everything while serving pods do not answer the operator: the
// message names each with its cause (stable words, veltrix.Cause) and the removal record
// is kept while the member list shows its member leaving.
func unreachable(in Input, cur int32) Decision {
	pods := slices.Sorted(maps.Keys(in.Unreachable))
	named := make([]string, len(pods))
	for i, p := range pods {
		named[i] = fmt.Sprintf("%s (%s)", p, in.Unreachable[p])
	}
	d := Decision{Replicas: cur, Reason: ReasonMembersUnreachable, Unreachable: pods,
		Waiting: fmt.Sprintf("the operator cannot reach %d serving member(s): %s; it changes no membership until they answer",
			len(pods), strings.Join(named, ", "))}
	if in.Members != nil {
		d.Leaving = leavingMember(in.Members)
	}
	return d
}

// leavingMessage is the same whether the DELETE was just sent or seen in an earlier pass,
// so the condition message does not flap.
func leavingMessage(id string) string {
	return fmt.Sprintf("member %s is leaving; waiting until its data has moved", id)
}

func leavingMember(members []veltrix.Member) string {
	var ids []string
	for _, m := range members {
		if m.State == veltrix.MemberLeaving {
			ids = append(ids, m.ID)
		}
	}
	if len(ids) == 0 {
		return ""
	}
	return slices.Min(ids)
}
