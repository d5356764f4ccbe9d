package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	nodeagentv1 "github.com/opsuite/suite/proto/nodeagent/v1"
	"github.com/opsuite/suite/shared/nodeagent"
	"github.com/opsuite/suite/shared/nodeagent/contract"
	"github.com/opsuite/suite/tools/internal/localcluster"
)

// agentXFSLabel is the label the agent gives the filesystems it makes
// (services/node-agent/internal/server.XFSLabel, internal to the agent's module).
const agentXFSLabel = "opsuite-na"

// preparerNamespace holds the stand-in controller's ServiceAccounts.
const preparerNamespace = "e2e-disk-preparer"

// poolNamespace is the namespace the local cluster lends its nodes to.
const poolNamespace = "default"

// TestNodeAgentPrepare is a controller's view of the node agent: a ServiceAccount bound to
// the chart's preparer role (and its client role, to find the agent pod and read the CA)
// prepares a real loop device on a simulated node through shared/nodeagent, repeats the
// call (a no-op), fills it to provoke the chart's NodeAgentDiskNearlyFull in a real
// Prometheus (checkDiskNearlyFull), and releases it with wipe; a ServiceAccount without the
// binding is refused with PermissionDenied.
func TestNodeAgentPrepare(t *testing.T) {
	needRunner(t, "the local cluster's per-node loop devices")
	needInstalled(t, "node-agent")
	if _, err := exec.LookPath("blkid"); err != nil {
		t.Fatalf("blkid not found: %v", err)
	}
	if os.Geteuid() != 0 {
		t.Fatal("needs root: blkid on the device, and the agent's mkfs and mounts")
	}
	s := serviceByName("node-agent")
	ctx := t.Context()
	begin := time.Now()

	// The release's names: the DaemonSet and its ConfigMap of the CA.
	ds, err := env.client.AppsV1().DaemonSets(s.namespace()).List(ctx, metav1.ListOptions{LabelSelector: selector(s.name)})
	if err != nil || len(ds.Items) != 1 {
		t.Fatalf("DaemonSet of %s: %v (%d found)", s.name, err, len(ds.Items))
	}
	fullname := ds.Items[0].Name
	agentSelector := metav1.FormatLabelSelector(ds.Items[0].Spec.Selector)
	port := 0
	for _, p := range ds.Items[0].Spec.Template.Spec.Containers[0].Ports {
		if p.Name == "grpc" {
			port = int(p.ContainerPort)
		}
	}
	if port == 0 {
		t.Fatalf("DaemonSet %s names no grpc port", fullname)
	}

	// One simulated node; wait for its agent (TestNodeAgentOnEveryNode may not have run).
	nodes, err := env.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil || len(nodes.Items) == 0 {
		t.Fatalf("nodes: %v (%d)", err, len(nodes.Items))
	}
	names := make([]string, 0, len(nodes.Items))
	for _, n := range nodes.Items {
		names = append(names, n.Name)
	}
	sort.Strings(names)
	node := names[0]
	err = poll(ctx, t, "node-agent Ready on node "+node, 3*time.Minute, func(ctx context.Context) (bool, error) {
		ps, err := readyAgents(ctx, s)
		for _, p := range ps {
			if p.Spec.NodeName == node {
				return true, nil
			}
		}
		return false, err
	})
	if err != nil {
		diagnose(ctx, t, s)
		t.Fatal(err)
	}

	// The stand-in controller: its ServiceAccount, bound cluster-wide to the preparer role
	// (the agent authorizes nodes.nodeagent.opsuite.io, cluster-scoped) and, in the agent's
	// namespace, to the client role (find the agent pod, read the CA), as the chart says.
	// A second ServiceAccount has no binding at all.
	const bound, unbound = "disk-preparer", "disk-preparer-unbound"
	mustCreate(t, "namespace "+preparerNamespace, func() error {
		_, err := env.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: preparerNamespace}}, metav1.CreateOptions{})
		return err
	})
	t.Cleanup(func() {
		_ = env.client.CoreV1().Namespaces().Delete(context.Background(), preparerNamespace, metav1.DeleteOptions{})
	})
	for _, sa := range []string{bound, unbound} {
		mustCreate(t, "ServiceAccount "+sa, func() error {
			_, err := env.client.CoreV1().ServiceAccounts(preparerNamespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})
			return err
		})
	}
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: bound, Namespace: preparerNamespace}}
	crbName := "e2e-" + bound + "-preparer"
	mustCreate(t, "ClusterRoleBinding "+crbName, func() error {
		_, err := env.client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: crbName},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: fullname + "-preparer"},
			Subjects:   subject,
		}, metav1.CreateOptions{})
		return err
	})
	t.Cleanup(func() {
		_ = env.client.RbacV1().ClusterRoleBindings().Delete(context.Background(), crbName, metav1.DeleteOptions{})
	})
	mustCreate(t, "RoleBinding "+bound+"-client", func() error {
		_, err := env.client.RbacV1().RoleBindings(s.namespace()).Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "e2e-" + bound + "-client"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: fullname + "-client"},
			Subjects:   subject,
		}, metav1.CreateOptions{})
		return err
	})
	t.Cleanup(func() {
		_ = env.client.RbacV1().RoleBindings(s.namespace()).Delete(context.Background(), "e2e-"+bound+"-client", metav1.DeleteOptions{})
	})

	// The controller talks to the apiserver as itself (a token of the apiserver's audience)
	// and to the agent with a token minted for that node's agent.
	apiToken, err := requestToken(ctx, preparerNamespace, bound)
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(env.cfg)
	cfg.BearerToken = apiToken
	// The library as an operator uses it, with the preparer's own rights: the agent pod found
	// by the apiserver's field selector, the CA from the chart's ConfigMap.
	reader, err := ctrlclient.New(cfg, ctrlclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	caSource := nodeagent.ConfigMapCA{Reader: reader, Namespace: s.namespace(), Name: fullname + "-ca"}
	var serverName string
	err = poll(ctx, t, "the preparer reads ConfigMap "+fullname+"-ca (RBAC settles)", time.Minute, func(ctx context.Context) (bool, error) {
		_, serverName, err = caSource.CA(ctx)
		if apierrors.IsForbidden(err) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		t.Fatal(err)
	}
	sel, err := labels.Parse(agentSelector)
	if err != nil {
		t.Fatal(err)
	}
	// Tokens are minted for the one node dialed (audience nodeagent.opsuite.io/<node>), a
	// fresh one per call here to count them; operators use nodeagent.TokenRequester.
	tokensFor := func(sa string, calls *atomic.Int32) nodeagent.TokenSource {
		return nodeagent.TokenSourceFunc(func(ctx context.Context, audience string) (string, error) {
			calls.Add(1)
			if audience != contract.Audience(node) {
				return "", fmt.Errorf("asked for a token for %s while calling node %s", audience, node)
			}
			return requestToken(ctx, preparerNamespace, sa, audience)
		})
	}
	var tokenCalls, deniedCalls atomic.Int32
	config := nodeagent.Config{
		Resolver: &nodeagent.PodResolver{Pods: reader, Namespace: s.namespace(), Selector: sel, Port: port},
		CA:       caSource,
		Tokens:   tokensFor(bound, &tokenCalls),
		Options:  nodeagent.Options{Timeout: 2 * time.Minute, Attempts: 4, Backoff: 500 * time.Millisecond},
	}
	agents, err := nodeagent.NewPool(config)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = agents.Close() })
	client := agents.Node(node)
	agentPod, err := agentOn(ctx, s, node)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("calling the agent of node %s (pod %s at %s:%d, TLS name %s) as %s/%s", node, agentPod.Name, agentPod.Status.PodIP, port, serverName, preparerNamespace, bound)

	// One of the node's own disks: the local cluster gives every node loop devices of its
	// own, and the node's agent sees those alone (hostPath /dev is the node's, and the
	// image rule passes --device-allow with exactly them).
	disks, err := localcluster.NodeDisks(*env.local)
	if err != nil || len(disks[node]) == 0 {
		t.Fatalf("the local cluster attached no disks for node %s: %v (%v)", node, disks, err)
	}
	dev := disks[node][0]
	pvPath := filepath.Join(env.workDir, "node-agent", "pv", node, "e2e-disk-preparer")
	released := false
	// Release through the agent (its mounts live in the agent's namespace); the device
	// itself goes with the cluster.
	t.Cleanup(func() {
		if released {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if _, err := client.ReleaseDisks(ctx, &nodeagentv1.ReleaseDisksRequest{Devices: []string{dev}, Wipe: true, Namespace: poolNamespace}); err != nil {
			t.Errorf("cleanup: releasing %s: %v", dev, err)
		}
	})
	t.Logf("node %s owns %v; preparing %s, PV path %s", node, disks[node], dev, pvPath)

	// Without the binding: authenticated, but refused.
	config.Tokens = tokensFor(unbound, &deniedCalls)
	deniedAgents, err := nodeagent.NewPool(config)
	if err != nil {
		t.Fatal(err)
	}
	defer deniedAgents.Close()
	denied := deniedAgents.Node(node)
	// The local cluster lends every node to namespace default (pool.opsuite.io/namespace):
	// an agent refuses a request for any other namespace, or none.
	req := &nodeagentv1.PrepareDisksRequest{Selector: &nodeagentv1.DeviceSelector{Paths: []string{dev}}, PvPath: pvPath, Namespace: poolNamespace}
	if _, err := denied.PrepareDisks(ctx, req); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("PrepareDisks as %s (no binding): %v, want PermissionDenied", unbound, err)
	} else {
		t.Logf("PrepareDisks as %s (no binding): %v", unbound, err)
	}
	if n := deniedCalls.Load(); n != 1 {
		t.Errorf("a refused call asked for %d tokens, want 1 (PermissionDenied is not retried)", n)
	}
	// A token minted for this node's agent is refused by another node's agent.
	if len(names) > 1 {
		replay := config
		replay.Tokens = nodeagent.TokenSourceFunc(func(ctx context.Context, _ string) (string, error) {
			return requestToken(ctx, preparerNamespace, bound, contract.Audience(node))
		})
		replayAgents, err := nodeagent.NewPool(replay)
		if err != nil {
			t.Fatal(err)
		}
		defer replayAgents.Close()
		err = poll(ctx, t, "node-agent Ready on node "+names[1], 3*time.Minute, func(ctx context.Context) (bool, error) {
			_, err := agentOn(ctx, s, names[1])
			return err == nil, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := replayAgents.Node(names[1]).GetNodeReport(ctx, &nodeagentv1.GetNodeReportRequest{}); status.Code(err) != codes.Unauthenticated {
			t.Fatalf("node %s's token on node %s: %v, want Unauthenticated", node, names[1], err)
		}
	}

	// Prepare. RBAC may take a moment to reach the authorizer's cache: retry PermissionDenied
	// for a short while only.
	var first *nodeagentv1.PrepareDisksResponse
	t0 := time.Now()
	err = poll(ctx, t, "PrepareDisks "+dev+" as "+bound, 2*time.Minute, func(ctx context.Context) (bool, error) {
		first, err = client.PrepareDisks(ctx, req)
		if status.Code(err) == codes.PermissionDenied {
			t.Logf("PrepareDisks: %v (RBAC not settled yet?)", err)
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		t.Logf("agent log:\n%s", podLogTail(agentPod, 30))
		t.Fatal(err)
	}
	prepTook := since(t0)
	if len(first.Disks) != 1 {
		t.Fatalf("PrepareDisks returned %d disks, want 1: %v", len(first.Disks), first)
	}
	d := first.Disks[0]
	if d.Device != dev || d.XfsDevice != dev || d.State != "ready" || d.PvPath != pvPath || d.FilesystemUuid == "" {
		t.Fatalf("prepared disk %v: want device and xfs device %s, state ready, pv path %s, a filesystem UUID", d, dev, pvPath)
	}
	agentRoot := filepath.Join(env.workDir, "node-agent", "agent", node)
	if !strings.HasPrefix(d.MountPath, agentRoot+"/") {
		t.Errorf("mount path %s is not under the node's agent root %s", d.MountPath, agentRoot)
	}
	sig := blkidProbe(t, dev)
	if sig["TYPE"] != "xfs" || sig["LABEL"] != agentXFSLabel || sig["UUID"] != d.FilesystemUuid {
		t.Fatalf("blkid -p %s on the host: %v, want TYPE=xfs LABEL=%s UUID=%s", dev, sig, agentXFSLabel, d.FilesystemUuid)
	}
	t.Logf("prepared %s in %s: xfs label %s uuid %s, %d bytes, mounted at %s, bind-mounted at %s",
		dev, prepTook, sig["LABEL"], sig["UUID"], d.XfsSizeBytes, d.MountPath, d.PvPath)

	// The node report agrees, read with the same client (the preparer role grants get).
	rep, err := client.GetNodeReport(ctx, &nodeagentv1.GetNodeReportRequest{})
	if err != nil {
		t.Fatalf("GetNodeReport: %v", err)
	}
	if rep.NodeName != node {
		t.Errorf("report of node %q, want %s", rep.NodeName, node)
	}
	owned := false
	for _, bd := range rep.Devices {
		if bd.Path == dev {
			owned = bd.OwnedByAgent && bd.Filesystem == "xfs" && bd.Label == agentXFSLabel
		}
	}
	if !owned {
		t.Errorf("the report does not show %s as the agent's xfs device", dev)
	}
	// The agent sees its node's disks and nothing else of the host.
	for _, bd := range rep.Devices {
		if !slices.Contains(disks[node], bd.Path) {
			t.Errorf("the agent of %s reports %s, not one of its node's disks %v", node, bd.Path, disks[node])
		}
	}

	// A repeat is a no-op with the same answer: same filesystem, not re-made.
	again, err := client.PrepareDisks(ctx, req)
	if err != nil {
		t.Fatalf("repeated PrepareDisks: %v", err)
	}
	if !proto.Equal(first, again) {
		t.Fatalf("repeat differs:\n%v\n%v", first, again)
	}
	if got := blkidProbe(t, dev)["UUID"]; got != d.FilesystemUuid {
		t.Fatalf("the repeat re-made the filesystem: UUID %s, want %s", got, d.FilesystemUuid)
	}

	// The node-agent chart's disk alert, on this disk filled for real.
	checkDiskNearlyFull(ctx, t, s, agentPod, d)

	// Release with wipe: the device is given back blank.
	rel, err := client.ReleaseDisks(ctx, &nodeagentv1.ReleaseDisksRequest{Devices: []string{dev}, Wipe: true, Namespace: poolNamespace})
	if err != nil {
		t.Fatalf("ReleaseDisks %s wipe: %v", dev, err)
	}
	released = true
	if len(rel.Released) != 1 || rel.Released[0].Device != dev {
		t.Fatalf("ReleaseDisks released %v, want %s", rel.Released, dev)
	}
	if sig := blkidProbe(t, dev); sig["TYPE"] != "" || sig["PTTYPE"] != "" {
		t.Fatalf("after release with wipe blkid -p %s still sees %v", dev, sig)
	}
	// A second release releases nothing and succeeds.
	if rel, err := client.ReleaseDisks(ctx, &nodeagentv1.ReleaseDisksRequest{Devices: []string{dev}, Wipe: true, Namespace: poolNamespace}); err != nil || len(rel.Released) != 0 {
		t.Fatalf("repeated ReleaseDisks: %v, %v; want success releasing nothing", rel, err)
	}
	if n := tokenCalls.Load(); n < 5 {
		t.Errorf("the token source was asked %d times for at least 5 calls, want a fresh token per call", n)
	}
	t.Logf("released and wiped %s; %d node-agent tokens requested; whole test %s", dev, tokenCalls.Load(), since(begin))
}

func mustCreate(t *testing.T, what string, create func() error) {
	t.Helper()
	if err := create(); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating %s: %v", what, err)
	}
}

// requestToken is a short-lived token of a ServiceAccount (TokenRequest), for the given
// audiences or the apiserver's own.
func requestToken(ctx context.Context, ns, sa string, audiences ...string) (string, error) {
	tr, err := env.client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: audiences, ExpirationSeconds: ptr.To[int64](600)},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("TokenRequest for %s/%s %v: %w", ns, sa, audiences, err)
	}
	return tr.Status.Token, nil
}

func agentOn(ctx context.Context, s service, node string) (*corev1.Pod, error) {
	ps, err := readyAgents(ctx, s)
	if err != nil {
		return nil, err
	}
	for i := range ps {
		if ps[i].Spec.NodeName == node {
			return &ps[i], nil
		}
	}
	return nil, errors.New("no ready agent pod on " + node)
}

// blkidProbe reads a device's signatures as the host sees them (low-level probe, no cache).
func blkidProbe(t *testing.T, dev string) map[string]string {
	t.Helper()
	out, err := exec.Command("blkid", "-p", "-o", "export", dev).Output()
	// Exit status 2: nothing found.
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 2 {
		return map[string]string{}
	}
	if err != nil {
		t.Fatalf("blkid -p %s: %v", dev, err)
	}
	sig := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			sig[k] = v
		}
	}
	return sig
}
