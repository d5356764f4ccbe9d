package controller_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	veltrixv1 "github.com/opsuite/suite/api/veltrix/v1alpha1"
	"github.com/opsuite/suite/services/veltrix-operator/internal/resources"
	"github.com/opsuite/suite/shared/testenv"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestPlacementPicksNodes: a cluster's placement fields reach its StatefulSet, and the
// nodes whose disks are prepared are those its members can be scheduled on. Of six nodes,
// node-p0d (first by name, zone d) is excluded by the required node affinity and never
// asked; three are in zone a, one each in b and c. With a DoNotSchedule zone spread the
// three members' disks are prepared in zones a, b and c, not on the first three nodes by
// name, which would put two members in zone a and leave the third member unschedulable.
func TestPlacementPicksNodes(t *testing.T) {
	ctx := context.Background()
	ns := testenv.NewNamespace(t, env.Client, "vx")
	zones := map[string]string{"node-p0d": "d", "node-pa1": "a", "node-pa2": "a", "node-pa3": "a", "node-pb": "b", "node-pc": "c"}
	var names []string
	for n := range zones {
		names = append(names, n)
	}
	slices.Sort(names)
	createNodes(t, names...)
	for name, zone := range zones {
		var n corev1.Node
		if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, &n); err != nil {
			t.Fatal(err)
		}
		n.Labels["placement-test"] = "true"
		n.Labels["topology.kubernetes.io/zone"] = zone
		if zone == "d" {
			n.Labels["disk-gen"] = "old"
		}
		if err := env.Client.Update(ctx, &n); err != nil {
			t.Fatal(err)
		}
	}
	f := startFleet(t, operatorTokens(t, "placement", true), 1<<30, names[1:], names[:1])
	startController(t, f, ns)
	affinity := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "disk-gen", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"old"}}}}},
	}}}
	spread := []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: corev1.DoNotSchedule}}
	c := newCluster(t, ns, func(c *veltrixv1.VeltrixCluster) {
		c.Spec.Size, c.Spec.ReplicationFactor = 3, 2
		c.Spec.NodeSelector = map[string]string{"placement-test": "true"}
		c.Spec.Affinity = affinity
		c.Spec.TopologySpreadConstraints = spread
		c.Spec.PriorityClassName = "veltrix-critical"
		c.Spec.TerminationGracePeriodSeconds = ptr.To[int64](900)
		c.Spec.DiskSelector.NVMeOnly = ptr.To(false)
		c.Spec.IndexMapFallback = true
	})
	condition(t, c, veltrixv1.ConditionDisksPrepared, metav1.ConditionTrue, veltrixv1.ReasonPrepared)
	var live veltrixv1.VeltrixCluster
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(c), &live); err != nil {
		t.Fatal(err)
	}
	if want := []string{"node-pa1", "node-pb", "node-pc"}; !slices.Equal(live.Status.Nodes, want) {
		t.Errorf("status.nodes %v, want %v: one node per zone", live.Status.Nodes, want)
	}
	for _, n := range []string{"node-p0d", "node-pa2", "node-pa3"} {
		if k := f.calls.count(n); k != 0 {
			t.Errorf("%s was asked to prepare disks %d times", n, k)
		}
	}

	var sts appsv1.StatefulSet
	testenv.Eventually(t, 30*time.Second, "StatefulSet", func() (bool, string) {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "vx"}, &sts)
		return err == nil, fmt.Sprint(err)
	})
	p := sts.Spec.Template.Spec
	if !equality.Semantic.DeepEqual(p.Affinity.NodeAffinity, affinity.NodeAffinity) {
		t.Errorf("node affinity %+v, want the spec's", p.Affinity.NodeAffinity)
	}
	if anti := p.Affinity.PodAntiAffinity; anti == nil || len(anti.RequiredDuringSchedulingIgnoredDuringExecution) != 1 ||
		anti.RequiredDuringSchedulingIgnoredDuringExecution[0].TopologyKey != veltrixv1.DefaultPodAntiAffinityTopologyKey {
		t.Errorf("pod anti-affinity %+v, want the default, one member per host", anti)
	}
	if s := p.TopologySpreadConstraints; len(s) != 1 || s[0].TopologyKey != spread[0].TopologyKey || s[0].LabelSelector == nil ||
		!equality.Semantic.DeepEqual(s[0].LabelSelector.MatchLabels, resources.SelectorLabels(c)) {
		t.Errorf("spread constraints %+v, want the zone spread over the members", s)
	}
	if p.PriorityClassName != "veltrix-critical" || p.TerminationGracePeriodSeconds == nil || *p.TerminationGracePeriodSeconds != 900 {
		t.Errorf("priority class %q, grace period %v", p.PriorityClassName, p.TerminationGracePeriodSeconds)
	}
}
