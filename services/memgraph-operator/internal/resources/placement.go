package resources

import (
	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// HostnameTopologyKey is the node label that tells one host from another.
const HostnameTopologyKey = "kubernetes.io/hostname"

// SpreadWeight is the weight of the default preference for distinct hosts: the highest
// a preference can have, so it outweighs the scheduler's scoring of free resources.
const SpreadWeight int32 = 100

// Placement is where a role's pods may run and how they stop: the pod spec's scheduling
// fields and grace period.
type Placement struct {
	Affinity                      *corev1.Affinity
	NodeSelector                  map[string]string
	Tolerations                   []corev1.Toleration
	TopologySpreadConstraints     []corev1.TopologySpreadConstraint
	PriorityClassName             string
	TerminationGracePeriodSeconds *int64
}

// placement is the role's Placement from the spec. A role whose affinity sets no
// podAntiAffinity gets the default one: prefer a node that runs no other member of the
// role, so a MAIN and its SYNC replica, or two Raft members, do not share a node while
// the cluster has nodes enough (preferred, not required, so a small cluster still runs).
// A spread constraint without a labelSelector gets the role's selector.
func placement(c *memgraphv1.MemgraphCluster, r Role) Placement {
	affinity, nodeSelector := c.Spec.Affinity.Data, c.Spec.NodeSelector.Data
	tolerations, spread := c.Spec.Tolerations.Data, c.Spec.TopologySpreadConstraints.Data
	priority, grace := c.Spec.PriorityClassName.Data, c.Spec.TerminationGracePeriodSeconds.Data
	defGrace := memgraphv1.DefaultDataTerminationGracePeriodSeconds
	if r == RoleCoordinator {
		affinity, nodeSelector = c.Spec.Affinity.Coordinators, c.Spec.NodeSelector.Coordinators
		tolerations, spread = c.Spec.Tolerations.Coordinators, c.Spec.TopologySpreadConstraints.Coordinators
		priority, grace = c.Spec.PriorityClassName.Coordinators, c.Spec.TerminationGracePeriodSeconds.Coordinators
		defGrace = memgraphv1.DefaultCoordinatorTerminationGracePeriodSeconds
	}
	p := Placement{
		Affinity:                      &corev1.Affinity{},
		PriorityClassName:             string(priority),
		TerminationGracePeriodSeconds: ptr.To(defGrace),
	}
	if affinity != nil {
		p.Affinity = affinity.DeepCopy()
	}
	if p.Affinity.PodAntiAffinity == nil {
		p.Affinity.PodAntiAffinity = &corev1.PodAntiAffinity{
			PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
				Weight: SpreadWeight,
				PodAffinityTerm: corev1.PodAffinityTerm{
					LabelSelector: &metav1.LabelSelector{MatchLabels: Selector(c.Name, r)},
					TopologyKey:   HostnameTopologyKey,
				},
			}},
		}
	}
	if grace != nil {
		p.TerminationGracePeriodSeconds = ptr.To(*grace)
	}
	if len(nodeSelector) > 0 {
		p.NodeSelector = make(map[string]string, len(nodeSelector))
		for k, v := range nodeSelector {
			p.NodeSelector[k] = string(v)
		}
	}
	for _, t := range tolerations {
		p.Tolerations = append(p.Tolerations, *t.DeepCopy())
	}
	for _, t := range spread {
		t := *t.DeepCopy()
		if t.LabelSelector == nil {
			t.LabelSelector = &metav1.LabelSelector{MatchLabels: Selector(c.Name, r)}
		}
		p.TopologySpreadConstraints = append(p.TopologySpreadConstraints, t)
	}
	return p
}
