// Package lostnodes says which Kubernetes nodes are lost, for operators whose members keep
// their data on local volumes pinned to one node: such a member's pod can never start
// anywhere else, so a lost node means a member to replace. A node is lost when it is
// deleted, or when its Ready condition has been False or Unknown for longer than a grace
// period. Pure apart from reading the objects it is given.
package lostnodes

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// HostnameLabel is the node label a local volume's node affinity names.
const HostnameLabel = "kubernetes.io/hostname"

// Health is what the API says about a node.
type Health int

// Node health.
const (
	// Ready: the node exists with Ready True, or without a Ready condition.
	Ready Health = iota
	// NotReady: the node exists with Ready False or Unknown.
	NotReady
	// Deleted: no such node (or one being deleted).
	Deleted
)

// State is one node as observed.
type State struct {
	Health Health
	// NotReadySince is when its Ready condition last changed, for NotReady.
	NotReadySince time.Time
}

// Nodes are the nodes that exist, by name and by the hostname their volumes' node affinity
// names them with (the two are usually equal); a node not in it is deleted.
type Nodes map[string]State

// Observe reads nodes: each under its name and its hostname label, a node being deleted
// left out.
func Observe(nodes []corev1.Node) Nodes {
	out := Nodes{}
	for i := range nodes {
		n := &nodes[i]
		if !n.DeletionTimestamp.IsZero() {
			continue
		}
		s := State{Health: Ready}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue {
				s = State{Health: NotReady, NotReadySince: c.LastTransitionTime.Time}
			}
		}
		out[n.Name] = s
		if host := n.Labels[HostnameLabel]; host != "" {
			out[host] = s
		}
	}
	return out
}

// Of is the state of node: Deleted when it is not there.
func (ns Nodes) Of(node string) State {
	if s, ok := ns[node]; ok {
		return s
	}
	return State{Health: Deleted}
}

// Lost says whether a node in state s counts as lost at now: deleted, or NotReady for at
// least grace. For a NotReady node within grace, left is how long until it counts.
func (s State) Lost(now time.Time, grace time.Duration) (lost bool, left time.Duration) {
	switch s.Health {
	case Deleted:
		return true, 0
	case NotReady:
		if d := now.Sub(s.NotReadySince); d < grace {
			return false, grace - d
		}
		return true, 0
	}
	return false, 0
}

// PinnedHost is the one hostname a volume's required node affinity allows, when it has
// exactly one term naming exactly one (a local volume); "" when the volume can follow its
// pod to other nodes.
func PinnedHost(pv *corev1.PersistentVolume) string {
	a := pv.Spec.NodeAffinity
	if a == nil || a.Required == nil || len(a.Required.NodeSelectorTerms) != 1 {
		return ""
	}
	for _, e := range a.Required.NodeSelectorTerms[0].MatchExpressions {
		if e.Key == HostnameLabel && e.Operator == corev1.NodeSelectorOpIn && len(e.Values) == 1 {
			return e.Values[0]
		}
	}
	return ""
}
