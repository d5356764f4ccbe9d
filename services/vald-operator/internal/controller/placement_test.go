package controller

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	valdv1 "github.com/opsuite/suite/api/vald/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestPlacementThroughAPIServer (issue 26) runs a release whose components carry every
// placement field through the API server and the reconciler: the ValdRelease holds them
// under the Vald chart's keys, next to the node pools' (a nodeSelector that adds a label,
// tolerations after the pool's, the affinity as written, podPriority, grace periods); the
// pod spec the chart makes of each component's values passes the API server's validation
// (dry run); a nodeSelector that changes a pool label fails WaitingCreateVrs naming both
// values, writes nothing, and the release converges again once it is removed.
func TestPlacementThroughAPIServer(t *testing.T) {
	h := start(t, func(o *Options) { o.Build.NodePoolLabelPrefix = testPoolPrefix })
	vor := h.release("vor", "a=1")
	vor.Spec.Infrastructure[0].NodePools.Agent = &valdv1.NodePool{Replicas: 3, MachineResource: valdv1.MachineResource{CPU: "8", Memory: "32Gi"}}
	zone := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: "topology.kubernetes.io/zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"eu-west-1a", "eu-west-1b"}},
		}}}}}}
	vald := &vor.Spec.VectorEngine.Vald
	vald.Agent.Placement = valdv1.Placement{
		Affinity:                      zone,
		NodeSelector:                  map[string]valdv1.LabelValue{"disktype": "nvme"},
		Tolerations:                   []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "vald", Effect: corev1.TaintEffectNoSchedule}},
		PodPriority:                   &valdv1.PodPriority{Value: ptr.To[int32](2000000)},
		TerminationGracePeriodSeconds: ptr.To[int64](600),
	}
	vald.Gateway.Placement = valdv1.Placement{PodPriority: &valdv1.PodPriority{Enabled: ptr.To(false)}, TerminationGracePeriodSeconds: ptr.To[int64](60),
		Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			TopologyKey: "kubernetes.io/hostname", LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "vald-lb-gateway-a"}},
		}}}}}
	vald.Discoverer.Placement = valdv1.Placement{Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](30)}}}
	vald.Indexer = valdv1.Indexer{IndexSchedule: "0 * * * *", Placement: valdv1.Placement{NodeSelector: map[string]valdv1.LabelValue{"disktype": "ssd"}}}
	h.create(vor)
	h.waitStatus("vor", statusCompleted)

	vrs := h.valdReleases()
	if len(vrs) != 1 {
		t.Fatalf("%d ValdReleases", len(vrs))
	}
	var v map[string]any
	if err := json.Unmarshal(vrs[0].Spec.Raw, &v); err != nil {
		t.Fatal(err)
	}
	poolToleration := func(pool string) map[string]any {
		return map[string]any{"key": testPoolPrefix + "/type", "operator": "Equal", "value": pool, "effect": "NoSchedule"}
	}
	for _, c := range []struct {
		path string
		want any
	}{
		{"agent.nodeSelector", map[string]any{testPoolPrefix + "/namespace": h.ns, testPoolPrefix + "/type": "agent", "disktype": "nvme"}},
		{"agent.tolerations", []any{poolToleration("agent"), map[string]any{"key": "dedicated", "operator": "Equal", "value": "vald", "effect": "NoSchedule"}}},
		{"agent.affinity", map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{"nodeSelectorTerms": []any{
			map[string]any{"matchExpressions": []any{map[string]any{"key": "topology.kubernetes.io/zone", "operator": "In", "values": []any{"eu-west-1a", "eu-west-1b"}}}}}}}}},
		{"agent.podPriority", map[string]any{"value": float64(2000000)}},
		{"agent.terminationGracePeriodSeconds", float64(600)},
		{"gateway.lb.podPriority", map[string]any{"enabled": false}},
		{"gateway.lb.terminationGracePeriodSeconds", float64(60)},
		{"gateway.lb.nodeSelector", map[string]any{testPoolPrefix + "/namespace": h.ns, testPoolPrefix + "/type": "general"}},
		{"discoverer.tolerations", []any{poolToleration("general"), map[string]any{"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": float64(30)}}},
		{"discoverer.podPriority", nil},
		{"manager.index.creator.nodeSelector", map[string]any{testPoolPrefix + "/namespace": h.ns, testPoolPrefix + "/type": "general", "disktype": "ssd"}},
		{"manager.index.creator.podPriority", nil},
	} {
		if got := valueAt(v, c.path); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s = %s, want %s", c.path, show(got), show(c.want))
		}
	}

	// What the chart copies into each component's pod spec is valid Kubernetes.
	for _, path := range []string{"agent", "gateway.lb", "discoverer", "manager.index.creator"} {
		component, _ := valueAt(v, path).(map[string]any)
		podSpec := map[string]any{"containers": []any{map[string]any{"name": "c", "image": "i"}}}
		for _, k := range []string{"nodeSelector", "tolerations", "affinity", "terminationGracePeriodSeconds"} {
			if component[k] != nil {
				podSpec[k] = component[k]
			}
		}
		raw, err := json.Marshal(map[string]any{"metadata": map[string]any{"name": "p", "namespace": h.ns}, "spec": podSpec})
		if err != nil {
			t.Fatal(err)
		}
		pod := &corev1.Pod{}
		if err := json.Unmarshal(raw, pod); err != nil {
			t.Fatalf("%s: not a pod spec: %v", path, err)
		}
		if err := env.Client.Create(context.Background(), pod, client.DryRunAll); err != nil {
			t.Errorf("%s: a pod with the component's placement is refused: %v", path, err)
		}
	}

	// A pool label given another value: Failed, naming both, and nothing written.
	before := vrs[0].ResourceVersion
	h.update("vor", func(v *valdv1.ValdOperatorRelease) {
		v.Spec.VectorEngine.Vald.Agent.NodeSelector = map[string]valdv1.LabelValue{testPoolPrefix + "/type": "general"}
	})
	got := h.waitStatus("vor", "WaitingCreateVrs 1/3 Failed | WaitingClusterCreate=True/Succeeded WaitingCreateVrs=False/Failed Completed=Unknown/Blocked")
	want := `spec.vectorEngine.vald.agent.nodeSelector sets pool.test.opsuite.io/type=general, but the agent pool of infrastructure entry "green" places the pods on nodes labelled pool.test.opsuite.io/type=agent: no node carries both.`
	if msg := condition(got, valdv1.ConditionWaitingCreateVrs).Message; !strings.HasPrefix(msg, want) {
		t.Errorf("message %q, want it to start with %q", msg, want)
	}
	if after := h.valdReleases(); len(after) != 1 || after[0].ResourceVersion != before {
		t.Errorf("the ValdRelease changed while the build failed")
	}
	h.update("vor", func(v *valdv1.ValdOperatorRelease) { v.Spec.VectorEngine.Vald.Agent.NodeSelector = nil })
	h.waitStatus("vor", statusCompleted)
}

// valueAt is the value at a dotted path of nested objects, nil when absent.
func valueAt(v map[string]any, path string) any {
	var cur any = v
	for _, k := range strings.Split(path, ".") {
		m, _ := cur.(map[string]any)
		cur = m[k]
	}
	return cur
}
