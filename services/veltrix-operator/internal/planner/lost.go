package planner

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	veltrixv1 "github.com/opsuite/suite/api/veltrix/v1alpha1"
	"github.com/opsuite/suite/shared/lostnodes"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Lost members. A member is lost when the node its local volumes are on is deleted, or
// NotReady for longer than the grace period; its data cannot follow it, so it is replaced:
// removed from membership at once (its co-owners copy its partitions again), its claims
// and pod deleted so the StatefulSet makes it anew on another prepared node, where it
// joins and receives data. PlanLost decides, purely, which lost member to replace (one at
// a time), whether it is safe, and what the status and conditions say; the controller
// carries the decision out. The rules:
//   - A deleted node is lost at once; a NotReady one (Ready False or Unknown) once it has
//     been NotReady for GracePeriod. A node without a Ready condition counts as Ready.
//   - A lost node whose member was not yet touched and that is Ready again is forgotten:
//     the member comes back by itself.
//   - Replacing could lose data, and is refused (condition only), when the replication
//     factor is 1, when as many members are lost as the replication factor, or while
//     another member does not serve (it may hold the last copy of some keys).
//   - With Automatic the replacement starts once safe; with Manual once the cluster's
//     annotation veltrix.io/replace-member names the member (it may name a member whose
//     node is NotReady within the grace period: a person decides it is lost).
//   - A replacement is Replaced once the member's volumes are on another node and its pod
//     serves.
//   - A replaced node stays listed. When it comes back, the prepared disks its agent
//     reports are listed (DisksReturned) and never used until the annotation
//     veltrix.io/reoffer-node names the node; the node then leaves the list.

// NodeHealth is what the API says about a node (shared/lostnodes).
type NodeHealth = lostnodes.Health

// Node health.
const (
	NodeReady    = lostnodes.Ready
	NodeNotReady = lostnodes.NotReady
	NodeDeleted  = lostnodes.Deleted
)

// NodeState is one node as observed.
type NodeState = lostnodes.State

// PlacedMember is a member pod and where its volumes are.
type PlacedMember struct {
	// Pod is the pod's name, which is the member id.
	Pod string
	// Node is the node its bound claims' volumes are on; "" when none is bound.
	Node string
	// Disks are the filesystem UUIDs of those volumes.
	Disks []string
	// Serving: its pod is Ready and search-ready.
	Serving bool
}

// LostInput is what a pass observed for PlanLost.
type LostInput struct {
	Now               time.Time
	Automatic         bool
	GracePeriod       time.Duration
	ReplicationFactor int32
	// Members are the StatefulSet's ordinals [0, replicas), by ordinal.
	Members []PlacedMember
	// Nodes holds the nodes that exist; a node not in it is deleted.
	Nodes lostnodes.Nodes
	// Lost is status.lostNodes as last stored.
	Lost []veltrixv1.LostNode
	// ReplaceRequested and ReofferRequested are the cluster's annotations
	// veltrix.io/replace-member and veltrix.io/reoffer-node ("" when absent).
	ReplaceRequested, ReofferRequested string
	// Reported are the prepared disks the agents of listed nodes that are back report (by
	// filesystem UUID); a node whose agent was not asked or did not answer is absent.
	Reported map[string][]string
}

// LostDecision is what to do about lost members now.
type LostDecision struct {
	// Lost is the status.lostNodes to store (when Start is set, with Start's entry still
	// not Replacing: the caller marks it once the member was removed).
	Lost []veltrixv1.LostNode
	// Start is the lost member whose replacement starts now (remove it from membership at
	// once, then continue as Replace); nil when none.
	Start *veltrixv1.LostNode
	// Replace is the replacement under way: delete the member's claims and pod on the
	// lost node, and the node's volumes; nil when none.
	Replace *veltrixv1.LostNode
	// Excluded are the nodes not to prepare disks on nor make volumes for: every listed one.
	Excluded []string
	// ClearReplace and ClearReoffer: the annotation was acted on (or names nothing it could
	// act on) and is to be removed.
	ClearReplace, ClearReoffer bool
	// Reoffered is the node the annotation took off the list ("" when none): its disks are
	// the cluster's again, like those of any node it uses.
	Reoffered string
	// MemberLost and DisksReturned are the conditions (no generation; the caller sets it).
	MemberLost, DisksReturned metav1.Condition
}

// Blocking reports whether the MemberLost condition holds the cluster back (not Ready).
func (d LostDecision) Blocking() bool { return d.MemberLost.Status == metav1.ConditionTrue }

// PlanLost decides one pass. It is pure and deterministic.
func PlanLost(in LostInput) LostDecision {
	var d LostDecision
	records := make([]veltrixv1.LostNode, 0, len(in.Lost))
	for _, r := range in.Lost {
		records = append(records, *r.DeepCopy())
	}
	byMember := map[string]PlacedMember{}
	for _, m := range in.Members {
		byMember[m.Pod] = m
	}
	health := func(node string) NodeState {
		s, ok := in.Nodes[node]
		if !ok {
			return NodeState{Health: NodeDeleted}
		}
		return s
	}

	// Re-offer by hand: the node leaves the list (not while its member is being replaced).
	if node := in.ReofferRequested; node != "" {
		i := slices.IndexFunc(records, func(r veltrixv1.LostNode) bool { return r.Node == node })
		if i < 0 || records[i].Replacement != veltrixv1.ReplacementReplacing {
			d.ClearReoffer = true
			if i >= 0 {
				records = slices.Delete(records, i, i+1)
				d.Reoffered = node
			}
		}
	}

	// Forget a node that is back before its member was touched; follow the others.
	kept := records[:0]
	for _, r := range records {
		h := health(r.Node)
		if r.Replacement == "" && h.Health == NodeReady {
			continue
		}
		if r.Replacement == veltrixv1.ReplacementReplacing {
			if m, ok := byMember[r.Member]; ok && m.Node != "" && m.Node != r.Node && m.Serving {
				r.Replacement = veltrixv1.ReplacementReplaced
			}
		}
		switch {
		case h.Health != NodeReady || r.Replacement == "":
			r.ReturnedDisks = nil
		default:
			if disks, asked := in.Reported[r.Node]; asked {
				r.ReturnedDisks = sortedCopy(disks)
			}
		}
		kept = append(kept, r)
	}
	records = kept
	listed := func(node string) bool {
		return slices.ContainsFunc(records, func(r veltrixv1.LostNode) bool { return r.Node == node })
	}
	memberListed := func(pod string) bool {
		return slices.ContainsFunc(records, func(r veltrixv1.LostNode) bool {
			return r.Member == pod && r.Replacement != veltrixv1.ReplacementReplaced
		})
	}

	// Newly lost nodes, and nodes within their grace period.
	var waiting []string // "node N of member M"
	for _, m := range in.Members {
		if m.Node == "" || listed(m.Node) || memberListed(m.Pod) {
			continue
		}
		h := health(m.Node)
		reason := ""
		switch {
		case h.Health == NodeDeleted:
			reason = veltrixv1.LostNodeDeleted
		case h.Health == NodeNotReady && (in.Now.Sub(h.NotReadySince) >= in.GracePeriod || in.ReplaceRequested == m.Pod):
			reason = veltrixv1.LostNodeNotReady
		case h.Health == NodeNotReady:
			waiting = append(waiting, fmt.Sprintf("node %s of member %s", m.Node, m.Pod))
			continue
		default:
			continue
		}
		records = append(records, veltrixv1.LostNode{Node: m.Node, Reason: reason, Since: metav1.NewTime(in.Now.Truncate(time.Second)),
			Member: m.Pod, Disks: sortedCopy(m.Disks)})
	}
	sort.Slice(records, func(i, j int) bool { return records[i].Node < records[j].Node })
	for _, r := range records {
		d.Excluded = append(d.Excluded, r.Node)
	}

	// One replacement at a time: the one under way, else the first that may start.
	var open []int // records whose member is not replaced yet
	for i, r := range records {
		if r.Replacement != veltrixv1.ReplacementReplaced {
			open = append(open, i)
		}
	}
	d.MemberLost = memberLostCondition(metav1.ConditionFalse, veltrixv1.ReasonNoMemberLost, "no member's node is lost")
	if replaced := replacedList(records); replaced != "" {
		d.MemberLost = memberLostCondition(metav1.ConditionFalse, veltrixv1.ReasonReplaced, "replaced on another node: "+replaced)
	}
	if len(waiting) > 0 {
		d.MemberLost = memberLostCondition(metav1.ConditionTrue, veltrixv1.ReasonNodeNotReady,
			fmt.Sprintf("%s is NotReady; it counts as lost after spec.lostNodes.gracePeriod (%s)", strings.Join(waiting, ", "), in.GracePeriod))
	}
	for _, i := range open {
		if records[i].Replacement == veltrixv1.ReplacementReplacing {
			r := records[i]
			d.Replace = &r
			d.MemberLost = memberLostCondition(metav1.ConditionTrue, veltrixv1.ReasonReplacing,
				fmt.Sprintf("replacing member %s of lost node %s (%s) on another prepared node; its data is copied from the other replicas", r.Member, r.Node, r.Reason))
			break
		}
	}
	if d.Replace == nil && len(open) > 0 {
		r := records[open[0]]
		if reason, msg := refusal(in, r, len(open), memberListed); reason != "" {
			d.MemberLost = memberLostCondition(metav1.ConditionTrue, reason, msg)
		} else {
			d.Start = &r
			d.MemberLost = memberLostCondition(metav1.ConditionTrue, veltrixv1.ReasonReplacing,
				fmt.Sprintf("replacing member %s of lost node %s (%s) on another prepared node; its data is copied from the other replicas", r.Member, r.Node, r.Reason))
			d.ClearReplace = in.ReplaceRequested != ""
		}
	}
	// An annotation naming a member that is not lost is dropped: it must not approve a
	// later loss nobody looked at.
	if in.ReplaceRequested != "" && !memberListed(in.ReplaceRequested) {
		d.ClearReplace = true
	}
	d.Lost = records
	d.DisksReturned = disksReturnedCondition(records)
	return d
}

// refusal says why r's replacement may not start now ("" when it may).
func refusal(in LostInput, r veltrixv1.LostNode, open int, lost func(string) bool) (reason, msg string) {
	rf := in.ReplicationFactor
	switch {
	case rf <= 1:
		return veltrixv1.ReasonReplacementRefused, fmt.Sprintf("member %s of lost node %s (%s) is not replaced: with replicationFactor 1 its data has no other copy; bring the node back, or remove the member and its claims by hand and accept the loss",
			r.Member, r.Node, r.Reason)
	case int32(open) >= rf:
		return veltrixv1.ReasonReplacementRefused, fmt.Sprintf("%d members are lost, as many as replicationFactor %d: some keys may have no copy left, so none is replaced; bring a node back", open, rf)
	}
	var notServing []string
	for _, m := range in.Members {
		if !m.Serving && !lost(m.Pod) {
			notServing = append(notServing, m.Pod)
		}
	}
	if len(notServing) > 0 {
		return veltrixv1.ReasonReplacementRefused, fmt.Sprintf("member %s of lost node %s (%s) is not replaced while %s does not serve: it may hold the last copy of some keys",
			r.Member, r.Node, r.Reason, strings.Join(notServing, ", "))
	}
	if !in.Automatic && in.ReplaceRequested != r.Member {
		return veltrixv1.ReasonReplacementManual, fmt.Sprintf("member %s is lost with node %s (%s): set the annotation %s=%s on the cluster to replace it on another node, or spec.lostNodes.replace to Automatic",
			r.Member, r.Node, r.Reason, veltrixv1.AnnotationReplaceMember, r.Member)
	}
	return "", ""
}

func replacedList(records []veltrixv1.LostNode) string {
	var out []string
	for _, r := range records {
		if r.Replacement == veltrixv1.ReplacementReplaced {
			out = append(out, fmt.Sprintf("member %s of node %s", r.Member, r.Node))
		}
	}
	return strings.Join(out, ", ")
}

func memberLostCondition(s metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: veltrixv1.ConditionMemberLost, Status: s, Reason: reason, Message: msg}
}

func disksReturnedCondition(records []veltrixv1.LostNode) metav1.Condition {
	var back []string
	var first string
	for _, r := range records {
		if len(r.ReturnedDisks) == 0 {
			continue
		}
		if first == "" {
			first = r.Node
		}
		back = append(back, fmt.Sprintf("node %s (lost with member %s) with disks %s", r.Node, r.Member, strings.Join(r.ReturnedDisks, ", ")))
	}
	if len(back) == 0 {
		return metav1.Condition{Type: veltrixv1.ConditionDisksReturned, Status: metav1.ConditionFalse, Reason: veltrixv1.ReasonNoDisksReturned,
			Message: "no lost node came back with disks"}
	}
	return metav1.Condition{Type: veltrixv1.ConditionDisksReturned, Status: metav1.ConditionTrue, Reason: veltrixv1.ReasonDisksReturned,
		Message: fmt.Sprintf("back: %s; they are not used, nor erased: set the annotation %s=%s on the cluster to offer them again (the data on them is older than the cluster's)",
			strings.Join(back, "; "), veltrixv1.AnnotationReofferNode, first)}
}

func sortedCopy(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	out := append([]string(nil), s...)
	sort.Strings(out)
	return slices.Compact(out)
}
