package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// vxZoneLabel is the zone label the local cluster's nodes carry (three zones, dealt
// round-robin in node order).
const vxZoneLabel = "topology.kubernetes.io/zone"

// TestVeltrixPlacement runs the README's VeltrixDB Placement recipe as written (but for
// KUBECONFIG) on the local cluster, where the real kube-scheduler places the members: a
// cluster "zoned" with a hard zone spread (maxSkew 1 on topology.kubernetes.io/zone), a
// preference for the agent pool's nodes, a PriorityClass and a grace period. The nodes are
// dealt into three zones in node order, so the first three nodes by name (and the two agent
// nodes with the first general one) hold two of one zone: prepared there, the third member
// would wait for ever. The operator must prepare one node per zone; the scheduler then
// puts each member in a zone of its own, on a prepared node, and every pod carries the
// class (its priority resolved by the API server's Priority admission) and the grace period.
func TestVeltrixPlacement(t *testing.T) {
	needRunner(t, "ghcr.io/veltrixdb/veltrixdb pods run as bin/veltrix-sim processes, the node agents use loop devices")
	needInstalled(t, "node-agent", "veltrix-operator")
	ctx := scenarioContext(t)
	if err := vxUseAgentsPVRoot(ctx); err != nil {
		t.Fatal(err)
	}
	const (
		name     = "zoned"
		class    = "veltrix-critical"
		priority = 100000
		grace    = 300
	)
	nodes, err := env.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	zoneOf := map[string]string{}
	zones := map[string]bool{}
	for _, n := range nodes.Items {
		zoneOf[n.Name] = n.Labels[vxZoneLabel]
		if z := n.Labels[vxZoneLabel]; z != "" {
			zones[z] = true
		}
	}
	if len(zones) < 3 {
		t.Fatalf("the local cluster's %d nodes are in %d zones; a spread over 3 zones needs 3", len(nodes.Items), len(zones))
	}
	t.Cleanup(func() {
		bg := context.Background()
		for _, args := range [][]string{
			{"delete", "vc", name, "-n", vxNamespace, "--wait=true", "--timeout=3m", "--ignore-not-found"},
			{"delete", "priorityclass", class, "--ignore-not-found"},
		} {
			if out, err := kubectl(bg, args...); err != nil {
				t.Logf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
			}
		}
	})

	out, err := runReadmeRecipe(t, "VeltrixDB", "\n### Placement\n")
	t.Logf("the recipe printed:\n%s", out)
	if err != nil {
		podsOut, _ := kubectl(ctx, "get", "pods,pvc", "-o", "wide", "-n", vxNamespace, "-l", "app.kubernetes.io/instance="+name)
		cond, _ := kubectl(ctx, "get", "vc", name, "-n", vxNamespace, "-o", `jsonpath={range .status.conditions[*]}{.type}={.status} {.reason}: {.message}{"\n"}{end}`)
		t.Fatalf("the recipe failed: %v\n%s\n%s", err, podsOut, cond)
	}
	c, err := vxClusterNamed(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	pods, err := env.client.CoreV1().Pods(vxNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + name})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 3 {
		t.Fatalf("%d pods, want 3", len(pods.Items))
	}
	byZone := map[string][]string{}
	var placed []string
	for _, p := range pods.Items {
		z := zoneOf[p.Spec.NodeName]
		byZone[z] = append(byZone[z], p.Name)
		placed = append(placed, fmt.Sprintf("%s on %s (%s)", p.Name, p.Spec.NodeName, z))
		if !slices.Contains(c.Status.Nodes, p.Spec.NodeName) {
			t.Errorf("%s runs on %s, not among the nodes with prepared disks %v", p.Name, p.Spec.NodeName, c.Status.Nodes)
		}
		if p.Spec.PriorityClassName != class || p.Spec.Priority == nil || *p.Spec.Priority != priority {
			t.Errorf("%s: priority class %q, priority %v, want %s at %d", p.Name, p.Spec.PriorityClassName, p.Spec.Priority, class, priority)
		}
		if g := p.Spec.TerminationGracePeriodSeconds; g == nil || *g != grace {
			t.Errorf("%s: grace period %v, want %d", p.Name, g, grace)
		}
	}
	sort.Strings(placed)
	t.Logf("placement: %s; prepared nodes %v", strings.Join(placed, "; "), c.Status.Nodes)
	if len(byZone) != 3 {
		t.Errorf("members by zone %v, want one in each of 3 zones", byZone)
	}
}

// runReadmeRecipe runs the first sh block after heading (a line of its own) in the README's
// section (a "## " heading), with KUBECONFIG set to the suite's cluster, from the
// repository's root.
func runReadmeRecipe(t *testing.T, section, heading string) (string, error) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(env.root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, text, ok := strings.Cut(string(b), "\n## "+section+"\n")
	if !ok {
		t.Fatalf("README has no section %s", section)
	}
	text, _, _ = strings.Cut(text, "\n## ")
	_, after, ok := strings.Cut(text, heading)
	if !ok {
		t.Fatalf("README's %s section has no %q", section, strings.TrimSpace(heading))
	}
	_, after, ok = strings.Cut(after, "```sh\n")
	block, _, ok2 := strings.Cut(after, "```\n")
	if !ok || !ok2 {
		t.Fatalf("README's %q has no sh block", strings.TrimSpace(heading))
	}
	var lines []string
	for _, l := range strings.Split(block, "\n") {
		if strings.HasPrefix(l, "export KUBECONFIG=") {
			l = "export KUBECONFIG=" + env.kubeconfig
		}
		lines = append(lines, l)
	}
	cmd := exec.CommandContext(t.Context(), "bash", "-e", "-o", "pipefail", "-c", strings.Join(lines, "\n"))
	cmd.Dir = env.root
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	return out.String(), err
}
