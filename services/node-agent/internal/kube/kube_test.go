package kube_test

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	nodeagentv1 "github.com/opsuite/suite/proto/nodeagent/v1"
	"github.com/opsuite/suite/services/node-agent/internal/auth"
	"github.com/opsuite/suite/services/node-agent/internal/host"
	"github.com/opsuite/suite/services/node-agent/internal/kube"
	"github.com/opsuite/suite/services/node-agent/internal/server"
	"github.com/opsuite/suite/shared/nodeagent"
	"github.com/opsuite/suite/shared/testenv"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

var env *testenv.Env

// TestMain runs against a real kube-apiserver and etcd: TokenReview and SubjectAccessReview
// are the apiserver's, and so is RBAC.
func TestMain(m *testing.M) { testenv.Main(m, &env) }

const ns = "node-agent-test"

func setup(t *testing.T) kubernetes.Interface {
	t.Helper()
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	objs := []func() error{
		func() error {
			_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
			return err
		},
	}
	for _, sa := range []string{"reader", "writer", "nobody", "other-node"} {
		objs = append(objs, func() error {
			_, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})
			return err
		})
	}
	roles := map[string][]rbacv1.PolicyRule{
		// What charts/node-agent gives readers and preparers.
		"node-agent-report":  {{APIGroups: []string{auth.Group}, Resources: []string{"nodes"}, Verbs: []string{"get"}}},
		"node-agent-prepare": {{APIGroups: []string{auth.Group}, Resources: []string{"nodes", "nodes/disks"}, Verbs: []string{"get", "update"}}},
		"node-agent-node-b":  {{APIGroups: []string{auth.Group}, Resources: []string{"nodes"}, ResourceNames: []string{"node-b"}, Verbs: []string{"get"}}},
	}
	for name, rules := range roles {
		objs = append(objs, func() error {
			_, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{})
			return err
		})
	}
	for sa, role := range map[string]string{"reader": "node-agent-report", "writer": "node-agent-prepare", "other-node": "node-agent-node-b"} {
		objs = append(objs, func() error {
			_, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: sa + "-" + role},
				RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role},
				Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: ns}},
			}, metav1.CreateOptions{})
			return err
		})
	}
	objs = append(objs, func() error {
		_, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", Labels: map[string]string{
			"pool.opsuite.io/namespace": "search", "pool.opsuite.io/type": "nvme", "kubernetes.io/os": "linux",
		}}}, metav1.CreateOptions{})
		return err
	})
	for _, create := range objs {
		if err := create(); err != nil {
			t.Fatal(err)
		}
	}
	return cs
}

func token(t *testing.T, cs kubernetes.Interface, sa string, audience string) string {
	t.Helper()
	exp := int64(600)
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{audience}, ExpirationSeconds: &exp},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

func TestAuthAgainstTheAPIServer(t *testing.T) {
	ctx := context.Background()
	cs := setup(t)

	h, err := host.New(host.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	labels := &kube.NodeLabels{Client: cs, NodeName: "node-a", TTL: time.Minute}
	srv, err := server.New(server.Options{
		NodeName: "node-a", PoolLabelPrefix: "pool.opsuite.io",
		AgentRoot: filepath.Join(root, "agent"), PVRoot: filepath.Join(root, "pv"), StateFile: filepath.Join(root, "state.json"),
	}, h, labels, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	policy := auth.Policy{
		Authn: &kube.TokenReviewer{Client: cs, TTL: 10 * time.Second},
		Authz: &kube.AccessReviewer{Client: cs, NodeName: "node-a"},
	}
	client := func(tok string) *nodeagent.Client {
		var src nodeagent.TokenSource
		if tok != "" {
			src = nodeagent.TokenSourceFunc(func(context.Context) (string, error) { return tok, nil })
		}
		c, err := nodeagent.Embedded(srv, src, nodeagent.Options{Attempts: 1},
			grpc.ChainUnaryInterceptor(policy.Unary()), grpc.ChainStreamInterceptor(policy.Stream()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	report := func(c *nodeagent.Client) error {
		_, err := c.GetNodeReport(ctx, &nodeagentv1.GetNodeReportRequest{})
		return err
	}
	// An invalid request that only an authorized caller gets to hear is invalid: nothing is
	// touched, and InvalidArgument proves the call passed authorization.
	prepare := func(c *nodeagent.Client) error {
		_, err := c.PrepareDisks(ctx, &nodeagentv1.PrepareDisksRequest{})
		return err
	}
	sysctl := func(c *nodeagent.Client) error {
		_, err := c.EnsureSysctl(ctx, &nodeagentv1.EnsureSysctlRequest{Name: "kernel.panic"})
		return err
	}

	cases := []struct {
		name string
		tok  string
		call func(*nodeagent.Client) error
		want codes.Code
	}{
		{"no token", "", report, codes.Unauthenticated},
		{"garbage token", "not-a-jwt", report, codes.Unauthenticated},
		{"wrong audience", token(t, cs, "writer", "https://kubernetes.default.svc"), report, codes.Unauthenticated},
		{"token without RBAC", token(t, cs, "nobody", auth.Audience), report, codes.PermissionDenied},
		{"RBAC for another node", token(t, cs, "other-node", auth.Audience), report, codes.PermissionDenied},
		{"reader reads the report", token(t, cs, "reader", auth.Audience), report, codes.OK},
		{"reader may not prepare", token(t, cs, "reader", auth.Audience), prepare, codes.PermissionDenied},
		{"writer may prepare", token(t, cs, "writer", auth.Audience), prepare, codes.InvalidArgument},
		{"writer may not tune sysctls", token(t, cs, "writer", auth.Audience), sysctl, codes.PermissionDenied},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := status.Code(c.call(client(c.tok))); got != c.want {
				t.Fatalf("got %v, want %v", got, c.want)
			}
		})
	}

	t.Run("pool labels come from the Node", func(t *testing.T) {
		rep, err := client(token(t, cs, "reader", auth.Audience)).GetNodeReport(ctx, &nodeagentv1.GetNodeReportRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Pool.GetNamespace() != "search" || rep.Pool.GetType() != "nvme" || len(rep.Pool.GetLabels()) != 2 {
			t.Fatalf("pool %v", rep.Pool)
		}
	})
}
