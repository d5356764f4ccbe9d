package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// coexistVor is a release with a green entry (active) and a blue one (inactive), each with
// its clusters.
func coexistVor(ns, name string, green, blue []string) string {
	entry := func(role string, active bool, clusters []string) string {
		var b strings.Builder
		fmt.Fprintf(&b, "    - role: %s\n      active: %t\n      clusters:\n", role, active)
		for i, c := range clusters {
			fmt.Fprintf(&b, "        - name: %s\n          id: %s-%d\n", c, role, i)
		}
		b.WriteString("      nodePools:\n        general:\n          replicas: 1\n")
		return b.String()
	}
	spec := entry("green", true, green)
	if len(blue) > 0 {
		spec += entry("blue", false, blue)
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: %[1]s
---
apiVersion: vald.vdaas.org/v1
kind: ValdOperatorRelease
metadata:
  name: %[2]s
  namespace: %[1]s
spec:
  infrastructure:
%[3]s  vectorEngine:
    name: vald
    vald:
      agent:
        ngt:
          dimension: 8
      discoverer:
        kind: DaemonSet
`, ns, name, spec)
}

// TestValdReleasesCoexist runs the Vald Helm Operator's stand-in (deploy/local, limited to
// the test's namespaces), which refuses values the Vald chart's schema refuses and objects
// another release owns, as Helm does. Three releases (two in one namespace, one of the same
// name and clusters in another; DaemonSet discoverers, whose maxUnavailable the chart wants
// as a string) must all be Deployed by it and Completed, and a blue/green switch must
// deploy the blue clusters while the green ones still run, then prune green.
func TestValdReleasesCoexist(t *testing.T) {
	needInstalled(t, "vald-operator")
	ctx := t.Context()
	const nsA, nsB = "e2e-vald-coexist-a", "e2e-vald-coexist-b"

	raw, err := os.ReadFile(filepath.Join(env.root, "deploy", "local", "vald-helm-operator.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sim := strings.Replace(string(raw), "            - name: POD_NAME\n",
		"            - name: WATCH_NAMESPACE\n              value: "+nsA+","+nsB+"\n            - name: POD_NAME\n", 1)
	if sim == string(raw) {
		t.Fatal("deploy/local/vald-helm-operator.yaml: no POD_NAME variable to put WATCH_NAMESPACE before")
	}
	simFile := filepath.Join(t.TempDir(), "vald-helm-operator.yaml")
	if err := os.WriteFile(simFile, []byte(sim), 0o644); err != nil {
		t.Fatal(err)
	}
	// Cleanups run last first: the namespaces go while the stand-in still runs (it
	// uninstalls each release and removes its finalizer), then the stand-in.
	t.Cleanup(func() {
		if out, err := kubectl(context.Background(), "delete", "--ignore-not-found", "--wait=true", "-f", simFile); err != nil {
			t.Logf("removing the stand-in: %v: %s", err, out)
		}
	})
	t.Cleanup(func() {
		bg := context.Background()
		for _, ns := range []string{nsA, nsB} {
			_ = env.client.CoreV1().Namespaces().Delete(bg, ns, metav1.DeleteOptions{})
		}
		_ = poll(bg, t, "the test's namespaces gone", 3*time.Minute, func(ctx context.Context) (bool, error) {
			for _, ns := range []string{nsA, nsB} {
				if _, err := env.client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					return false, nil
				}
			}
			return true, nil
		})
	})
	if out, err := kubectl(ctx, "apply", "-f", simFile); err != nil {
		t.Fatalf("%v: %s", err, out)
	}

	applyManifest(ctx, t, coexistVor(nsA, "search", []string{"g1", "g2"}, []string{"b1", "b2"}))
	applyManifest(ctx, t, coexistVor(nsA, "other", []string{"o1", "o2"}, nil))
	applyManifest(ctx, t, coexistVor(nsB, "search", []string{"g1", "g2"}, nil))

	awaitSimDeployed(ctx, t, nsA, "search", 1, "g1", "g2")
	awaitSimDeployed(ctx, t, nsA, "other", 1, "o1", "o2")
	awaitSimDeployed(ctx, t, nsB, "search", 1, "g1", "g2")

	// The switch: both sides live until blue is deployed.
	patch := `[{"op":"replace","path":"/spec/infrastructure/0/active","value":false},{"op":"replace","path":"/spec/infrastructure/1/active","value":true}]`
	if _, err := env.dyn.Resource(vorGVR).Namespace(nsA).Patch(ctx, "search", types.JSONPatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	bothDeployed := false
	err = poll(ctx, t, "blue deployed by the stand-in next to green", 3*time.Minute, func(ctx context.Context) (bool, error) {
		vrs, err := vorValdReleases(ctx, nsA, "search")
		if err != nil {
			return false, err
		}
		deployed := map[string]bool{}
		for i := range vrs {
			if failed := helmFailure(&vrs[i]); failed != "" {
				return false, fmt.Errorf("ValdRelease %s failed: %s", vrs[i].GetName(), failed)
			}
			deployed[vrs[i].GetName()] = conditionTrue(&vrs[i], "Deployed")
		}
		all := true
		for _, c := range []string{"g1", "g2", "b1", "b2"} {
			all = all && deployed[nsA+"-"+c]
		}
		bothDeployed = bothDeployed || all
		v, err := readVor(ctx, nsA, "search")
		if err != nil {
			return false, err
		}
		return v.isTrue("Switchover") && v.isTrue("Completed") && v.observed == 2, nil
	})
	if err != nil {
		v, _ := readVor(ctx, nsA, "search")
		diagnose(ctx, t, serviceByName("vald-operator"))
		t.Fatalf("%v; vor: %s", err, v)
	}
	if !bothDeployed {
		t.Log("never saw green and blue both Deployed at one poll (the switch may have been quicker than a poll)")
	}
	awaitSimDeployed(ctx, t, nsA, "search", 2, "b1", "b2")
}

// helmFailure is the message of ReleaseFailed=True (an install or upgrade Helm refused)
// or Irreconcilable=True (an upgrade's candidate release Helm refused), or "".
func helmFailure(vr *unstructured.Unstructured) string {
	conds, _, _ := unstructured.NestedSlice(vr.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if (m["type"] == "ReleaseFailed" || m["type"] == "Irreconcilable") && m["status"] == "True" {
			msg, _ := m["message"].(string)
			return msg
		}
	}
	return ""
}

// awaitSimDeployed waits until the release's ValdReleases are the clusters named, each
// Deployed by the stand-in (its message) without a failure, and the release Completed at
// generation gen. A failure reported by the stand-in (Helm's refusal) ends the wait.
func awaitSimDeployed(ctx context.Context, t *testing.T, ns, name string, gen int64, clusters ...string) {
	t.Helper()
	want := make([]string, len(clusters))
	for i, c := range clusters {
		want[i] = ns + "-" + c
	}
	var v vorView
	var have []string
	err := poll(ctx, t, fmt.Sprintf("vor %s/%s Completed at generation %d, %q deployed by the stand-in", ns, name, gen, want), 3*time.Minute, func(ctx context.Context) (bool, error) {
		vrs, err := vorValdReleases(ctx, ns, name)
		if err != nil {
			return false, err
		}
		have = have[:0]
		deployed := true
		for i := range vrs {
			have = append(have, vrs[i].GetName())
			if failed := helmFailure(&vrs[i]); failed != "" {
				return false, fmt.Errorf("ValdRelease %s failed: %s", vrs[i].GetName(), failed)
			}
			deployed = deployed && simDeployed(&vrs[i])
		}
		slices.Sort(have)
		if v, err = readVor(ctx, ns, name); err != nil {
			return false, err
		}
		return deployed && slices.Equal(have, want) && v.isTrue("Completed") && v.state == "Ready" && v.observed == gen, nil
	})
	if err != nil {
		diagnose(ctx, t, serviceByName("vald-operator"))
		t.Fatalf("%v; ValdReleases %q; vor: %s", err, have, v)
	}
}

// simDeployed: Deployed=True written by the stand-in (not by a test's markDeployed).
func simDeployed(vr *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(vr.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Deployed" && m["status"] == "True" {
			msg, _ := m["message"].(string)
			return strings.HasPrefix(msg, "vald-helm-sim:")
		}
	}
	return false
}
