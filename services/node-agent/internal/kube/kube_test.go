package kube_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	nodeagentv1 "github.com/opsuite/suite/proto/nodeagent/v1"
	"github.com/opsuite/suite/services/node-agent/agenttest"
	"github.com/opsuite/suite/services/node-agent/internal/auth"
	"github.com/opsuite/suite/services/node-agent/internal/kube"
	"github.com/opsuite/suite/shared/nodeagent"
	"github.com/opsuite/suite/shared/nodeagent/contract"
	"github.com/opsuite/suite/shared/testenv"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	authenticationv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
)

var env *testenv.Env

// TestMain runs against a real kube-apiserver and etcd: TokenReview, TokenRequest,
// SubjectAccessReview and RBAC are the apiserver's.
func TestMain(m *testing.M) { testenv.Main(m, &env) }

const ns = "node-agent-test"

var setupOnce struct {
	done bool
	cs   kubernetes.Interface
}

// setup makes the callers once: ServiceAccounts bound to the chart's roles, one limited to
// node-a by resourceNames, and the Nodes node-a and node-b.
func setup(t *testing.T) kubernetes.Interface {
	t.Helper()
	if setupOnce.done {
		return setupOnce.cs
	}
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}))
	for _, sa := range []string{"reader", "writer", "nobody", "node-a-only"} {
		must(cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}))
	}
	roles := map[string][]rbacv1.PolicyRule{
		// What charts/node-agent gives readers and preparers.
		"node-agent-report":  {{APIGroups: []string{auth.Group}, Resources: []string{"nodes"}, Verbs: []string{"get"}}},
		"node-agent-prepare": {{APIGroups: []string{auth.Group}, Resources: []string{"nodes", "nodes/disks"}, Verbs: []string{"get", "update"}}},
		// A copy of the reader role limited to one node.
		"node-agent-node-a": {{APIGroups: []string{auth.Group}, Resources: []string{"nodes"}, ResourceNames: []string{"node-a"}, Verbs: []string{"get"}}},
	}
	for name, rules := range roles {
		must(cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}))
	}
	for sa, role := range map[string]string{"reader": "node-agent-report", "writer": "node-agent-prepare", "node-a-only": "node-agent-node-a"} {
		must(cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: sa + "-" + role},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns}},
		}, metav1.CreateOptions{}))
	}
	for _, node := range []string{"node-a", "node-b"} {
		must(cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, Labels: map[string]string{
			"pool.opsuite.io/namespace": "search", "pool.opsuite.io/type": "nvme", "kubernetes.io/os": "linux",
		}}}, metav1.CreateOptions{}))
	}
	setupOnce.done, setupOnce.cs = true, cs
	return cs
}

func token(t *testing.T, cs kubernetes.Interface, sa string, audiences ...string) string {
	t.Helper()
	exp := int64(600)
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: audiences, ExpirationSeconds: &exp},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// TestPerNodeAuthorization runs two real agents (node-a, node-b) with the real policy and
// calls them through shared/nodeagent: a token is good for one node's agent only, and
// RBAC resourceNames limit a caller to some nodes.
func TestPerNodeAuthorization(t *testing.T) {
	ctx := context.Background()
	cs := setup(t)
	agentA := agenttest.Start(t, agenttest.Options{Node: "node-a", REST: env.Config})
	agentB := agenttest.Start(t, agenttest.Options{Node: "node-b", REST: env.Config})
	on := func(node, tok string) *nodeagent.Client {
		return agenttest.Pool(t, nodeagent.StaticToken(tok), agentA, agentB).Node(node)
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
	audA, audB := contract.Audience("node-a"), contract.Audience("node-b")

	cases := []struct {
		name      string
		node, tok string
		call      func(*nodeagent.Client) error
		want      codes.Code
		message   string
	}{
		{"no token", "node-a", "", report, codes.Unauthenticated, "bearer token is required"},
		{"garbage token", "node-a", "not-a-jwt", report, codes.Unauthenticated, "not a JWT"},
		{"apiserver's audience", "node-a", token(t, cs, "reader"), report, codes.Unauthenticated, "audience is not " + audA},
		{"the old shared audience", "node-a", token(t, cs, "reader", "node-agent"), report, codes.Unauthenticated, "audience is not " + audA},
		{"node-b's token on node-a", "node-a", token(t, cs, "reader", audB), report, codes.Unauthenticated, "audience is not " + audA},
		{"node-a's token on node-b", "node-b", token(t, cs, "reader", audA), report, codes.Unauthenticated, "audience is not " + audB},
		{"token without RBAC", "node-a", token(t, cs, "nobody", audA), report, codes.PermissionDenied, "may not get nodes.nodeagent.opsuite.io"},
		{"reader reads node-a", "node-a", token(t, cs, "reader", audA), report, codes.OK, ""},
		{"reader reads node-b", "node-b", token(t, cs, "reader", audB), report, codes.OK, ""},
		{"reader may not prepare", "node-a", token(t, cs, "reader", audA), prepare, codes.PermissionDenied, "may not update nodes/disks"},
		{"writer may prepare", "node-a", token(t, cs, "writer", audA), prepare, codes.InvalidArgument, ""},
		{"writer may not tune sysctls", "node-a", token(t, cs, "writer", audA), sysctl, codes.PermissionDenied, "may not update nodes/sysctls"},
		{"role limited to node-a, on node-a", "node-a", token(t, cs, "node-a-only", audA), report, codes.OK, ""},
		{"role limited to node-a, on node-b", "node-b", token(t, cs, "node-a-only", audB), report, codes.PermissionDenied, "may not get nodes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.call(on(c.node, c.tok))
			if got := status.Code(err); got != c.want || !strings.Contains(status.Convert(err).Message(), c.message) {
				t.Fatalf("got %v, want %v with %q", err, c.want, c.message)
			}
		})
	}

	t.Run("one ServiceAccount, a token per node", func(t *testing.T) {
		tokens, err := nodeagent.NewTokenRequester(env.Config, ns, "reader")
		if err != nil {
			t.Fatal(err)
		}
		p := agenttest.Pool(t, tokens, agentA, agentB)
		for _, node := range []string{"node-a", "node-b"} {
			rep, err := p.Node(node).GetNodeReport(ctx, &nodeagentv1.GetNodeReportRequest{})
			if err != nil || rep.NodeName != node {
				t.Fatalf("%s: %v, %v", node, rep, err)
			}
			// Pool labels come from the Node.
			if rep.Pool.GetNamespace() != "search" || rep.Pool.GetType() != "nvme" || len(rep.Pool.GetLabels()) != 2 {
				t.Fatalf("pool %v", rep.Pool)
			}
		}
	})
}

// countingReviews counts the TokenReviews the agent sends to the real apiserver.
type countingReviews struct {
	authenticationv1client.TokenReviewInterface
	n atomic.Int32
}

func (c *countingReviews) Create(ctx context.Context, tr *authenticationv1.TokenReview, opts metav1.CreateOptions) (*authenticationv1.TokenReview, error) {
	c.n.Add(1)
	return c.TokenReviewInterface.Create(ctx, tr, opts)
}

// TestTokenReviewsAreCached counts what a flood costs: one review per distinct token at
// most, none for what cannot be a token for this node.
func TestTokenReviewsAreCached(t *testing.T) {
	ctx := context.Background()
	cs := setup(t)
	audA := contract.Audience("node-a")
	reviews := &countingReviews{TokenReviewInterface: cs.AuthenticationV1().TokenReviews()}
	authn := auth.NewCachedAuthenticator(&kube.TokenReviewer{Reviews: reviews, Audience: audA}, audA, auth.CacheConfig{Allowed: time.Minute, Denied: time.Minute})

	good := token(t, cs, "reader", audA)
	// A token with node-a's audience and a signature the apiserver refuses.
	forged := good[:strings.LastIndex(good, ".")+1] + "c2lnbmF0dXJl"
	flood := func(tok string, n int) error {
		var last error
		for range n {
			_, last = authn.Authenticate(ctx, tok)
		}
		return last
	}
	if err := flood(good, 100); err != nil {
		t.Fatal(err)
	}
	if n := reviews.n.Load(); n != 1 {
		t.Fatalf("100 calls with one valid token cost %d TokenReviews, want 1", n)
	}
	if err := flood(forged, 1000); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Fatalf("forged: %v", err)
	}
	if n := reviews.n.Load(); n != 2 {
		t.Fatalf("1000 calls with one forged token cost %d TokenReviews, want 1", n-1)
	}
	for _, tok := range []string{"garbage", token(t, cs, "reader", contract.Audience("node-b")), token(t, cs, "reader")} {
		if err := flood(tok, 100); !errors.Is(err, auth.ErrUnauthenticated) {
			t.Fatalf("got %v", err)
		}
	}
	if n := reviews.n.Load(); n != 2 {
		t.Fatalf("tokens for other audiences cost %d TokenReviews, want none", n-2)
	}

	// Without the cache's early refusal, the apiserver itself refuses node-a's token for
	// node-b (TokenReview spec.audiences).
	b := &kube.TokenReviewer{Reviews: cs.AuthenticationV1().TokenReviews(), Audience: contract.Audience("node-b")}
	if _, err := b.Authenticate(ctx, good); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Fatalf("node-a's token reviewed for node-b: %v", err)
	}
	a := &kube.TokenReviewer{Reviews: cs.AuthenticationV1().TokenReviews(), Audience: audA}
	if id, err := a.Authenticate(ctx, good); err != nil || id.User != "system:serviceaccount:"+ns+":reader" {
		t.Fatalf("%v, %v", id, err)
	}
}

// BenchmarkFlood measures what the agent spends per call on a flood of one token, reviews
// against the real apiserver included: one review, then the cache.
func BenchmarkFlood(b *testing.B) {
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		b.Fatal(err)
	}
	const sa = "bench"
	_, err = cs.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) { // -count=2 runs this again
		b.Fatal(err)
	}
	audA := contract.Audience("node-a")
	tr, err := cs.CoreV1().ServiceAccounts("default").CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{audA}},
	}, metav1.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	valid := tr.Status.Token
	tokens := map[string]string{
		"valid":        valid,
		"forged":       valid[:strings.LastIndex(valid, ".")+1] + "c2lnbmF0dXJl",
		"another node": valid[:0] + "x.eyJhdWQiOiJub2RlYWdlbnQub3BzdWl0ZS5pby9ub2RlLWIifQ.c2ln",
	}
	for name, tok := range tokens {
		b.Run(name, func(b *testing.B) {
			reviews := &countingReviews{TokenReviewInterface: cs.AuthenticationV1().TokenReviews()}
			authn := auth.NewCachedAuthenticator(&kube.TokenReviewer{Reviews: reviews, Audience: audA}, audA, auth.CacheConfig{})
			for b.Loop() {
				_, _ = authn.Authenticate(ctx, tok)
			}
			b.ReportMetric(float64(reviews.n.Load()), "reviews")
		})
	}
}
