package disks

import (
	"slices"
	"testing"

	veltrixv1 "github.com/opsuite/suite/api/veltrix/v1alpha1"
	corev1 "k8s.io/api/core/v1"
)

const zone = "topology.kubernetes.io/zone"

// zoned are nodes named so that name order crowds zone a: a-0, a-1, a-2 in zone a, then
// b-0 in b and c-0 in c (and x-0 with no zone label).
func zoned() []corev1.Node {
	var nodes []corev1.Node
	for _, n := range []struct{ name, zone string }{{"a-0", "a"}, {"a-1", "a"}, {"a-2", "a"}, {"b-0", "b"}, {"c-0", "c"}, {"x-0", ""}} {
		labels := map[string]string{"kubernetes.io/hostname": n.name, "disk": "nvme"}
		if n.zone != "" {
			labels[zone] = n.zone
		}
		nodes = append(nodes, node(n.name, labels))
	}
	return nodes
}

func names(nodes []corev1.Node) []string {
	var out []string
	for _, n := range nodes {
		out = append(out, n.Name)
	}
	return out
}

func spread(key string, when corev1.UnsatisfiableConstraintAction) func(*veltrixv1.VeltrixCluster) {
	return func(c *veltrixv1.VeltrixCluster) {
		c.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: key, WhenUnsatisfiable: when}}
	}
}

func nodeAffinity(required []corev1.NodeSelectorRequirement, preferred ...corev1.PreferredSchedulingTerm) func(*veltrixv1.VeltrixCluster) {
	return func(c *veltrixv1.VeltrixCluster) {
		a := &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: preferred}
		if required != nil {
			a.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: required}}}
		}
		c.Spec.Affinity = &corev1.Affinity{NodeAffinity: a}
	}
}

// TestCandidatesPlacement: a node a member cannot be scheduled on is not a candidate: the
// required node affinity (as nodeSelector), and the topology label of a DoNotSchedule
// spread constraint (not of a ScheduleAnyway one).
func TestCandidatesPlacement(t *testing.T) {
	nodes := zoned()
	for _, tc := range []struct {
		name string
		c    *veltrixv1.VeltrixCluster
		want []string
	}{
		{"nothing set", cluster(), names(nodes)},
		{"zone In b, c", cluster(nodeAffinity([]corev1.NodeSelectorRequirement{{Key: zone, Operator: corev1.NodeSelectorOpIn, Values: []string{"b", "c"}}})),
			[]string{"b-0", "c-0"}},
		{"zone NotIn a, with a nodeSelector", cluster(nodeAffinity([]corev1.NodeSelectorRequirement{{Key: zone, Operator: corev1.NodeSelectorOpNotIn, Values: []string{"a"}}}),
			func(c *veltrixv1.VeltrixCluster) { c.Spec.NodeSelector = map[string]string{"disk": "nvme"} }),
			[]string{"b-0", "c-0", "x-0"}},
		{"a term that cannot parse matches nothing", cluster(nodeAffinity([]corev1.NodeSelectorRequirement{{Key: zone, Operator: corev1.NodeSelectorOpGt, Values: []string{"a"}}})),
			nil},
		{"only preferred terms", cluster(nodeAffinity(nil, corev1.PreferredSchedulingTerm{Weight: 10, Preference: corev1.NodeSelectorTerm{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: zone, Operator: corev1.NodeSelectorOpIn, Values: []string{"c"}}}}})),
			names(nodes)},
		{"a hard zone spread needs the zone label", cluster(spread(zone, corev1.DoNotSchedule)), []string{"a-0", "a-1", "a-2", "b-0", "c-0"}},
		{"a soft zone spread does not", cluster(spread(zone, corev1.ScheduleAnyway)), names(nodes)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Candidates(tc.c, nodes, DefaultPoolLabelPrefix); !slices.Equal(got, tc.want) {
				t.Errorf("candidates %v, want %v", got, tc.want)
			}
		})
	}
}

// TestOrder: the nodes the cluster uses come first; the others follow spread over the
// members' spread keys (a zone spread, an anti-affinity per zone), then by the preferred
// node affinity, then by name.
func TestOrder(t *testing.T) {
	nodes := zoned()
	all := names(nodes)
	perZone := func(c *veltrixv1.VeltrixCluster) { c.Spec.PodAntiAffinityTopologyKey = zone }
	preferC := nodeAffinity(nil, corev1.PreferredSchedulingTerm{Weight: 50, Preference: corev1.NodeSelectorTerm{
		MatchExpressions: []corev1.NodeSelectorRequirement{{Key: zone, Operator: corev1.NodeSelectorOpIn, Values: []string{"c"}}}}})
	for _, tc := range []struct {
		name       string
		c          *veltrixv1.VeltrixCluster
		candidates []string
		used       []string
		want       []string
	}{
		{"used first, then by name", cluster(), []string{"a", "b", "c", "d"}, []string{"c", "gone"}, []string{"c", "gone", "a", "b", "d"}},
		// The default anti-affinity is per host: no spreading over zones.
		{"default: by name", cluster(), all, nil, all},
		{"zone spread", cluster(spread(zone, corev1.DoNotSchedule)), all[:5], nil, []string{"a-0", "b-0", "c-0", "a-1", "a-2"}},
		{"soft zone spread, a node without a zone", cluster(spread(zone, corev1.ScheduleAnyway)), all, nil, []string{"a-0", "b-0", "c-0", "x-0", "a-1", "a-2"}},
		{"anti-affinity per zone", cluster(perZone), all[:5], nil, []string{"a-0", "b-0", "c-0", "a-1", "a-2"}},
		{"zone spread after used nodes in a and b", cluster(spread(zone, corev1.DoNotSchedule)), all[:5], []string{"a-1", "b-0"}, []string{"a-1", "b-0", "c-0", "a-0", "a-2"}},
		{"a user's anti-affinity per zone", cluster(func(c *veltrixv1.VeltrixCluster) {
			c.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{TopologyKey: zone}}}}
		}), all[:5], nil, []string{"a-0", "b-0", "c-0", "a-1", "a-2"}},
		{"preferred zone c first", cluster(preferC), all, nil, []string{"c-0", "a-0", "a-1", "a-2", "b-0", "x-0"}},
		{"spread wins over preference", cluster(preferC, spread(zone, corev1.DoNotSchedule)), all[:5], nil, []string{"c-0", "a-0", "b-0", "a-1", "a-2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Order(tc.c, nodes, tc.candidates, tc.used); !slices.Equal(got, tc.want) {
				t.Errorf("order %v, want %v", got, tc.want)
			}
		})
	}
}
