package validation

import (
	"context"
	"testing"

	veltrixv1 "github.com/opsuite/suite/api/veltrix/v1alpha1"
	"github.com/opsuite/suite/shared/testenv"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestPlacementRules: the placement fields are accepted in their useful shapes and refused,
// with a message saying what to change, where they cannot work: a required podAffinity
// (members run only where their disks were prepared), a podAntiAffinity of one's own next
// to a podAntiAffinityTopologyKey it would silently replace, a spread constraint the
// scheduler refuses, a priority class name that cannot name one, a grace period that kills
// the server before its checkpoint.
func TestPlacementRules(t *testing.T) {
	ns := testenv.NewNamespace(t, env.Client, "vc-")
	zone := "topology.kubernetes.io/zone"
	term := corev1.PodAffinityTerm{TopologyKey: zone, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "cache"}}}
	cases := []struct {
		name string
		spec func(*veltrixv1.VeltrixClusterSpec)
		want string // "" accepts
	}{
		{name: "every field", spec: func(s *veltrixv1.VeltrixClusterSpec) {
			s.Affinity = &corev1.Affinity{
				NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchExpressions: []corev1.NodeSelectorRequirement{{Key: zone, Operator: corev1.NodeSelectorOpIn, Values: []string{"eu-west-1a", "eu-west-1b"}}},
				}}}},
				PodAffinity: &corev1.PodAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 10, PodAffinityTerm: term}}},
			}
			s.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: zone, WhenUnsatisfiable: corev1.DoNotSchedule}}
			s.PriorityClassName = "system-cluster-critical"
			s.TerminationGracePeriodSeconds = ptr.To[int64](86400)
		}},
		{name: "required podAffinity", spec: func(s *veltrixv1.VeltrixClusterSpec) {
			s.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term}}}
		}, want: "affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution is refused: members run only on the nodes whose disks the operator prepared"},
		{name: "an own podAntiAffinity per zone", spec: func(s *veltrixv1.VeltrixClusterSpec) {
			s.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term}}}
		}},
		{name: "an own podAntiAffinity and podAntiAffinityTopologyKey", spec: func(s *veltrixv1.VeltrixClusterSpec) {
			s.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term}}}
			s.PodAntiAffinityTopologyKey = zone
		}, want: "affinity.podAntiAffinity replaces the operator's anti-affinity, the only use of podAntiAffinityTopologyKey"},
		{name: "podAntiAffinityTopologyKey with a nodeAffinity", spec: func(s *veltrixv1.VeltrixClusterSpec) {
			s.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{}}
			s.PodAntiAffinityTopologyKey = zone
		}},
		{name: "spread maxSkew 0", spec: func(s *veltrixv1.VeltrixClusterSpec) {
			s.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 0, TopologyKey: zone, WhenUnsatisfiable: corev1.DoNotSchedule}}
		}, want: "topologySpreadConstraints[].maxSkew must be at least 1"},
		{name: "spread whenUnsatisfiable unknown", spec: func(s *veltrixv1.VeltrixClusterSpec) {
			s.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: zone, WhenUnsatisfiable: "Sometimes"}}
		}, want: "topologySpreadConstraints[].whenUnsatisfiable must be DoNotSchedule (a hard rule) or ScheduleAnyway (a preference)"},
		{name: "seventeen spread constraints", spec: func(s *veltrixv1.VeltrixClusterSpec) {
			for range 17 {
				s.TopologySpreadConstraints = append(s.TopologySpreadConstraints, corev1.TopologySpreadConstraint{MaxSkew: 1, TopologyKey: zone, WhenUnsatisfiable: corev1.ScheduleAnyway})
			}
		}, want: "spec.topologySpreadConstraints: Too many: 17: must have at most 16 items"},
		{name: "priority class with capitals", spec: func(s *veltrixv1.VeltrixClusterSpec) { s.PriorityClassName = "High_Priority" },
			want: "priorityClassName must name a PriorityClass: lowercase letters, digits, '-' and '.'"},
		{name: "grace period 0", spec: func(s *veltrixv1.VeltrixClusterSpec) { s.TerminationGracePeriodSeconds = ptr.To[int64](0) },
			want: "terminationGracePeriodSeconds must be between 1 and 86400 seconds: 0 kills the server before it writes its checkpoint"},
		{name: "grace period above a day", spec: func(s *veltrixv1.VeltrixClusterSpec) { s.TerminationGracePeriodSeconds = ptr.To[int64](86401) },
			want: "terminationGracePeriodSeconds must be between 1 and 86400 seconds"},
		{name: "grace period 1", spec: func(s *veltrixv1.VeltrixClusterSpec) { s.TerminationGracePeriodSeconds = ptr.To[int64](1) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := minimal(ns)
			tc.spec(&c.Spec)
			if v := verdict(env.Client.Create(context.Background(), c), tc.want); v != "" {
				t.Error(v)
			}
		})
	}
}
