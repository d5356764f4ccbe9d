package resources

import (
	"slices"
	"testing"

	veltrixv1 "github.com/opsuite/suite/api/veltrix/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

const zoneKey = "topology.kubernetes.io/zone"

// TestPlacementDefaults: without placement fields the pod template is the one the
// operator built before they existed (required anti-affinity per
// podAntiAffinityTopologyKey, 60 s grace, no class, no spread), so no pod rolls.
func TestPlacementDefaults(t *testing.T) {
	p := StatefulSet(cluster(), 3, "h").Spec.Template.Spec
	want := &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
		LabelSelector: &metav1.LabelSelector{MatchLabels: SelectorLabels(cluster())}, TopologyKey: veltrixv1.DefaultPodAntiAffinityTopologyKey,
	}}}}
	if !equality.Semantic.DeepEqual(p.Affinity, want) {
		t.Errorf("affinity %+v, want the required anti-affinity per host", p.Affinity)
	}
	if *p.TerminationGracePeriodSeconds != veltrixv1.DefaultTerminationGracePeriodSeconds || p.PriorityClassName != "" || p.TopologySpreadConstraints != nil {
		t.Errorf("grace %d, class %q, spread %v", *p.TerminationGracePeriodSeconds, p.PriorityClassName, p.TopologySpreadConstraints)
	}
	if keys := PlacementOf(cluster()).SpreadKeys(); !slices.Equal(keys, []string{HostnameLabel}) {
		t.Errorf("spread keys %v, want the host only", keys)
	}
}

// TestPlacementFromSpec: each field reaches the pod template; a nodeAffinity keeps the
// default anti-affinity, a podAntiAffinity of the user's replaces it; a spread constraint
// without a labelSelector spreads the members, one with a selector keeps it; the spec is
// copied, never shared.
func TestPlacementFromSpec(t *testing.T) {
	nodeAff := &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchExpressions: []corev1.NodeSelectorRequirement{{Key: zoneKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"eu-west-1a", "eu-west-1b"}}},
	}}}}
	own := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "other"}}
	c := cluster(func(c *veltrixv1.VeltrixCluster) {
		c.Spec.Affinity = &corev1.Affinity{NodeAffinity: nodeAff}
		c.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{
			{MaxSkew: 1, TopologyKey: zoneKey, WhenUnsatisfiable: corev1.DoNotSchedule},
			{MaxSkew: 2, TopologyKey: "rack", WhenUnsatisfiable: corev1.ScheduleAnyway, LabelSelector: own},
		}
		c.Spec.PriorityClassName = "veltrix-critical"
		c.Spec.TerminationGracePeriodSeconds = ptr.To[int64](600)
	})
	place := PlacementOf(c)
	p := StatefulSet(c, 3, "h").Spec.Template.Spec
	if !equality.Semantic.DeepEqual(p.Affinity.NodeAffinity, nodeAff) || p.Affinity.NodeAffinity == nodeAff {
		t.Errorf("node affinity %+v, want a copy of the spec's", p.Affinity.NodeAffinity)
	}
	if anti := p.Affinity.PodAntiAffinity; anti == nil || len(anti.RequiredDuringSchedulingIgnoredDuringExecution) != 1 {
		t.Errorf("pod anti-affinity %+v, want the default kept next to a nodeAffinity", anti)
	}
	if c.Spec.Affinity.PodAntiAffinity != nil {
		t.Error("the builder wrote its default into the spec")
	}
	spread := p.TopologySpreadConstraints
	if len(spread) != 2 || !equality.Semantic.DeepEqual(spread[0].LabelSelector.MatchLabels, SelectorLabels(c)) || spread[1].LabelSelector.MatchLabels["app"] != "other" {
		t.Errorf("spread constraints %+v: the first wants the members' selector, the second its own", spread)
	}
	if c.Spec.TopologySpreadConstraints[0].LabelSelector != nil {
		t.Error("the builder wrote the members' selector into the spec")
	}
	if p.PriorityClassName != "veltrix-critical" || *p.TerminationGracePeriodSeconds != 600 {
		t.Errorf("class %q grace %d", p.PriorityClassName, *p.TerminationGracePeriodSeconds)
	}
	if keys := place.SpreadKeys(); !slices.Equal(keys, []string{HostnameLabel, zoneKey, "rack"}) {
		t.Errorf("spread keys %v", keys)
	}
	if keys := place.RequiredNodeLabels(); !slices.Equal(keys, []string{zoneKey}) {
		t.Errorf("required node labels %v, want the DoNotSchedule constraint's key only", keys)
	}

	mine := &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
		Weight: 100, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: zoneKey, LabelSelector: &metav1.LabelSelector{MatchLabels: SelectorLabels(c)}},
	}}}
	c = cluster(func(c *veltrixv1.VeltrixCluster) { c.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: mine} })
	if got := StatefulSet(c, 3, "h").Spec.Template.Spec.Affinity.PodAntiAffinity; !equality.Semantic.DeepEqual(got, mine) {
		t.Errorf("pod anti-affinity %+v, want the user's in place of the default", got)
	}
	if keys := PlacementOf(c).SpreadKeys(); len(keys) != 0 {
		t.Errorf("spread keys %v: a preferred term requires no spread", keys)
	}
}

// TestPlacementGolden pins the StatefulSet of a cluster with every placement field.
func TestPlacementGolden(t *testing.T) {
	golden(t, "statefulset-placement.yaml", StatefulSet(cluster(func(c *veltrixv1.VeltrixCluster) {
		c.Spec.NodeSelector = map[string]string{"pool": "nvme"}
		c.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
			Weight: 20, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "disk-gen", Operator: corev1.NodeSelectorOpIn, Values: []string{"gen5"}}}},
		}}}}
		c.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: zoneKey, WhenUnsatisfiable: corev1.DoNotSchedule}}
		c.Spec.PriorityClassName = "veltrix-critical"
		c.Spec.TerminationGracePeriodSeconds = ptr.To[int64](300)
	}), 3, "h"))
}
