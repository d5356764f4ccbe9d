package agenttest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	nodeagentv1 "github.com/opsuite/suite/proto/nodeagent/v1"
	"github.com/opsuite/suite/services/node-agent/agenttest"
	"github.com/opsuite/suite/shared/nodeagent"
	"github.com/opsuite/suite/shared/nodeagent/contract"
	"github.com/opsuite/suite/shared/testenv"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

var env *testenv.Env

// TestMain is what an operator's integration tests do: a private mount namespace for the
// agents' mounts, then a real apiserver.
func TestMain(m *testing.M) {
	agenttest.PrivateMountNamespace()
	testenv.Main(m, &env)
}

const mib = 1 << 20

// TestPrepareThroughTheRealAgent prepares, reads back and releases a loop device on the
// in-process agent of node-a, as a ServiceAccount bound to the preparer role, with tokens
// minted per node; node-b's agent never sees node-a's device.
func TestPrepareThroughTheRealAgent(t *testing.T) {
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	const ns, sa = "operator", "preparer"
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}))
	must(cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}))
	must(cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "preparer"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{contract.Group}, Resources: []string{"nodes"}, Verbs: []string{"get"}},
		{APIGroups: []string{contract.Group}, Resources: []string{"nodes/disks"}, Verbs: []string{"update"}},
	}}, metav1.CreateOptions{}))
	must(cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "preparer"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "preparer"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns}},
	}, metav1.CreateOptions{}))

	labels := map[string]string{"pool.opsuite.io/type": "nvme"}
	a := agenttest.Start(t, agenttest.Options{Node: "node-a", REST: env.Config, Labels: labels})
	b := agenttest.Start(t, agenttest.Options{Node: "node-b", REST: env.Config, Labels: labels})
	dev := a.AttachLoop(512 * mib)
	tokens, err := nodeagent.NewTokenRequester(env.Config, ns, sa)
	if err != nil {
		t.Fatal(err)
	}
	pool := agenttest.Pool(t, tokens, a, b)

	// Each agent sees its own loop devices only.
	for node, want := range map[string]bool{"node-a": true, "node-b": false} {
		rep, err := pool.Node(node).GetNodeReport(ctx, &nodeagentv1.GetNodeReportRequest{})
		if err != nil {
			t.Fatalf("%s: %v", node, err)
		}
		seen := false
		for _, d := range rep.Devices {
			seen = seen || d.Path == dev
			if !strings.HasPrefix(d.Path, "/dev/loop") {
				t.Errorf("%s's agent sees the host's %s", node, d.Path)
			}
		}
		if seen != want {
			t.Errorf("%s's agent sees %s: %v, want %v", node, dev, seen, want)
		}
	}

	req := &nodeagentv1.PrepareDisksRequest{Selector: &nodeagentv1.DeviceSelector{Paths: []string{dev}}, PvPath: a.PV("data")}
	if _, err := pool.Node("node-b").PrepareDisks(ctx, &nodeagentv1.PrepareDisksRequest{
		Selector: &nodeagentv1.DeviceSelector{Paths: []string{dev}}, PvPath: b.PV("data"),
	}); err == nil {
		t.Fatal("node-b's agent prepared node-a's device")
	}
	resp, err := pool.Node("node-a").PrepareDisks(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Disks) != 1 || resp.Disks[0].State != "ready" || resp.Disks[0].FilesystemUuid == "" {
		t.Fatalf("prepared %v", resp.Disks)
	}
	if typ := agenttest.Blkid(t, dev)["TYPE"]; typ != "xfs" {
		t.Fatalf("blkid -p %s: TYPE %q, want xfs", dev, typ)
	}

	// A restart restores the same disk, as after the pod restarts.
	a.Restart()
	again, err := pool.Node("node-a").PrepareDisks(ctx, req)
	if err != nil || len(again.Disks) != 1 || again.Disks[0].FilesystemUuid != resp.Disks[0].FilesystemUuid {
		t.Fatalf("after a restart: %v, %v", again, err)
	}

	rel, err := pool.Node("node-a").ReleaseDisks(ctx, &nodeagentv1.ReleaseDisksRequest{Devices: []string{dev}, Wipe: true})
	if err != nil || len(rel.Released) != 1 {
		t.Fatalf("release: %v, %v", rel, err)
	}

	// A token for node-a is no good on node-b.
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{contract.Audience("node-a")}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	replay := agenttest.Pool(t, nodeagent.StaticToken(tr.Status.Token), a, b)
	if _, err := replay.Node("node-b").GetNodeReport(ctx, &nodeagentv1.GetNodeReportRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("node-a's token on node-b: %v", err)
	}
}

// TestRBACChangesSeenWithAShortReviewCache: a test that binds a role after a denial sees it
// on the next call when the agent's review cache is short.
func TestRBACChangesSeenWithAShortReviewCache(t *testing.T) {
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	const ns, sa = "late", "reader"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	a := agenttest.Start(t, agenttest.Options{Node: "node-c", REST: env.Config, Labels: map[string]string{}, ReviewCacheTTL: time.Millisecond})
	tokens, err := nodeagent.NewTokenRequester(env.Config, ns, sa)
	if err != nil {
		t.Fatal(err)
	}
	c := agenttest.Pool(t, tokens, a).Node("node-c")
	if _, err := c.GetNodeReport(ctx, &nodeagentv1.GetNodeReportRequest{}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("before the binding: %v", err)
	}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "late-reader"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{contract.Group}, Resources: []string{contract.Resource}, Verbs: []string{"get"}},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "late-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "late-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// RBAC reaches the apiserver's authorizer within moments; the agent's cache adds nothing.
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := c.GetNodeReport(ctx, &nodeagentv1.GetNodeReportRequest{})
		if err == nil {
			break
		}
		if status.Code(err) != codes.PermissionDenied || time.Now().After(deadline) {
			t.Fatalf("after the binding: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestNoAuthNeedsSaying(t *testing.T) {
	a := agenttest.Start(t, agenttest.Options{Node: "node-x", NoAuth: true})
	rep, err := agenttest.Pool(t, nodeagent.StaticToken("any"), a).Node("node-x").GetNodeReport(context.Background(), &nodeagentv1.GetNodeReportRequest{})
	if err != nil || rep.NodeName != "node-x" {
		t.Fatalf("%v, %v", rep, err)
	}
}
