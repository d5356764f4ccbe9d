package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/tools/internal/bolt/boltclient"
)

// The product document's minimal cluster, as services/memgraph-operator/examples names it.
const (
	mgMinimalName   = "memgraph"
	mgMinimalSecret = "memgraph-secrets"
)

// TestMemgraphMinimalPlacement applies the product document's minimal manifest
// (services/memgraph-operator/examples/minimal-cluster.yaml) unchanged, with the license
// Secret it names, and waits until the operator reports it Ready and Converged. Then the
// real kube-scheduler's placement over the local cluster's nodes is checked: with no
// placement in the manifest, the operator's default (prefer hosts that run no other member
// of the role) puts the 3 coordinators on 3 distinct nodes and the 2 data instances on 2
// distinct nodes. The coordinators carry no Bolt credentials, the data instances the grace
// period a snapshot on exit needs, and the coordinators answer SHOW INSTANCES with every
// member up.
//
// The scheduler's own default spreading (soft, maxSkew 3 per host) spreads those pods
// even without the operator's preference, so a second cluster asks the scheduler to
// prefer one node for both roles (a nodeAffinity, which keeps the default): without the
// operator's anti-affinity the scheduler stacks every member of a role there; with it,
// one member of each role lands there and the others on distinct nodes.
func TestMemgraphMinimalPlacement(t *testing.T) {
	ctx := mgScenario(t)
	nodes, err := env.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) < 3 {
		t.Fatalf("the local cluster has %d nodes; 3 coordinators on distinct hosts need 3", len(nodes.Items))
	}
	secret := fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata:
  name: %s
  namespace: %s
type: Opaque
stringData:
  MEMGRAPH_ENTERPRISE_LICENSE: "e2e-license"
  MEMGRAPH_ORGANIZATION_NAME: "e2e-organization"
`, mgMinimalSecret, mgNamespace)
	if out, err := kubectlStdin(ctx, secret, "apply", "-f", "-"); err != nil {
		t.Fatalf("applying the license Secret: %v\n%s", err, out)
	}
	manifest := filepath.Join(env.root, "services", "memgraph-operator", "examples", "minimal-cluster.yaml")
	begin := time.Now()
	if out, err := kubectl(ctx, "apply", "--server-side", "--field-manager=e2e-user", "-n", mgNamespace, "-f", manifest); err != nil {
		t.Fatalf("the document's minimal manifest: %v\n%s", err, out)
	}
	selector := "memgraph.com/cluster=" + mgMinimalName
	t.Cleanup(func() {
		bg := context.Background()
		for _, args := range [][]string{
			{"delete", "-n", mgNamespace, "-f", manifest, "--wait=true", "--timeout=2m"},
			// Retain keeps the claims past the cluster (the manifest asks for it).
			{"delete", "pvc", "-n", mgNamespace, "-l", selector, "--wait=false"},
			{"delete", "secret", "-n", mgNamespace, mgMinimalSecret},
		} {
			if out, err := kubectl(bg, args...); err != nil {
				t.Logf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
			}
		}
	})

	var c *memgraphv1.MemgraphCluster
	err = poll(ctx, t, "MemgraphCluster "+mgMinimalName+" Ready", 6*time.Minute, func(ctx context.Context) (bool, error) {
		got, err := mgClusterNamed(ctx, mgMinimalName)
		if err != nil {
			return transient(err)
		}
		c = got
		converged := meta.FindStatusCondition(got.Status.Conditions, memgraphv1.ConditionConverged)
		return got.Status.State == memgraphv1.StateReady && converged != nil && converged.Status == metav1.ConditionTrue &&
			converged.ObservedGeneration == got.Generation, nil
	})
	if err != nil {
		t.Logf("last seen: %s", mgDescribe(c))
		if out, kerr := kubectl(ctx, "get", "mgc,sts,pods", "-n", mgNamespace, "-l", selector, "-o", "wide"); kerr == nil {
			t.Logf("%s", out)
		}
		t.Fatalf("the document's minimal cluster did not become Ready: %v", err)
	}
	t.Logf("time to Ready for the document's minimal cluster (3+2): %s (MAIN %s, leader %s)", since(begin), c.Status.Main, c.Status.Leader)

	pods, err := env.client.CoreV1().Pods(mgNamespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	byRole := map[string]map[string][]string{} // role -> node -> pods
	var leader string
	for _, p := range pods.Items {
		role := p.Labels["app.kubernetes.io/component"]
		if p.Spec.NodeName == "" {
			t.Errorf("pod %s is not scheduled", p.Name)
			continue
		}
		if byRole[role] == nil {
			byRole[role] = map[string][]string{}
		}
		byRole[role][p.Spec.NodeName] = append(byRole[role][p.Spec.NodeName], p.Name)
		grace := int64(-1)
		if p.Spec.TerminationGracePeriodSeconds != nil {
			grace = *p.Spec.TerminationGracePeriodSeconds
		}
		env := map[string]bool{}
		for _, e := range p.Spec.Containers[0].Env {
			env[e.Name] = true
		}
		switch role {
		case "coordinator":
			if grace != memgraphv1.DefaultCoordinatorTerminationGracePeriodSeconds {
				t.Errorf("coordinator %s grace period %d s, want %d", p.Name, grace, memgraphv1.DefaultCoordinatorTerminationGracePeriodSeconds)
			}
			if env["MEMGRAPH_USER"] || env["MEMGRAPH_PASSWORD"] {
				t.Errorf("coordinator %s carries Bolt credentials", p.Name)
			}
			if id, ok := strings.CutPrefix(c.Status.Leader, "coordinator_"); ok && p.Name == mgMinimalName+"-coordinator-"+id {
				leader = p.Name
			}
		case "data":
			if grace != memgraphv1.DefaultDataTerminationGracePeriodSeconds {
				t.Errorf("data instance %s grace period %d s, want %d", p.Name, grace, memgraphv1.DefaultDataTerminationGracePeriodSeconds)
			}
		}
	}
	for role, want := range map[string]int{"coordinator": 3, "data": 2} {
		var placed []string
		members := 0
		for node, names := range byRole[role] {
			sort.Strings(names)
			placed = append(placed, node+": "+strings.Join(names, ","))
			members += len(names)
			if len(names) > 1 {
				t.Errorf("%s members %v share node %s: one node failure would take %d of them", role, names, node, len(names))
			}
		}
		sort.Strings(placed)
		t.Logf("%s placement over %d nodes: %s", role, len(nodes.Items), strings.Join(placed, "; "))
		if members != want || len(byRole[role]) != want {
			t.Errorf("%d %s pods on %d nodes, want %d on %d", members, role, len(byRole[role]), want, want)
		}
	}

	// The leader's view, without credentials: the document's cluster has no spec.auth.
	if leader == "" {
		t.Fatalf("no pod of leader %q", c.Status.Leader)
	}
	addr, err := mgPodBolt(ctx, leader)
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, mgCall)
	res, err := boltclient.Query(cctx, addr, boltclient.Options{Timeout: mgCall}, "SHOW INSTANCES;")
	cancel()
	if err != nil {
		t.Fatalf("SHOW INSTANCES on %s: %v", leader, err)
	}
	rows, err := mgInstances(res)
	if err != nil {
		t.Fatal(err)
	}
	if main, why := mgMembershipProblemOf(mgMinimalName, rows, 3, 2); why != "" {
		t.Errorf("the leader %s: %s", leader, why)
	} else {
		t.Logf("the leader %s: 3 coordinators and 2 data instances up, MAIN %s", leader, main)
	}

	mgPinnedPlacement(ctx, t, manifest, nodes.Items[0].Name)
}

// mgPinnedPlacement creates the document's cluster again as <name>-pinned, both roles
// preferring node pin, and checks where the scheduler put each member: one of each role
// on pin, no two members of a role on one node.
func mgPinnedPlacement(ctx context.Context, t *testing.T, manifest, pin string) {
	t.Helper()
	docs, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(docs, &u.Object); err != nil {
		t.Fatal(err)
	}
	name := mgMinimalName + "-pinned"
	u.SetName(name)
	u.SetNamespace(mgNamespace)
	prefer := map[string]any{"nodeAffinity": map[string]any{"preferredDuringSchedulingIgnoredDuringExecution": []any{map[string]any{
		"weight": int64(100),
		"preference": map[string]any{"matchExpressions": []any{map[string]any{
			"key": "kubernetes.io/hostname", "operator": "In", "values": []any{pin},
		}}},
	}}}}
	if err := unstructured.SetNestedField(u.Object, map[string]any{"coordinators": prefer, "data": prefer}, "spec", "affinity"); err != nil {
		t.Fatal(err)
	}
	if _, err := env.dyn.Resource(mgcGVR).Namespace(mgNamespace).Create(ctx, u, metav1.CreateOptions{FieldValidation: "Strict"}); err != nil {
		t.Fatal(err)
	}
	selector := "memgraph.com/cluster=" + name
	t.Cleanup(func() {
		bg := context.Background()
		for _, args := range [][]string{
			{"delete", "mgc", "-n", mgNamespace, name, "--wait=true", "--timeout=2m"},
			{"delete", "pvc", "-n", mgNamespace, "-l", selector, "--wait=false"},
		} {
			if out, err := kubectl(bg, args...); err != nil {
				t.Logf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
			}
		}
	})
	var byRole map[string]map[string][]string
	err = poll(ctx, t, "the 5 pods of "+name+" scheduled", 3*time.Minute, func(ctx context.Context) (bool, error) {
		pods, err := env.client.CoreV1().Pods(mgNamespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return transient(err)
		}
		byRole = map[string]map[string][]string{}
		scheduled := 0
		for _, p := range pods.Items {
			if p.Spec.NodeName == "" {
				continue
			}
			role := p.Labels["app.kubernetes.io/component"]
			if byRole[role] == nil {
				byRole[role] = map[string][]string{}
			}
			byRole[role][p.Spec.NodeName] = append(byRole[role][p.Spec.NodeName], p.Name)
			scheduled++
		}
		return scheduled == 5, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for role, want := range map[string]int{"coordinator": 3, "data": 2} {
		var placed []string
		for node, names := range byRole[role] {
			sort.Strings(names)
			placed = append(placed, node+": "+strings.Join(names, ","))
		}
		sort.Strings(placed)
		t.Logf("%s placement of %s, both roles preferring %s: %s", role, name, pin, strings.Join(placed, "; "))
		if len(byRole[role]) != want {
			t.Errorf("%d %s pods on %d nodes, want %d nodes: the host preference did not hold against the node preference", want, role, len(byRole[role]), want)
		}
		if len(byRole[role][pin]) != 1 {
			t.Errorf("%s pods on the preferred node %s: %v, want exactly one", role, pin, byRole[role][pin])
		}
	}
}
