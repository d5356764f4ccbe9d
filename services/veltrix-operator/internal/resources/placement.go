package resources

import (
	veltrixv1 "github.com/opsuite/suite/api/veltrix/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Placement is where the members may run and how they stop: the pod spec's scheduling
// fields and grace period.
type Placement struct {
	Affinity                      *corev1.Affinity
	NodeSelector                  map[string]string
	Tolerations                   []corev1.Toleration
	TopologySpreadConstraints     []corev1.TopologySpreadConstraint
	PriorityClassName             string
	TerminationGracePeriodSeconds *int64
}

// PlacementOf is the members' Placement from the spec. An affinity that sets no
// podAntiAffinity gets the operator's: at most one member per value of
// podAntiAffinityTopologyKey (required: each node holds the disks of one member). A spread
// constraint without a labelSelector gets the members' selector. Unset fields leave the
// pod template as it was before they existed, so an upgrade of the operator rolls no pod.
func PlacementOf(c *veltrixv1.VeltrixCluster) Placement {
	p := Placement{
		Affinity:                      &corev1.Affinity{},
		NodeSelector:                  copyMap(c.Spec.NodeSelector),
		PriorityClassName:             string(c.Spec.PriorityClassName),
		TerminationGracePeriodSeconds: ptr.To(veltrixv1.DefaultTerminationGracePeriodSeconds),
	}
	if c.Spec.Affinity != nil {
		p.Affinity = c.Spec.Affinity.DeepCopy()
	}
	if p.Affinity.PodAntiAffinity == nil {
		p.Affinity.PodAntiAffinity = &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: SelectorLabels(c)},
				TopologyKey:   c.Spec.PodAntiAffinityTopologyKey,
			}},
		}
	}
	if g := c.Spec.TerminationGracePeriodSeconds; g != nil {
		p.TerminationGracePeriodSeconds = ptr.To(*g)
	}
	for _, t := range c.Spec.Tolerations {
		p.Tolerations = append(p.Tolerations, *t.DeepCopy())
	}
	for _, t := range c.Spec.TopologySpreadConstraints {
		t := *t.DeepCopy()
		if t.LabelSelector == nil {
			t.LabelSelector = &metav1.LabelSelector{MatchLabels: SelectorLabels(c)}
		}
		p.TopologySpreadConstraints = append(p.TopologySpreadConstraints, t)
	}
	return p
}

// SpreadKeys are the node labels the members must be spread over: the topologyKey of
// every required pod anti-affinity term and of every spread constraint. The nodes whose
// disks are prepared are picked spread over them (package disks), since a member can run
// only where its disks are.
func (p Placement) SpreadKeys() []string {
	var keys []string
	add := func(k string) {
		for _, have := range keys {
			if have == k {
				return
			}
		}
		keys = append(keys, k)
	}
	if a := p.Affinity; a != nil && a.PodAntiAffinity != nil {
		for _, t := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			add(t.TopologyKey)
		}
	}
	for _, t := range p.TopologySpreadConstraints {
		add(t.TopologyKey)
	}
	return keys
}

// RequiredNodeLabels are the node labels the scheduler requires a member's node to carry:
// the topologyKey of every DoNotSchedule spread constraint (a node without it never gets
// a member).
func (p Placement) RequiredNodeLabels() []string {
	var keys []string
	for _, t := range p.TopologySpreadConstraints {
		if t.WhenUnsatisfiable == corev1.DoNotSchedule {
			keys = append(keys, t.TopologyKey)
		}
	}
	return keys
}
