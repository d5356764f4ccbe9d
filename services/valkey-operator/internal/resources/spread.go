package resources

import (
	"strconv"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Topology keys the spread settings use.
const (
	TopologyNode = "kubernetes.io/hostname"
	TopologyZone = "topology.kubernetes.io/zone"
)

// spreadWeight is a preferred spread term's weight: the spread is the placement rule that
// matters most, above the user's own preferences (the scheduler adds the weights).
const spreadWeight = 100

// Affinity is the member at p's affinity: the user's own, plus the anti-affinity terms of
// scheduling.node.spread and scheduling.zone.spread and the node affinity of zone pinning.
// Without scheduling.node, the members of one shard prefer different nodes, so losing a
// node costs each shard at most one member when the scheduler can manage it.
func Affinity(c *valkeyv1.ValkeyCluster, p Position) *corev1.Affinity {
	sched := c.Spec.EffectiveScheduling()
	a := sched.Affinity.DeepCopy()
	if a == nil {
		a = &corev1.Affinity{}
	}
	shard := map[string]string{LabelCluster: c.Name, LabelShard: strconv.Itoa(p.Shard)}
	pods := map[string]string{LabelCluster: c.Name}
	primaries := map[string]string{LabelCluster: c.Name, LabelNodeIndex: "0"}

	node := valkeyv1.NodeSpread{Shard: valkeyv1.SpreadConstraint{Mode: valkeyv1.SpreadPreferred}}
	if sched.Node != nil {
		node = sched.Node.Spread
	}
	spread(a, node.Shard.Mode, shard, TopologyNode)
	spread(a, node.Pods.Mode, pods, TopologyNode)
	if sched.Zone != nil {
		spread(a, sched.Zone.Spread.Shard.Mode, shard, TopologyZone)
		spread(a, sched.Zone.Spread.Pods.Mode, pods, TopologyZone)
	}
	// Primaries move with failovers; the members created as primaries (index 0) are the
	// ones spread.
	if p.Index == 0 {
		spread(a, node.Primaries.Mode, primaries, TopologyNode)
		if sched.Zone != nil {
			spread(a, sched.Zone.Spread.Primaries.Mode, primaries, TopologyZone)
		}
	}
	if zone := PinnedZone(c, p); zone != "" {
		pin(a, zone)
	}
	if a.PodAntiAffinity == nil && a.NodeAffinity == nil && a.PodAffinity == nil {
		return nil
	}
	return a
}

// spread adds one anti-affinity term over the pods matching selector.
func spread(a *corev1.Affinity, mode valkeyv1.SpreadMode, selector map[string]string, key string) {
	if mode != valkeyv1.SpreadPreferred && mode != valkeyv1.SpreadRequired {
		return
	}
	if a.PodAntiAffinity == nil {
		a.PodAntiAffinity = &corev1.PodAntiAffinity{}
	}
	term := corev1.PodAffinityTerm{LabelSelector: &metav1.LabelSelector{MatchLabels: selector}, TopologyKey: key}
	if mode == valkeyv1.SpreadRequired {
		a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, term)
		return
	}
	a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution,
		corev1.WeightedPodAffinityTerm{Weight: spreadWeight, PodAffinityTerm: term})
}

// PinnedZone is the zone scheduling.zone.pinning puts the member at p in, round-robin:
// zones[(shard+index) % len(zones)], so each shard's members start from a different zone;
// "" without pinning.
func PinnedZone(c *valkeyv1.ValkeyCluster, p Position) string {
	z := c.Spec.EffectiveScheduling().Zone
	if z == nil || z.Pinning == nil || len(z.Pinning.Zones) == 0 {
		return ""
	}
	return z.Pinning.Zones[(p.Shard+p.Index)%len(z.Pinning.Zones)]
}

// pin requires zone in every required node selector term (terms are ORed, so each must
// carry it).
func pin(a *corev1.Affinity, zone string) {
	req := corev1.NodeSelectorRequirement{Key: TopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{zone}}
	if a.NodeAffinity == nil {
		a.NodeAffinity = &corev1.NodeAffinity{}
	}
	if a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{}
	}
	terms := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) == 0 {
		terms = []corev1.NodeSelectorTerm{{}}
	}
	for i := range terms {
		terms[i].MatchExpressions = append(terms[i].MatchExpressions, req)
	}
	a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms = terms
}
