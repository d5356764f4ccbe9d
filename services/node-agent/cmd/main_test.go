package main

import (
	"bytes"
	"context"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	nodeagentv1 "github.com/opsuite/suite/proto/nodeagent/v1"
	"github.com/opsuite/suite/shared/nodeagent"
	"github.com/opsuite/suite/shared/nodeagent/contract"
	"github.com/opsuite/suite/shared/nodeagent/nodeagenttest"
	"github.com/opsuite/suite/shared/testenv"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

func TestOptionsValidation(t *testing.T) {
	base := []string{"--tls-cert", "/c", "--tls-key", "/k", "--node-name", "n"}
	cases := []struct {
		args []string
		want string // "" when valid
	}{
		{base, ""},
		{[]string{"--node-name", "n"}, "--tls-cert and --tls-key are required"},
		{append(base[:4:4], "--node-name", ""), "--node-name or $NODE_NAME is required"},
		{append(base, "--pv-root", "relative"), "--pv-root"},
		{append(base, "--pv-root", "/"), "must not be /"},
		{append(base, "--agent-root", "/mnt/opsuite/agent"), "must not overlap"},
		{append(base, "--log-level", "loud"), "--log-level"},
		{append(base, "--pool-label-prefix", "a/b"), "--pool-label-prefix"},
		{append(base, "extra"), "unexpected arguments"},
		{append(base, "--device-allow", "/dev/loop7, /dev/nvme*n1"), ""},
		{append(base, "--device-allow", "loop7"), "--device-allow"},
		{append(base, "--device-allow", "/dev/sd["), "--device-allow"},
		{append(base, "--review-cache-denied", "0s"), "--review-cache-denied"},
		{append(base, "--review-cache-size", "-1"), "--review-cache-size"},
		{append(base, "--peer-failures-burst", "0"), "--peer-failures-burst"},
		{append(base, "--kube-api-qps", "0"), "--kube-api-qps"},
		{append(base, "--tls-signer-name", "node-agent.ns.svc"), "excludes --tls-cert"},
		{[]string{"--node-name", "n", "--tls-signer-name", "node-agent.ns.svc"}, ""},
		{[]string{"--node-name", "n", "--tls-signer-name", "node-agent.ns.svc", "--tls-signer-ttl", "5m"}, "at least 10m"},
	}
	for _, c := range cases {
		t.Setenv("NODE_NAME", "")
		o, err := parseOptions(c.args, &bytes.Buffer{})
		if c.want == "" {
			if err != nil {
				t.Errorf("%v: %v", c.args, err)
			}
			if o.stateFile != "/var/lib/opsuite-node-agent/state.json" {
				t.Errorf("state file default %q", o.stateFile)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: got %v, want %q", c.args, err, c.want)
		}
	}
	if o, err := parseOptions(append(base, "--device-allow", "/dev/loop7, /dev/nvme*n1,"), &bytes.Buffer{}); err != nil ||
		strings.Join(o.host.DeviceAllow, "|") != "/dev/loop7|/dev/nvme*n1" {
		t.Errorf("--device-allow parsed to %q, %v", o.host.DeviceAllow, err)
	}
	t.Setenv("NODE_NAME", "from-env")
	if o, err := parseOptions(base[:4], &bytes.Buffer{}); err != nil || o.nodeName != "from-env" {
		t.Errorf("NODE_NAME default: %v, %v", o.nodeName, err)
	}
}

// TestRun starts the agent as main does, against a real apiserver, calls it with a
// ServiceAccount token through the client library, and stops it as the kubelet would.
func TestRun(t *testing.T) {
	dir := t.TempDir()
	caPool, certFile, keyFile := writePKI(t, dir)
	kubeconfig := env.Kubeconfig(t)
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	tok := serviceAccountToken(t, cs)

	addr, healthAddr := testenv.FreeAddr(t), testenv.FreeAddr(t)

	ctx, cancel := context.WithCancel(context.Background())
	var logs testenv.LogBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{
			"--listen", addr, "--health-listen", healthAddr, "--tls-cert", certFile, "--tls-key", keyFile, "--node-name", "node-run",
			"--kubeconfig", kubeconfig, "--agent-root", filepath.Join(dir, "agent"), "--pv-root", filepath.Join(dir, "pv"),
			"--log-level", "debug",
		}, &logs)
	}()

	pool, err := nodeagent.NewPool(nodeagent.Config{
		Resolver: nodeagent.StaticResolver{"node-run": addr},
		CA:       nodeagent.StaticCA{Pool: caPool, ServerName: "node-agent.opsuite-system.svc"},
		Tokens:   nodeagent.StaticToken(tok),
		Options:  nodeagent.Options{Timeout: 10 * time.Second, Attempts: 20, Backoff: 100 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	c := pool.Node("node-run")
	rep, err := c.GetNodeReport(context.Background(), &nodeagentv1.GetNodeReportRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.NodeName != "node-run" || rep.Pool.GetType() != "memory" || len(rep.Sysctls) != 1 {
		t.Fatalf("report: %v", rep)
	}

	// A renewal (here a new CA too) is served without a restart: a client that trusts only
	// the new CA reaches the agent once it has looked at its files again.
	renewed := t.TempDir()
	newPool, newCert, newKey := writePKI(t, renewed)
	for from, to := range map[string]string{newKey: keyFile, newCert: certFile} {
		if err := os.Rename(from, to); err != nil {
			t.Fatal(err)
		}
	}
	renewedPool, err := nodeagent.NewPool(nodeagent.Config{
		Resolver: nodeagent.StaticResolver{"node-run": addr},
		CA:       nodeagent.StaticCA{Pool: newPool, ServerName: "node-agent.opsuite-system.svc"},
		Tokens:   nodeagent.StaticToken(tok),
		Options:  nodeagent.Options{Timeout: 2 * time.Second, Attempts: 30, Backoff: 100 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer renewedPool.Close()
	rctx, rcancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer rcancel()
	if _, err := renewedPool.Node("node-run").GetNodeReport(rctx, &nodeagentv1.GetNodeReportRequest{}); err != nil {
		t.Fatalf("after the certificate's renewal: %v", err)
	}
	if !strings.Contains(logs.String(), "Serving a new TLS certificate") {
		t.Fatalf("the reload is not logged:\n%s", logs.String())
	}

	// The plaintext listener answers health, and nothing else.
	hc, err := grpc.NewClient("passthrough:///"+healthAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer hc.Close()
	if hr, err := healthpb.NewHealthClient(hc).Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil || hr.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("plaintext health: %v, %v", hr, err)
	}
	if _, err := nodeagentv1.NewNodeAgentClient(hc).GetNodeReport(context.Background(), &nodeagentv1.GetNodeReportRequest{}); status.Code(err) != codes.Unimplemented {
		t.Fatalf("the plaintext listener serves the agent: %v", err)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the agent did not stop")
	}
	if strings.Contains(logs.String(), tok) {
		t.Fatal("the token appears in the logs")
	}
	if !strings.Contains(logs.String(), "GetNodeReport") {
		t.Fatalf("calls are not logged:\n%s", logs.String())
	}
}

func serviceAccountToken(t *testing.T, cs kubernetes.Interface) string {
	t.Helper()
	ctx := context.Background()
	const ns = "default"
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "reader"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "node-agent-report"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"nodeagent.opsuite.io"}, Resources: []string{"nodes"}, Verbs: []string{"get"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "node-agent-report"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "reader", Namespace: ns}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: "node-run", Labels: map[string]string{"pool.opsuite.io/type": "memory"},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "reader", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{contract.Audience("node-run")}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

func writePKI(t *testing.T, dir string) (*x509.CertPool, string, string) {
	t.Helper()
	pki := nodeagenttest.MustPKI(t, "node-agent.opsuite-system.svc")
	files, err := pki.WriteFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	return pki.Pool, files.Cert, files.Key
}
