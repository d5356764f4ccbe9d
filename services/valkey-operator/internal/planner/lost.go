package planner

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
	"github.com/opsuite/suite/shared/lostnodes"
)

// Lost members. With persistence a member's claim may be bound to a volume pinned to one
// Kubernetes node; when that node is lost (deleted, or NotReady past the grace period) the
// member's pod can never start anywhere else. Its claim is deleted, so that a new one
// binds on another node and the member rejoins, empty, as a replica. PlanLost decides
// which, purely; the rules:
//   - A deleted node is lost at once; a NotReady one once it has been NotReady for
//     GracePeriod.
//   - Data is never lost: a member is replaced only when another member holds what it
//     holds. It must own no slots in any answering member's view (a primary is failed
//     over first, by the cluster or the operator's takeover), and if it is a replica its
//     primary must answer as a primary. Its own server must not answer (it still serves),
//     and at least one member must answer (else nothing is known).
//   - With Automatic the claim is deleted at once; with Manual the loss is reported and a
//     person deletes the claim.

// NodeHealth is what the API says about a Kubernetes node (shared/lostnodes).
type NodeHealth = lostnodes.Health

// Node health.
const (
	NodeReady    = lostnodes.Ready
	NodeNotReady = lostnodes.NotReady
	NodeDeleted  = lostnodes.Deleted
)

// NodeState is one Kubernetes node as observed.
type NodeState = lostnodes.State

// PinnedMember is a member whose claim is bound to a volume pinned to one node.
type PinnedMember struct {
	// Name is the ValkeyNode's.
	Name string
	// ID is its server's node id as last reported ("" when never known).
	ID string
	// Node is the Kubernetes node its claim's volume is pinned to.
	Node string
	// Answers: its server answered this pass.
	Answers bool
	// ClaimDeleting: its claim is already being deleted (the replacement is under way).
	ClaimDeleting bool
}

// LostInput is what a pass observed.
type LostInput struct {
	Now         time.Time
	Automatic   bool
	GracePeriod time.Duration
	Members     []PinnedMember
	// Nodes are the nodes that exist; one not in it is deleted.
	Nodes    lostnodes.Nodes
	Snapshot valkey.Snapshot
}

// LostState is the outcome for the members, worst first: it names the MemberLost
// condition's reason.
type LostState int

// Outcomes, in the order the condition reports them (the first present wins).
const (
	LostNone LostState = iota
	LostReplacing
	LostWaitingGrace
	LostManual
	LostRefused
)

// LostDecision is what to do about lost members now.
type LostDecision struct {
	// Replace are the members whose claim (and pod on the lost node) to delete now.
	Replace []PinnedMember
	// State is the worst outcome and Message says it for every member concerned.
	State   LostState
	Message string
	// Recheck is how soon a node within its grace period becomes lost (0: none).
	Recheck time.Duration
}

// PlanLost decides one pass. It is pure and deterministic (members in name order).
func PlanLost(in LostInput) LostDecision {
	var d LostDecision
	members := append([]PinnedMember(nil), in.Members...)
	sort.Slice(members, func(i, j int) bool { return members[i].Name < members[j].Name })
	msgs := map[LostState][]string{}
	note := func(s LostState, msg string) {
		d.State = max(d.State, s)
		msgs[s] = append(msgs[s], msg)
	}
	for _, m := range members {
		h, ok := in.Nodes[m.Node]
		if !ok {
			h = NodeState{Health: NodeDeleted}
		}
		how := ""
		switch {
		case h.Health == NodeDeleted:
			how = "deleted"
		case h.Health == NodeNotReady && in.Now.Sub(h.NotReadySince) >= in.GracePeriod:
			how = fmt.Sprintf("NotReady for %s", in.Now.Sub(h.NotReadySince).Round(time.Second))
		case h.Health == NodeNotReady:
			left := h.NotReadySince.Add(in.GracePeriod).Sub(in.Now)
			if d.Recheck == 0 || left < d.Recheck {
				d.Recheck = left
			}
			note(LostWaitingGrace, fmt.Sprintf("the node %s of %s's claim is NotReady; it counts as lost after spec.lostNodes.gracePeriod (%s)", m.Node, m.Name, in.GracePeriod))
			continue
		default:
			continue
		}
		if m.ClaimDeleting {
			note(LostReplacing, fmt.Sprintf("%s's claim on lost node %s (%s) is being deleted; a new claim binds on another node and the member rejoins as a replica", m.Name, m.Node, how))
			continue
		}
		if why, transient := unsafeToReplace(in.Snapshot, m, h.Health == NodeDeleted); why != "" {
			if transient {
				note(LostReplacing, fmt.Sprintf("%s is on lost node %s (%s): %s", m.Name, m.Node, how, why))
			} else {
				note(LostRefused, fmt.Sprintf("%s is on lost node %s (%s) and is not replaced: %s", m.Name, m.Node, how, why))
			}
			continue
		}
		if !in.Automatic {
			note(LostManual, fmt.Sprintf("%s is on lost node %s (%s): delete its claim to replace it on another node, or set spec.lostNodes.replace to Automatic", m.Name, m.Node, how))
			continue
		}
		note(LostReplacing, fmt.Sprintf("%s's claim on lost node %s (%s) is deleted; a new claim binds on another node and the member rejoins as a replica", m.Name, m.Node, how))
		d.Replace = append(d.Replace, m)
	}
	var parts []string
	for s := LostRefused; s > LostNone; s-- {
		parts = append(parts, msgs[s]...)
	}
	d.Message = strings.Join(parts, "; ")
	return d
}

// unsafeToReplace says why m's claim may not go now ("" when it may); transient when it
// is expected to clear by itself: a replica answers to take over, or the server of a
// deleted node's pod has yet to stop.
func unsafeToReplace(s valkey.Snapshot, m PinnedMember, deleted bool) (why string, transient bool) {
	if m.Answers {
		return "its server still answers; it is replaced once it stops", deleted
	}
	if len(s.Views) == 0 {
		return "no member answers, so no other copy of its data is known", false
	}
	if m.ID == "" {
		return "", false // never joined: it holds nothing of the cluster's
	}
	var replicaOf string
	for _, v := range s.Views {
		n, ok := v.Node(m.ID)
		if !ok {
			continue
		}
		if n.SlotTotal() > 0 && !n.Replica {
			for _, r := range s.Views {
				if me, ok := r.Myself(); ok && me.Replica && me.PrimaryID == m.ID {
					return fmt.Sprintf("it still owns %d slots; waiting for its replica %s to take them over", n.SlotTotal(), r.Addr), true
				}
			}
			return fmt.Sprintf("it owns %d slots and no replica of it answers: its data has no other copy; bring the node back", n.SlotTotal()), false
		}
		if n.Replica && replicaOf == "" {
			replicaOf = n.PrimaryID
		}
	}
	if replicaOf == "" {
		return "", false // a primary without slots: failed over, or never given any
	}
	for _, v := range s.Views {
		if me, ok := v.Myself(); ok && me.ID == replicaOf && me.Primary && !me.Replica {
			return "", false
		}
	}
	return fmt.Sprintf("it is a replica of %s, which does not answer as a primary: it may hold the shard's last copy", replicaOf), false
}
