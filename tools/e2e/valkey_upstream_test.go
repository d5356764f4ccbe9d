package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
)

// vkUpstreamNamespace holds our copies of valkey-io/valkey-operator's samples.
const vkUpstreamNamespace = "e2e-valkey-upstream"

// vkUpstreamSamples are the clusters of services/valkey-operator/internal/validation/
// testdata/upstream-samples, our copies of every sample in upstream's config/samples, by
// name, with the topology each asks for.
var vkUpstreamSamples = []struct {
	file, name       string
	shards, replicas int
	// user and password log the cli in (the users sample gives the default user a
	// password); none: the open default user.
	user, password string
}{
	{file: "basic.yaml", name: "up-basic", shards: 3, replicas: 1},
	{file: "deployment.yaml", name: "up-deployment", shards: 3, replicas: 1},
	{file: "persistent.yaml", name: "up-persistent", shards: 1, replicas: 1},
	{file: "persistent-delete.yaml", name: "up-persistent-delete", shards: 1, replicas: 1},
	{file: "readonly-rootfs.yaml", name: "up-readonly", shards: 1, replicas: 1},
	{file: "readonly-rootfs-persistent.yaml", name: "up-readonly-persistent", shards: 1, replicas: 1},
	{file: "topology-spread.yaml", name: "up-spread", shards: 3, replicas: 1},
	{file: "users.yaml", name: "up-users", shards: 3, replicas: 1, user: "default", password: "default-user-pw"},
	{file: "zone-pinning.yaml", name: "up-zones", shards: 3, replicas: 1},
	{file: "pdb-legacy-string.yaml", name: "up-pdb-disabled", shards: 1, replicas: 1},
	{file: "pdb-legacy-string.yaml", name: "up-pdb-managed", shards: 1, replicas: 1},
}

// TestValkeyUpstreamSamples applies our copies of upstream's samples unchanged with
// kubectl, all at once in one namespace, and waits until every cluster is Ready with the
// documented conditions and CLUSTER NODES agrees on every member. Then it checks what
// each sample is about: the hardened containers run as the sample's users with read-only
// root filesystems (the "server" entry merged into the server container), the Deployment
// members, the claims and their reclaim policy, a shard's members on different nodes, each
// pinned member in its round-robin zone of the local cluster's three, the users' rights,
// and the budget of podDisruptionBudget's string forms.
func TestValkeyUpstreamSamples(t *testing.T) {
	needRunner(t, "the cli reaches the Valkey pods at their addresses")
	needInstalled(t, "valkey-operator")
	needCLI(t)
	ctx := scenarioContext(t)
	begin := time.Now()
	ns := vkUpstreamNamespace
	if _, err := env.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	})
	dir := filepath.Join(env.root, "services", "valkey-operator", "internal", "validation", "testdata", "upstream-samples")
	files := map[string]bool{}
	args := []string{"apply", "-n", ns}
	for _, s := range vkUpstreamSamples {
		if !files[s.file] {
			files[s.file] = true
			args = append(args, "-f", filepath.Join(dir, s.file))
		}
	}
	out, err := kubectl(ctx, args...)
	t.Logf("%s", strings.TrimSpace(out))
	if err != nil {
		t.Fatal(err)
	}

	scenarios := map[string]*vkScenario{}
	for _, sample := range vkUpstreamSamples {
		s := &vkScenario{t: t, begin: begin, ns: ns, name: sample.name, user: sample.user, password: sample.password}
		scenarios[sample.name] = s
		// They all form at once; the later ones are mostly done by the time their turn comes.
		seen := s.waitReady(ctx, sample.name, 10*time.Minute, vkWant{sample.shards, sample.replicas, "", ""})
		t.Logf("%s (%s): Ready %s after the apply; states seen: %s", sample.name, sample.file, since(begin), strings.Join(seen, " -> "))
		s.wantEvents(ctx, sample.name, begin, []string{valkeyv1.EventClusterReady})
	}

	nodes := func(name string) []valkeyv1.ValkeyNode {
		t.Helper()
		list, err := scenarios[name].nodes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return list
	}
	pod := func(n valkeyv1.ValkeyNode) *corev1.Pod {
		t.Helper()
		p, err := env.client.CoreV1().Pods(ns).Get(ctx, n.Status.PodName, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("pod of %s: %v", n.Name, err)
		}
		return p
	}
	zoneOf := map[string]string{}
	zone := func(node string) string {
		t.Helper()
		if z, ok := zoneOf[node]; ok {
			return z
		}
		k, err := env.client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		zoneOf[node] = k.Labels[corev1.LabelTopologyZone]
		return zoneOf[node]
	}

	// Read-only root filesystems: upstream's "server" entry is the server container's
	// securityContext (not a third container), and the server runs as the sample's user.
	for name, uid := range map[string]int64{"up-readonly": 41001, "up-readonly-persistent": 41001} {
		for _, n := range nodes(name) {
			p := pod(n)
			var names []string
			for _, c := range p.Spec.Containers {
				names = append(names, c.Name)
			}
			if strings.Join(names, ",") != "valkey,exporter" {
				t.Errorf("%s: containers %v, want valkey,exporter", p.Name, names)
				continue
			}
			sc := p.Spec.Containers[0].SecurityContext
			if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.RunAsUser == nil || *sc.RunAsUser != uid {
				t.Errorf("%s: server securityContext %+v", p.Name, sc)
			}
			if sc := p.Spec.Containers[1].SecurityContext; sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != 41002 {
				t.Errorf("%s: exporter securityContext %+v", p.Name, sc)
			}
		}
	}

	// Deployment members.
	for _, n := range nodes("up-deployment") {
		if _, err := env.client.AppsV1().Deployments(ns).Get(ctx, n.Name, metav1.GetOptions{}); err != nil {
			t.Errorf("Deployment of %s: %v", n.Name, err)
		}
		if _, err := env.client.AppsV1().StatefulSets(ns).Get(ctx, n.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s has a StatefulSet too (%v)", n.Name, err)
		}
	}

	// Claims: Bound; kept (no owner) by default, owned by their node with reclaim Delete.
	for name, owned := range map[string]bool{"up-persistent": false, "up-persistent-delete": true, "up-readonly-persistent": false} {
		for _, n := range nodes(name) {
			c, err := env.client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, n.Name+"-data", metav1.GetOptions{})
			if err != nil {
				t.Errorf("claim of %s: %v", n.Name, err)
				continue
			}
			owner := metav1.GetControllerOf(c)
			if c.Status.Phase != corev1.ClaimBound || (owner != nil) != owned || (owned && (owner.Kind != "ValkeyNode" || owner.Name != n.Name)) {
				t.Errorf("claim %s: phase %s owner %+v, want Bound and owned=%v", c.Name, c.Status.Phase, owner, owned)
			}
		}
	}

	// Spread: a shard's members on different nodes (required). Pinning: every member in
	// zones[(shard+index) % 3].
	hosts := map[int32]map[string]bool{}
	for _, n := range nodes("up-spread") {
		if hosts[n.Spec.ShardIndex] == nil {
			hosts[n.Spec.ShardIndex] = map[string]bool{}
		}
		if hosts[n.Spec.ShardIndex][n.Status.NodeName] {
			t.Errorf("up-spread: two members of shard %d on node %s", n.Spec.ShardIndex, n.Status.NodeName)
		}
		hosts[n.Spec.ShardIndex][n.Status.NodeName] = true
	}
	zones := []string{"eu-west-1a", "eu-west-1b", "eu-west-1c"}
	var placed []string
	for _, n := range nodes("up-zones") {
		want := zones[(int(n.Spec.ShardIndex)+int(n.Spec.NodeIndex))%len(zones)]
		got := zone(n.Status.NodeName)
		placed = append(placed, fmt.Sprintf("%s@%s(%s)", n.Name, n.Status.NodeName, got))
		if got != want {
			t.Errorf("up-zones: %s runs on %s in zone %q, want %s", n.Name, n.Status.NodeName, got, want)
		}
	}
	t.Logf("up-zones placement: %s", strings.Join(placed, " "))

	// Users, as the users sample declares them.
	ip := nodes("up-users")[0].Status.PodIP
	cli := func(user, password string, args ...string) (string, error) {
		out, err := redisCLI(ctx, ip, user, password, args...)
		return strings.TrimSpace(out), err
	}
	must := func(want, user, password string, args ...string) {
		t.Helper()
		if got, err := cli(user, password, args...); err != nil || got != want {
			t.Errorf("%s %v as %s: %q (%v), want %q", vkCLI, args, user, got, err, want)
		}
	}
	refused := func(code, user, password string, args ...string) {
		t.Helper()
		if got, err := cli(user, password, args...); err == nil || !strings.Contains(err.Error(), code) {
			t.Errorf("%s %v as %s: %q (%v), want a %s error", vkCLI, args, user, got, err, code)
		}
	}
	must("OK", "alice", "alice-Pa55word", "set", "orders:1", "one")
	must("one", "alice", "alice-Pa55word", "get", "orders:1")
	refused("NOPERM", "alice", "alice-Pa55word", "set", "catalog:1", "x")
	must("OK", "bob", "any-password-at-all", "set", "bob:1", "x")
	refused("WRONGPASS", "charlie", "any-password-at-all", "get", "orders:1") // disabled
	// david may run administrative commands only (and what a cluster client needs), with
	// either password of the rotation.
	for _, pw := range []string{"old-david-secret", "new-david-secret"} {
		if out, err := cli("david", pw, "cluster", "info"); err != nil || !strings.Contains(out, "cluster_state:ok") {
			t.Errorf("CLUSTER INFO as david with %s: %q (%v)", pw, out, err)
		}
	}
	refused("NOPERM", "david", "new-david-secret", "get", "orders:1")
	refused("WRONGPASS", "edward", "any-password-at-all", "ping") // resetpass: no password left
	must("one", "default", "default-user-pw", "get", "orders:1")
	refused("NOAUTH", "", "", "get", "orders:1")

	// podDisruptionBudget "Disabled" has no budget, "Managed" the cluster's.
	if _, err := env.client.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "up-pdb-disabled", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("podDisruptionBudget Disabled: budget lookup %v, want none", err)
	}
	if b, err := env.client.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "up-pdb-managed", metav1.GetOptions{}); err != nil || b.Spec.MaxUnavailable == nil || b.Spec.MaxUnavailable.IntValue() != 1 {
		t.Errorf("podDisruptionBudget Managed: budget %+v (%v), want maxUnavailable 1", b, err)
	}
	t.Logf("upstream samples: %s in all", since(begin))
}
