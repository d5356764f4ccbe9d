package e2e

import (
	"context"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestValdPlacement runs the README's Vald Placement recipe as written (but for
// KUBECONFIG) with the chart as installed and the Vald Helm Operator's stand-in, which
// checks the values against the Vald chart's declared types as Helm would: the release's
// ValdRelease carries the agents' nodeSelector next to the agent pool's labels, their
// toleration after the pool's, their affinity, priority and grace period, the gateway's
// disabled class and its grace period; the stand-in deploys it (no key of the wrong type);
// and a nodeSelector that contradicts the agent pool fails WaitingCreateVrs, naming both
// values, without touching the deployed ValdRelease.
func TestValdPlacement(t *testing.T) {
	needRunner(t, "the Vald Helm Operator's stand-in runs as bin/vald-helm-sim")
	needInstalled(t, "vald-operator")
	ctx := scenarioContext(t)
	const ns, name, vr = "vald-placement", "placed", "vald-placement-tokyo"
	sim := filepath.Join(env.root, "deploy", "local", "vald-helm-operator.yaml")
	_, simErr := env.client.CoreV1().Namespaces().Get(ctx, "vald-helm-operator", metav1.GetOptions{})
	simWasThere := simErr == nil
	// Cleanups run last first: the namespace goes while the stand-in still runs (it
	// uninstalls each ValdRelease and removes its finalizer), then the stand-in.
	t.Cleanup(func() {
		if simWasThere {
			return
		}
		if out, err := kubectl(context.Background(), "delete", "--ignore-not-found", "--wait=true", "-f", sim); err != nil {
			t.Logf("removing the stand-in: %v: %s", err, out)
		}
	})
	t.Cleanup(func() {
		bg := context.Background()
		_ = env.client.CoreV1().Namespaces().Delete(bg, ns, metav1.DeleteOptions{})
		_ = poll(bg, t, "namespace "+ns+" gone", 3*time.Minute, func(ctx context.Context) (bool, error) {
			_, err := env.client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
	})

	out, err := runReadmeRecipe(t, "Vald", "\n### Placement\n")
	t.Logf("the recipe printed:\n%s", out)
	if err != nil {
		v, _ := readVor(ctx, ns, name)
		diagnose(ctx, t, serviceByName("vald-operator"))
		t.Fatalf("the recipe failed: %v\nvor: %s", err, v)
	}

	u, err := env.dyn.Resource(vrGVR).Namespace(ns).Get(ctx, vr, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !simDeployed(u) || helmFailure(u) != "" {
		t.Errorf("ValdRelease %s not deployed by the stand-in: %v", vr, u.Object["status"])
	}
	for _, c := range []struct {
		path []string
		want any
	}{
		{[]string{"agent", "nodeSelector"}, map[string]any{"namespace": ns, "type": "agent", "topology.kubernetes.io/region": "eu-west-1"}},
		{[]string{"agent", "tolerations"}, []any{
			map[string]any{"key": "type", "operator": "Equal", "value": "agent", "effect": "NoSchedule"},
			map[string]any{"key": "dedicated", "operator": "Equal", "value": "vald", "effect": "NoSchedule"},
		}},
		{[]string{"agent", "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms"}, []any{
			map[string]any{"matchExpressions": []any{map[string]any{"key": "topology.kubernetes.io/zone", "operator": "In", "values": []any{"eu-west-1a", "eu-west-1c"}}}},
		}},
		{[]string{"agent", "podPriority"}, map[string]any{"value": int64(2000000)}},
		{[]string{"agent", "terminationGracePeriodSeconds"}, int64(600)},
		{[]string{"gateway", "lb", "podPriority"}, map[string]any{"enabled": false}},
		{[]string{"gateway", "lb", "terminationGracePeriodSeconds"}, int64(60)},
		{[]string{"gateway", "lb", "nodeSelector"}, map[string]any{"namespace": ns, "type": "general"}},
	} {
		got, _, _ := unstructured.NestedFieldNoCopy(u.Object, append([]string{"spec"}, c.path...)...)
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("ValdRelease spec.%s = %#v, want %#v", strings.Join(c.path, "."), got, c.want)
		}
	}

	v, err := readVor(ctx, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	failed := v.conditions["WaitingCreateVrs"]
	want := `spec.vectorEngine.vald.agent.nodeSelector sets type=general, but the agent pool of infrastructure entry "green" places the pods on nodes labelled type=agent: no node carries both.`
	if failed.Status != metav1.ConditionFalse || !strings.HasPrefix(failed.Message, want) || !strings.Contains(out, want) {
		t.Errorf("after the contradicting nodeSelector: %s; want WaitingCreateVrs False with %q, printed by the recipe", v, want)
	}
	// The failed build wrote nothing: the ValdRelease still carries generation 1's values.
	if gen := u.GetLabels()["managed-generation"]; v.generation != 2 || gen != "1" {
		t.Errorf("ValdRelease %s at managed-generation %q with the release at %d: want it left at 1 while generation 2 fails", vr, gen, v.generation)
	}
}
