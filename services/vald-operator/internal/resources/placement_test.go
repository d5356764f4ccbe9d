package resources

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	valdv1 "github.com/opsuite/suite/api/vald/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// required is a required node affinity of the terms given, each one expression.
func required(exprs ...corev1.NodeSelectorRequirement) *corev1.Affinity {
	terms := make([]corev1.NodeSelectorTerm, len(exprs))
	for i, e := range exprs {
		terms[i] = corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{e}}
	}
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms}}}
}

func expr(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
}

// TestPlacementKeepsThePool: a release's placement never drops the node pool's. The
// nodeSelector's labels join the pool's, a pool key with the pool's own value is accepted
// and one with another value refused, naming both; the tolerations join the pool's (once);
// a required node affinity is refused only when each of its terms contradicts the labels
// the pods require (the pool's or the release's), naming every term; one term a pool node
// can match is enough. Without a node pool the fields are written as they are.
func TestPlacementKeepsThePool(t *testing.T) {
	const (
		typeKey = "pool.opsuite.io/type"
		nsKey   = "pool.opsuite.io/namespace"
	)
	cases := []struct {
		name    string
		mutate  func(*valdv1.ValdOperatorRelease)
		wantErr string
		// check reads the first ValdRelease's values.
		check func(t *testing.T, values map[string]any)
	}{
		{
			name: "nodeSelector joins the pool's",
			mutate: func(v *valdv1.ValdOperatorRelease) {
				v.Spec.VectorEngine.Vald.Agent.NodeSelector = map[string]valdv1.LabelValue{"disktype": "nvme", typeKey: "agent"}
			},
			check: func(t *testing.T, values map[string]any) {
				want := map[string]any{nsKey: "search", typeKey: "agent", "disktype": "nvme"}
				if got := at(values, "agent", "nodeSelector"); !reflect.DeepEqual(got, want) {
					t.Errorf("agent.nodeSelector %v, want %v", got, want)
				}
			},
		},
		{
			name: "nodeSelector changes a pool label",
			mutate: func(v *valdv1.ValdOperatorRelease) {
				v.Spec.VectorEngine.Vald.Agent.NodeSelector = map[string]valdv1.LabelValue{typeKey: "general"}
			},
			wantErr: `spec.vectorEngine.vald.agent.nodeSelector sets pool.opsuite.io/type=general, but the agent pool of infrastructure entry "green" places the pods on nodes labelled pool.opsuite.io/type=agent: no node carries both.`,
		},
		{
			name: "nodeSelector of the gateway names another namespace",
			mutate: func(v *valdv1.ValdOperatorRelease) {
				v.Spec.VectorEngine.Vald.Gateway.NodeSelector = map[string]valdv1.LabelValue{nsKey: "other"}
			},
			wantErr: `spec.vectorEngine.vald.gateway.nodeSelector sets pool.opsuite.io/namespace=other, but the general pool of infrastructure entry "green" places the pods on nodes labelled pool.opsuite.io/namespace=search`,
		},
		{
			name: "tolerations join the pool's once",
			mutate: func(v *valdv1.ValdOperatorRelease) {
				v.Spec.VectorEngine.Vald.Discoverer.Tolerations = []corev1.Toleration{
					{Key: typeKey, Operator: corev1.TolerationOpEqual, Value: "general", Effect: corev1.TaintEffectNoSchedule},
					{Key: "dedicated", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](30)},
				}
			},
			check: func(t *testing.T, values map[string]any) {
				want := []any{
					map[string]any{"key": typeKey, "operator": "Equal", "value": "general", "effect": "NoSchedule"},
					map[string]any{"key": "dedicated", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": float64(30)},
				}
				if got := at(values, "discoverer", "tolerations"); !reflect.DeepEqual(got, want) {
					t.Errorf("discoverer.tolerations %v, want %v", got, want)
				}
			},
		},
		{
			name: "required node affinity excludes the pool",
			mutate: func(v *valdv1.ValdOperatorRelease) {
				v.Spec.VectorEngine.Vald.Agent.Affinity = required(expr(typeKey, corev1.NodeSelectorOpNotIn, "agent"), expr(typeKey, corev1.NodeSelectorOpDoesNotExist))
			},
			wantErr: `spec.vectorEngine.vald.agent.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution matches no node the pods may run on, so they would never be scheduled: term 1 wants pool.opsuite.io/type NotIn [agent], while the agent pool of infrastructure entry "green" requires pool.opsuite.io/type=agent; term 2 wants pool.opsuite.io/type DoesNotExist [], while the agent pool of infrastructure entry "green" requires pool.opsuite.io/type=agent.`,
		},
		{
			name: "required node affinity contradicts the release's nodeSelector",
			mutate: func(v *valdv1.ValdOperatorRelease) {
				v.Spec.VectorEngine.Vald.Indexer.NodeSelector = map[string]valdv1.LabelValue{"rack": "7"}
				v.Spec.VectorEngine.Vald.Indexer.Affinity = required(expr("rack", corev1.NodeSelectorOpGt, "9"))
			},
			wantErr: `spec.vectorEngine.vald.indexer.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution matches no node the pods may run on, so they would never be scheduled: term 1 wants rack Gt [9], while the nodeSelector requires rack=7.`,
		},
		{
			name: "one term of the required node affinity fits the pool",
			mutate: func(v *valdv1.ValdOperatorRelease) {
				v.Spec.VectorEngine.Vald.Agent.Affinity = required(expr(typeKey, corev1.NodeSelectorOpIn, "general"), expr(typeKey, corev1.NodeSelectorOpExists), expr("zone", corev1.NodeSelectorOpIn, "a"))
			},
			check: func(t *testing.T, values map[string]any) {
				terms, _ := at(values, "agent", "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms").([]any)
				if len(terms) != 3 {
					t.Errorf("agent's required terms %v, want the release's three", terms)
				}
				if sel := at(values, "agent", "nodeSelector"); !reflect.DeepEqual(sel, map[string]any{nsKey: "search", typeKey: "agent"}) {
					t.Errorf("agent.nodeSelector %v: the pool's labels must stay", sel)
				}
			},
		},
		{
			name: "priority and grace periods",
			mutate: func(v *valdv1.ValdOperatorRelease) {
				v.Spec.VectorEngine.Vald.Agent.PodPriority = &valdv1.PodPriority{Value: ptr.To[int32](1000000000)}
				v.Spec.VectorEngine.Vald.Agent.TerminationGracePeriodSeconds = ptr.To[int64](900)
				v.Spec.VectorEngine.Vald.Gateway.PodPriority = &valdv1.PodPriority{Enabled: ptr.To(false)}
				v.Spec.VectorEngine.Vald.Indexer.TerminationGracePeriodSeconds = ptr.To[int64](45)
			},
			check: func(t *testing.T, values map[string]any) {
				for _, c := range []struct {
					path []string
					want any
				}{
					{[]string{"agent", "podPriority"}, map[string]any{"value": float64(1000000000)}},
					{[]string{"agent", "terminationGracePeriodSeconds"}, float64(900)},
					{[]string{"gateway", "lb", "podPriority"}, map[string]any{"enabled": false}},
					{[]string{"manager", "index", "terminationGracePeriodSeconds"}, float64(45)},
					{[]string{"discoverer", "podPriority"}, nil},
					{[]string{"discoverer", "terminationGracePeriodSeconds"}, nil},
				} {
					if got := at(values, c.path...); !reflect.DeepEqual(got, c.want) {
						t.Errorf("%s = %v, want %v", strings.Join(c.path, "."), got, c.want)
					}
				}
			},
		},
		{
			name: "no node pool: written as they are",
			mutate: func(v *valdv1.ValdOperatorRelease) {
				v.Spec.Infrastructure[0].NodePools = valdv1.NodePools{}
				v.Spec.VectorEngine.Vald.Agent.NodeSelector = map[string]valdv1.LabelValue{typeKey: "general"}
				v.Spec.VectorEngine.Vald.Agent.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
				v.Spec.VectorEngine.Vald.Agent.Affinity = required(expr(typeKey, corev1.NodeSelectorOpIn, "general"))
			},
			check: func(t *testing.T, values map[string]any) {
				if got := at(values, "agent", "nodeSelector"); !reflect.DeepEqual(got, map[string]any{typeKey: "general"}) {
					t.Errorf("agent.nodeSelector %v", got)
				}
				if got := at(values, "agent", "tolerations"); !reflect.DeepEqual(got, []any{map[string]any{"operator": "Exists"}}) {
					t.Errorf("agent.tolerations %v", got)
				}
				if at(values, "agent", "affinity", "nodeAffinity") == nil {
					t.Error("agent.affinity lost")
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			vor := loadRelease(t, "full")
			vor.Spec.VectorEngine.Vald.Overlay = nil
			tc.mutate(vor)
			vrs, err := DesiredValdReleases(Input{Release: vor}, testConfig())
			if tc.wantErr != "" {
				var berr *Error
				if !errors.As(err, &berr) || !strings.Contains(berr.Message, tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, specOf(t, vrs[0]))
		})
	}
}

// TestPlacementUnsetChangesNothing: a release without placement fields builds exactly what
// it built before them (the golden files of the older cases are unchanged), so upgrading
// the operator rolls no pod; and an empty affinity writes no key.
func TestPlacementUnsetChangesNothing(t *testing.T) {
	vor := loadRelease(t, "full")
	before, err := DesiredValdReleases(Input{Release: vor}, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	vor.Spec.VectorEngine.Vald.Agent.Affinity = &corev1.Affinity{}
	vor.Spec.VectorEngine.Vald.Agent.NodeSelector = map[string]valdv1.LabelValue{}
	after, err := DesiredValdReleases(Input{Release: vor}, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	if string(before[0].Spec.Raw) != string(after[0].Spec.Raw) {
		t.Errorf("empty placement fields changed the values:\n%s\n%s", before[0].Spec.Raw, after[0].Spec.Raw)
	}
}

// at is the value at a path of nested objects, nil when absent.
func at(values map[string]any, path ...string) any {
	var cur any = values
	for _, k := range path {
		m, _ := cur.(map[string]any)
		cur = m[k]
	}
	return cur
}
