package disks

import (
	"slices"
	"sort"

	veltrixv1 "github.com/opsuite/suite/api/veltrix/v1alpha1"
	"github.com/opsuite/suite/services/veltrix-operator/internal/resources"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
)

// DefaultPoolLabelPrefix is the node agents' default --pool-label-prefix (the node-agent
// chart's poolLabelPrefix).
const DefaultPoolLabelPrefix = "pool.opsuite.io"

// NamespaceLabel is the node-pool label "<prefix>/namespace": a node carrying it lends its
// disks only to the clusters of the namespace it names.
func NamespaceLabel(prefix string) string { return prefix + "/namespace" }

// LentElsewhere reports whether a node's pool label lends its disks to a namespace other
// than ns. An empty value lends to no one in particular, as an absent label.
func LentElsewhere(n *corev1.Node, prefix, ns string) bool {
	lent := n.Labels[NamespaceLabel(prefix)]
	return lent != "" && lent != ns
}

// Candidates are the nodes the cluster may use, sorted by name: the nodes a member may be
// scheduled on, so that no disk is prepared where no member can run. That is a node
// schedulable, matching spec.nodeSelector and the required terms of
// spec.affinity.nodeAffinity, with every NoSchedule/NoExecute taint tolerated, carrying the
// topologyKey label of every DoNotSchedule spread constraint, and not lent to another
// namespace by the node-pool label <poolPrefix>/namespace (tenancy: a node given to one
// namespace formats its disks for no other namespace's clusters).
func Candidates(c *veltrixv1.VeltrixCluster, nodes []corev1.Node, poolPrefix string) []string {
	required := nodeaffinity.NewRequiredNodeAffinity(c.Spec.NodeSelector, c.Spec.Affinity)
	labels := resources.PlacementOf(c).RequiredNodeLabels()
	var out []string
	for i := range nodes {
		n := &nodes[i]
		// A term the scheduler cannot parse matches no node for it either.
		matches, err := required.Match(n)
		if n.Spec.Unschedulable || !n.DeletionTimestamp.IsZero() || !matches || err != nil ||
			!hasLabels(n, labels) || !tolerated(n.Spec.Taints, c.Spec.Tolerations) || LentElsewhere(n, poolPrefix, c.Namespace) {
			continue
		}
		out = append(out, n.Name)
	}
	sort.Strings(out)
	return out
}

func hasLabels(n *corev1.Node, keys []string) bool {
	for _, k := range keys {
		if _, ok := n.Labels[k]; !ok {
			return false
		}
	}
	return true
}

// KeepUsed are the nodes the cluster used that it may go on asking: all but those lent to
// another namespace since (a used node no longer listed is kept; Order explains why).
func KeepUsed(c *veltrixv1.VeltrixCluster, nodes []corev1.Node, poolPrefix string, used []string) []string {
	lentElsewhere := map[string]bool{}
	for i := range nodes {
		lentElsewhere[nodes[i].Name] = LentElsewhere(&nodes[i], poolPrefix, c.Namespace)
	}
	var out []string
	for _, n := range used {
		if !lentElsewhere[n] {
			out = append(out, n)
		}
	}
	return out
}

func tolerated(taints []corev1.Taint, tolerations []corev1.Toleration) bool {
	for i := range taints {
		t := &taints[i]
		if t.Effect == corev1.TaintEffectPreferNoSchedule {
			continue
		}
		ok := false
		for j := range tolerations {
			if tolerations[j].ToleratesTaint(klog.Background(), t, true) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// Order is the order nodes are tried in (Prepare takes them from the front): the nodes the
// cluster already uses first (their disks hold its data; those that are no longer
// candidates too, since their volumes still pin members there), then the other
// candidates, spread over the members' spread keys (resources.Placement.SpreadKeys): each
// next node is the one whose domains hold the fewest nodes already in the order, ties
// going to the node the preferred terms of spec.affinity.nodeAffinity weigh most, then to
// the first by name. So a zone spread, or an anti-affinity per zone, finds prepared nodes
// in as many zones as there are, whichever names the nodes have. The hostname label is
// left out of the keys: no two nodes share it.
func Order(c *veltrixv1.VeltrixCluster, nodes []corev1.Node, candidates, used []string) []string {
	byName := make(map[string]*corev1.Node, len(nodes))
	for i := range nodes {
		byName[nodes[i].Name] = &nodes[i]
	}
	place := resources.PlacementOf(c)
	var keys []string
	for _, k := range place.SpreadKeys() {
		if k != resources.HostnameLabel {
			keys = append(keys, k)
		}
	}
	counts := make([]map[string]int, len(keys)) // per key: label value -> nodes ordered
	for i := range counts {
		counts[i] = map[string]int{}
	}
	crowd := func(name string, add bool) int {
		sum := 0
		n := byName[name]
		if n == nil {
			return 0
		}
		for i, k := range keys {
			if v, ok := n.Labels[k]; ok {
				sum += counts[i][v]
				if add {
					counts[i][v]++
				}
			}
		}
		return sum
	}
	seen := map[string]bool{}
	var out, rest []string
	for _, n := range used {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
			crowd(n, true)
		}
	}
	for _, n := range candidates {
		if !seen[n] {
			seen[n] = true
			rest = append(rest, n)
		}
	}
	rest = byPreference(c.Spec.Affinity, byName, rest)
	if len(keys) == 0 {
		return append(out, rest...)
	}
	for len(rest) > 0 {
		best, least := 0, crowd(rest[0], false)
		for i := 1; i < len(rest) && least > 0; i++ {
			if n := crowd(rest[i], false); n < least {
				best, least = i, n
			}
		}
		out = append(out, rest[best])
		crowd(rest[best], true)
		rest = slices.Delete(rest, best, best+1)
	}
	return out
}

// byPreference sorts names (stably) by the weight the preferred terms of the affinity's
// nodeAffinity give each node, highest first.
func byPreference(a *corev1.Affinity, byName map[string]*corev1.Node, names []string) []string {
	if a == nil || a.NodeAffinity == nil || len(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution) == 0 {
		return names
	}
	terms, err := nodeaffinity.NewPreferredSchedulingTerms(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution)
	if err != nil {
		return names
	}
	score := make(map[string]int64, len(names))
	for _, n := range names {
		if node := byName[n]; node != nil {
			score[n] = terms.Score(node)
		}
	}
	sort.SliceStable(names, func(i, j int) bool { return score[names[i]] > score[names[j]] })
	return names
}
