package planner

import (
	"fmt"
	"slices"
	"strings"
	"time"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/services/memgraph-operator/internal/memgraph"
	"github.com/opsuite/suite/shared/lostnodes"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Lost members. On local volumes pinned to one node, a member whose node is lost can
// never start anywhere else: its StatefulSet's next pod waits for that node for ever. It
// is replaced: taken out of the HA membership, its claims and pod deleted (the pod with
// grace 0: a lost node's kubelet never confirms), so that the StatefulSet makes it anew
// and its claims bind volumes on another node; there it starts empty and the
// registration adds it again (ADD COORDINATOR, or REGISTER INSTANCE as a replica, which
// receives its data from the MAIN). PlanLost decides, purely, from the nodes, the
// members' volumes, status.lostNodes and the Raft leader's SHOW INSTANCES. The rules:
//   - A deleted node is lost at once; a NotReady one once it has been NotReady for the
//     grace period, or at once when the annotation memgraph.com/replace-member names the
//     member. A lost node whose member was not touched yet and that is Ready again is
//     forgotten: the member comes back by itself.
//   - Nothing is lost by a replacement, and it is refused (or waits, when that clears by
//     itself) otherwise. The member must not answer the coordinators' health checks (a
//     NotReady node whose processes run on: refused; a deleted node's: waits). A data
//     instance is replaced only while another instance is up as MAIN: it is never the
//     MAIN (the coordinators fail it over first; with no replica up to take over, it may
//     hold the only copy, so it is refused). A coordinator is replaced only while the
//     others keep a quorum of the membership without it, and never while it leads; one
//     coordinator leaves the Raft membership per pass, so that each removal is judged on
//     the membership the previous one left. Without a leader nothing is replaced.
//   - Nothing starts while members the leader shows up do not answer the operator
//     (Unanswered, as rule 0 of Plan): what it sees of the cluster is incomplete.
//   - With Automatic the replacement starts once safe; with Manual once the annotation
//     names the member's pod.
//   - A replacement is Replaced once the member serves again in the leader's view from
//     volumes that are not on the lost node (or the node is back). Its entry goes once the
//     node is back.
//
// Never two MAINs: nothing here promotes; UNREGISTER INSTANCE is sent only for a member
// the leader does not show as MAIN while another is, and the new instance is registered
// as a replica by the registration, which sets a MAIN only when there is none.

// PinnedMember is a member pod and the node its volumes are pinned to.
type PinnedMember struct {
	// Pod is the member's pod name.
	Pod string
	// Instance is its name in SHOW INSTANCES (coordinator_<id>, or the data instance's).
	Instance string
	// ID is a coordinator's id; 0 for a data instance.
	ID int
	// Node is the node the volumes of its bound claims are pinned to; "" when none is.
	Node string
}

// IsCoordinator says whether the member is a coordinator.
func (m PinnedMember) IsCoordinator() bool { return m.ID > 0 }

// LostInput is what a pass observed for PlanLost.
type LostInput struct {
	Now         time.Time
	Automatic   bool
	GracePeriod time.Duration
	// Members are the member pods of both StatefulSets (every live ordinal).
	Members []PinnedMember
	// Nodes are the nodes that exist; a node not in it is deleted.
	Nodes lostnodes.Nodes
	// Lost is status.lostNodes as last stored.
	Lost []memgraphv1.LostNode
	// Reported: the cluster has a MemberLost condition (it then says when none is lost).
	Reported bool
	// ReplaceRequested is the annotation memgraph.com/replace-member ("" when absent).
	ReplaceRequested string
	// Leader is the Raft leader and Instances its SHOW INSTANCES; Leader is "" when no
	// leader answered (or it was not asked), and nothing is then replaced.
	Leader    string
	Instances []memgraph.Instance
	// Unanswered are the members the leader shows up that did not answer the operator
	// (planner.Unanswered, with their causes); while any is, no replacement starts.
	Unanswered []string
}

// LostState is how far a lost member's replacement got, worst last: the MemberLost
// condition reports the worst present.
type LostState int

// Lost states.
const (
	LostReplaced LostState = iota
	LostReplacing
	LostWaitingGrace
	LostManual
	LostRefused
)

// LostNote is what the condition says about one member.
type LostNote struct {
	Member  string
	State   LostState
	Message string
}

// LostStart is a replacement that starts now: run Remove on the leader (nil when the
// member is not in the membership), then mark its entry Replacing and delete its claims
// on the lost node and its pod.
type LostStart struct {
	Entry  memgraphv1.LostNode
	Remove *Command
}

// LostDecision is what to do about lost members now.
type LostDecision struct {
	// Lost is the status.lostNodes to store; Start's entries are not Replacing yet (the
	// caller marks them once their removal ran: MarkReplacing).
	Lost []memgraphv1.LostNode
	// Start are the replacements that start now.
	Start []LostStart
	// Release are the replacements under way: delete the member's claims on the lost
	// node, and its pod while they are there (idempotent).
	Release []memgraphv1.LostNode
	// Notes say, per member concerned, what the condition reports.
	Notes []LostNote
	// ClearReplace: the annotation was acted on, or names no lost member, and is removed.
	ClearReplace bool
	// Recheck is how soon a node within its grace period counts as lost (0: none).
	Recheck time.Duration
	// reported is LostInput.Reported.
	reported bool
}

// NeedsView says whether PlanLost needs the leader's view for in: some member is on a
// lost node, or a replacement is under way. Without that, the data plane is not asked.
func NeedsView(in LostInput) bool {
	for _, r := range in.Lost {
		if r.Replacement != memgraphv1.ReplacementReplaced {
			return true
		}
	}
	for _, m := range in.Members {
		if m.Node == "" {
			continue
		}
		if lost, _ := in.Nodes.Of(m.Node).Lost(in.Now, in.GracePeriod); lost || in.ReplaceRequested == m.Pod {
			return true
		}
	}
	return false
}

// PlanLost decides one pass. It is pure and deterministic.
func PlanLost(in LostInput) LostDecision {
	d := LostDecision{reported: in.Reported}
	members := map[string]PinnedMember{}
	for _, m := range in.Members {
		members[m.Pod] = m
	}
	view := map[string]memgraph.Instance{}
	for _, r := range in.Instances {
		view[r.Name] = r
	}
	serves := func(m PinnedMember) bool {
		r, ok := view[m.Instance]
		if in.Leader == "" || !ok || !r.Up() {
			return false
		}
		if m.IsCoordinator() {
			return r.BoltServer != ""
		}
		return r.Role == memgraph.RoleMain || r.Role == memgraph.RoleReplica
	}

	// Follow the entries: forget what came back or went, mark what serves again.
	var records []memgraphv1.LostNode
	for _, r := range in.Lost {
		m, ok := members[r.Member]
		back := in.Nodes.Of(r.Node).Health == lostnodes.Ready
		switch {
		case !ok:
			continue // scaled away: nothing to replace
		case back && r.Replacement != memgraphv1.ReplacementReplacing:
			continue // back before it was touched, or back after its replacement
		case r.Replacement == "" && m.Node != r.Node:
			continue // its volumes are no longer there (claims deleted by hand)
		case r.Replacement == memgraphv1.ReplacementReplacing && (m.Node != r.Node || back) && serves(m):
			r.Replacement = memgraphv1.ReplacementReplaced
		}
		records = append(records, r)
	}
	has := func(pod, node string) bool {
		return slices.ContainsFunc(records, func(r memgraphv1.LostNode) bool { return r.Member == pod && r.Node == node })
	}

	// Newly lost members, and members whose node is within its grace period.
	for _, m := range in.Members {
		if m.Node == "" || has(m.Pod, m.Node) {
			continue
		}
		s := in.Nodes.Of(m.Node)
		lost, left := s.Lost(in.Now, in.GracePeriod)
		if !lost && s.Health == lostnodes.NotReady && in.ReplaceRequested == m.Pod {
			lost = true
		}
		if !lost {
			if s.Health == lostnodes.NotReady {
				d.Recheck = minPositive(d.Recheck, left)
				d.note(m.Pod, LostWaitingGrace, fmt.Sprintf("node %s of member %s is NotReady; it counts as lost after spec.lostNodes.gracePeriod (%s)",
					m.Node, m.Pod, in.GracePeriod))
			}
			continue
		}
		reason := memgraphv1.LostNodeNotReady
		if s.Health == lostnodes.Deleted {
			reason = memgraphv1.LostNodeDeleted
		}
		records = append(records, memgraphv1.LostNode{Member: m.Pod, Node: m.Node, Reason: reason, Since: metav1.NewTime(in.Now.Truncate(time.Second))})
	}
	slices.SortFunc(records, func(a, b memgraphv1.LostNode) int {
		return strings.Compare(a.Member+"\x00"+a.Node, b.Member+"\x00"+b.Node)
	})

	// Decide each entry.
	coordinatorRemoved := false
	for _, r := range records {
		m := members[r.Member]
		switch r.Replacement {
		case memgraphv1.ReplacementReplaced:
			d.note(r.Member, LostReplaced, fmt.Sprintf("member %s of lost node %s serves again on another node", r.Member, r.Node))
			continue
		case memgraphv1.ReplacementReplacing:
			if in.Nodes.Of(r.Node).Health != lostnodes.Ready {
				// Once the node is back its volumes may hold the new claims: left alone.
				d.Release = append(d.Release, r)
			}
			d.note(r.Member, LostReplacing, replacingMessage(r))
			continue
		}
		why, wait, remove := judge(in, m, r, view, coordinatorRemoved)
		switch {
		case why != "" && !wait:
			d.note(r.Member, LostRefused, fmt.Sprintf("member %s of lost node %s (%s) is not replaced: %s", r.Member, r.Node, r.Reason, why))
		case !in.Automatic && in.ReplaceRequested != r.Member:
			d.note(r.Member, LostManual, fmt.Sprintf("member %s is lost with node %s (%s): set the annotation %s=%s on the cluster to replace it on another node, or spec.lostNodes.replace to Automatic",
				r.Member, r.Node, r.Reason, memgraphv1.AnnotationReplaceMember, r.Member))
		case why != "":
			d.note(r.Member, LostReplacing, fmt.Sprintf("member %s of lost node %s (%s) is replaced once %s", r.Member, r.Node, r.Reason, why))
		default:
			d.Start = append(d.Start, LostStart{Entry: r, Remove: remove})
			d.note(r.Member, LostReplacing, replacingMessage(r))
			coordinatorRemoved = coordinatorRemoved || (m.IsCoordinator() && remove != nil)
		}
	}

	if p := in.ReplaceRequested; p != "" {
		// Kept only while it names a lost member that has yet to start: a name left there
		// must never approve a later loss nobody looked at.
		waiting := slices.ContainsFunc(records, func(r memgraphv1.LostNode) bool {
			return r.Member == p && r.Replacement == "" && !slices.ContainsFunc(d.Start, func(s LostStart) bool { return s.Entry.Member == p })
		})
		d.ClearReplace = !waiting
	}
	d.Lost = records
	return d
}

// judge says why r's member may not be replaced now ("" when it may; wait when that
// clears by itself), and the membership removal to run first (nil when it is not a
// member).
func judge(in LostInput, m PinnedMember, r memgraphv1.LostNode, view map[string]memgraph.Instance, coordinatorRemoved bool) (why string, wait bool, remove *Command) {
	if in.Leader == "" {
		return "no coordinator leader answers, so the membership cannot be changed; it is replaced once one does (a quorum lost with the node needs a node back)", false, nil
	}
	row, registered := view[m.Instance]
	if registered && row.Up() || m.Instance == in.Leader {
		if r.Reason == memgraphv1.LostNodeDeleted {
			return "its process stops answering the coordinators' health checks", true, nil
		}
		return "its process still answers the coordinators' health checks (the node's kubelet is lost, not the member): it is replaced once it stops answering; bring the node back or stop the process", false, nil
	}
	if len(in.Unanswered) > 0 {
		return fmt.Sprintf("the operator reaches %s again, which the leader shows up (nothing is changed while the operator cannot see them)",
			strings.Join(in.Unanswered, ", ")), true, nil
	}
	if m.IsCoordinator() {
		if !registered {
			return "", false, nil
		}
		var members, up int
		for _, c := range in.Instances {
			if c.IsCoordinator() {
				members++
				if c.Name != m.Instance && c.Up() {
					up++
				}
			}
		}
		if need := (members-1)/2 + 1; up < need {
			return fmt.Sprintf("without it the Raft membership would have %d coordinators and %d of them up, fewer than the %d a quorum needs; bring a node back", members-1, up, need), false, nil
		}
		if coordinatorRemoved {
			return "the coordinator removed before it has left the Raft membership (one at a time)", true, nil
		}
		return "", false, &Command{Kind: RemoveCoordinator, Coordinator: Coordinator{ID: m.ID, Name: m.Instance}}
	}
	if !registered {
		return "", false, nil // not registered: it holds nothing of the cluster's
	}
	othersUp := false
	for _, d := range in.Instances {
		othersUp = othersUp || (!d.IsCoordinator() && d.Name != m.Instance && d.Up())
	}
	main, hasMain := memgraph.MainOf(in.Instances)
	switch {
	case hasMain && main.Name == m.Instance && othersUp:
		return "the coordinators have failed its MAIN role over to a replica", true, nil
	case hasMain && main.Name == m.Instance:
		return "it is the MAIN and no replica is up to take over: its data may have no other copy; bring the node back", false, nil
	case (!hasMain || !main.Up()) && othersUp:
		return "the coordinators have given the MAIN role to an instance that is up", true, nil
	case !hasMain || !main.Up():
		return "no data instance is up as MAIN, so it may hold the only copy of the data; bring the node back", false, nil
	}
	return "", false, &Command{Kind: UnregisterInstance, Instance: DataInstance{Name: m.Instance}}
}

func replacingMessage(r memgraphv1.LostNode) string {
	return fmt.Sprintf("member %s of lost node %s (%s) is being replaced: it left the HA membership, its claims and pod are deleted, and it is registered again once its new pod runs on another node",
		r.Member, r.Node, r.Reason)
}

func (d *LostDecision) note(member string, s LostState, msg string) {
	d.Notes = append(d.Notes, LostNote{Member: member, State: s, Message: msg})
}

// MarkReplacing records that start's removal ran: its entry is Replacing from now on.
func (d *LostDecision) MarkReplacing(start LostStart) {
	for i := range d.Lost {
		if d.Lost[i].Member == start.Entry.Member && d.Lost[i].Node == start.Entry.Node {
			d.Lost[i].Replacement = memgraphv1.ReplacementReplacing
		}
	}
}

// Refuse drops start: its removal failed. The condition says so with msg (stable: no
// raw error); the next pass judges the member again.
func (d *LostDecision) Refuse(start LostStart, msg string) {
	d.Start = slices.DeleteFunc(d.Start, func(s LostStart) bool { return s.Entry == start.Entry })
	for i := range d.Notes {
		if d.Notes[i].Member == start.Entry.Member {
			d.Notes[i] = LostNote{Member: start.Entry.Member, State: LostRefused, Message: msg}
		}
	}
}

// Condition is the MemberLost condition (no generation), the worst state first in its
// message; ok is false when the cluster should have none (no member was ever lost).
func (d LostDecision) Condition() (c metav1.Condition, ok bool) {
	c.Type = memgraphv1.ConditionMemberLost
	worst := LostReplaced
	for _, n := range d.Notes {
		worst = max(worst, n.State)
	}
	var parts []string
	for s := LostRefused; s >= LostReplaced; s-- {
		for _, n := range d.Notes {
			if n.State == s {
				parts = append(parts, n.Message)
			}
		}
	}
	switch {
	case len(d.Notes) == 0 && !d.reported:
		return c, false
	case len(d.Notes) == 0:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, memgraphv1.ReasonNoMemberLost, "No member's volumes are on a lost node"
		return c, true
	case worst == LostReplaced:
		c.Status, c.Reason = metav1.ConditionFalse, memgraphv1.ReasonReplaced
	default:
		c.Status = metav1.ConditionTrue
		c.Reason = map[LostState]string{LostReplacing: memgraphv1.ReasonReplacing, LostWaitingGrace: memgraphv1.ReasonNodeNotReady,
			LostManual: memgraphv1.ReasonReplacementManual, LostRefused: memgraphv1.ReasonReplacementRefused}[worst]
	}
	c.Message = strings.Join(parts, "; ")
	return c, true
}

func minPositive(a, b time.Duration) time.Duration {
	if a <= 0 || (b > 0 && b < a) {
		return b
	}
	return a
}
