package controller

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	valdv1 "github.com/opsuite/suite/api/vald/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestChartSettingsThroughAPIServer runs the settings of issue 22 item 4 through the API
// server and the reconciler: the operator's cluster-wide template and ingress annotations,
// the spread constraints (an empty list survives the round trip and turns spreading off),
// gateway replicas from the agent count, the index jobs' suspend, schedule and placement,
// and an agent memory limit that exists only while the release sets one.
func TestChartSettingsThroughAPIServer(t *testing.T) {
	h := start(t, func(o *Options) {
		o.Build.DefaultValues = map[string]any{"defaults": map[string]any{"image": map[string]any{"tag": "v1.8.0"}}}
		o.Build.GatewayIngressAnnotations = map[string]string{"team": "platform", "nginx.ingress.kubernetes.io/backend-protocol": "GRPC"}
	})
	vor := h.release("vor", "a=1")
	infra := &vor.Spec.Infrastructure[0]
	infra.NodePools.General.MachineResource = valdv1.MachineResource{CPU: "4", Memory: "16Gi"}
	infra.NodePools.Agent = &valdv1.NodePool{Replicas: 9, MachineResource: valdv1.MachineResource{CPU: "8", Memory: "32Gi"}}
	vald := &vor.Spec.VectorEngine.Vald
	vald.Indexer = valdv1.Indexer{IndexSchedule: "0 * * * *", IndexSuspend: true, SaveSchedule: "@every 6h"}
	vald.Gateway = valdv1.Gateway{TopologySpreadConstraints: &[]valdv1.TopologySpread{},
		Ingress: &valdv1.Ingress{Enabled: true, Host: "vald.example.com", Annotations: map[string]string{"team": "search"}}}
	vald.Agent.TopologySpreadConstraints = &[]valdv1.TopologySpread{{TopologyKey: "topology.kubernetes.io/zone"}}
	h.create(vor)
	h.waitStatus("vor", statusCompleted)

	values := func() map[string]any {
		t.Helper()
		vrs := h.valdReleases()
		if len(vrs) != 1 {
			t.Fatalf("%d ValdReleases", len(vrs))
		}
		var v map[string]any
		if err := json.Unmarshal(vrs[0].Spec.Raw, &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	at := func(v map[string]any, path ...string) any {
		var cur any = v
		for _, k := range path {
			m, _ := cur.(map[string]any)
			cur = m[k]
		}
		return cur
	}
	v := values()
	name := h.ns + "-a"
	checks := []struct {
		path []string
		want any
	}{
		{[]string{"defaults", "image", "tag"}, "v1.8.0"},
		{[]string{"agent", "resources", "requests", "memory"}, "24Gi"},
		{[]string{"agent", "resources", "limits"}, nil},
		{[]string{"agent", "topologySpreadConstraints"}, []any{map[string]any{
			"maxSkew": float64(1), "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule", "nodeTaintsPolicy": "Honor",
			"labelSelector": map[string]any{"matchLabels": map[string]any{"app": "vald-agent-a", "app.kubernetes.io/instance": name}},
		}}},
		{[]string{"gateway", "lb", "topologySpreadConstraints"}, nil},
		{[]string{"discoverer", "topologySpreadConstraints", "0", "whenUnsatisfiable"}, nil}, // lists are not walked by at
		{[]string{"gateway", "lb", "minReplicas"}, float64(5)},
		{[]string{"gateway", "lb", "maxReplicas"}, float64(9)},
		{[]string{"gateway", "lb", "ingress", "annotations"}, map[string]any{"team": "search", "nginx.ingress.kubernetes.io/backend-protocol": "GRPC"}},
		{[]string{"manager", "index", "creator", "suspend"}, true},
		{[]string{"manager", "index", "creator", "schedule"}, "0 * * * *"},
		{[]string{"manager", "index", "saver", "suspend"}, false},
		{[]string{"manager", "index", "saver", "schedule"}, "@every 6h"},
		{[]string{"manager", "index", "saver", "nodeSelector"}, map[string]any{"namespace": h.ns, "type": "general"}},
	}
	for _, c := range checks {
		if got := at(v, c.path...); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%v = %s, want %s", c.path, show(got), show(c.want))
		}
	}
	if tsc, _ := at(v, "discoverer", "topologySpreadConstraints").([]any); len(tsc) != 1 {
		t.Errorf("discoverer spread %s, want the default one", show(tsc))
	}

	// What the chart copies into the pods' spec is valid Kubernetes: a pod carrying each
	// component's spread, placement and the agent's resources passes the API server's
	// validation (dry run), its labels those the chart gives (which the selectors match).
	for _, c := range []struct{ path, name string }{{"agent", "vald-agent-a"}, {"discoverer", "vald-discoverer-a"}, {"manager.index.creator", "vald-index-creation-a"}} {
		component, _ := at(v, strings.Split(c.path, ".")...).(map[string]any)
		podSpec := map[string]any{"containers": []any{map[string]any{"name": "c", "image": "i", "resources": component["resources"]}}}
		for _, k := range []string{"topologySpreadConstraints", "nodeSelector", "tolerations"} {
			if component[k] != nil {
				podSpec[k] = component[k]
			}
		}
		raw, err := json.Marshal(map[string]any{"metadata": map[string]any{"name": "p", "namespace": h.ns,
			"labels": map[string]any{"app": c.name, "app.kubernetes.io/instance": name}}, "spec": podSpec})
		if err != nil {
			t.Fatal(err)
		}
		pod := &corev1.Pod{}
		if err := json.Unmarshal(raw, pod); err != nil {
			t.Fatalf("%s: not a pod spec: %v", c.path, err)
		}
		if err := env.Client.Create(context.Background(), pod, client.DryRunAll); err != nil {
			t.Errorf("%s: a pod with the component's values is refused: %v", c.path, err)
		}
	}

	// A limit the release sets is written; removed from the release, it goes.
	h.update("vor", func(v *valdv1.ValdOperatorRelease) { v.Spec.VectorEngine.Vald.Agent.MemoryLimit = "30Gi" })
	h.waitFor("the agents' memory limit written", func() bool {
		return reflect.DeepEqual(at(values(), "agent", "resources", "limits"), map[string]any{"memory": "30Gi"})
	})
	h.update("vor", func(v *valdv1.ValdOperatorRelease) {
		v.Spec.VectorEngine.Vald.Agent.MemoryLimit = ""
		v.Spec.VectorEngine.Vald.Gateway.MinReplicas = ptr.To[int32](12)
	})
	h.waitFor("the limit gone, the gateway's minReplicas the release's", func() bool {
		v := values()
		return at(v, "agent", "resources", "limits") == nil && at(v, "gateway", "lb", "minReplicas") == float64(12) && at(v, "gateway", "lb", "maxReplicas") == float64(12)
	})
	h.waitStatus("vor", statusCompleted)

	// A limit below what an agent requests fails the phase, naming both.
	h.update("vor", func(v *valdv1.ValdOperatorRelease) { v.Spec.VectorEngine.Vald.Agent.MemoryLimit = "16Gi" })
	got := h.waitStatus("vor", "WaitingCreateVrs 1/3 Failed | WaitingClusterCreate=True/Succeeded WaitingCreateVrs=False/Failed Completed=Unknown/Blocked")
	if msg := condition(got, "WaitingCreateVrs").Message; msg != `spec.vectorEngine.vald.agent.memoryLimit 16Gi is below the 24Gi an agent of infrastructure entry "green" requests (its node's memory × 0.75): raise the limit, remove it, or lower --agent-resource-fraction.` {
		t.Errorf("message %q", msg)
	}
}

func show(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
