package main

import (
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
	"github.com/opsuite/suite/shared/testenv"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// TestPerNodeIdentity runs `node-agent signer` with the CA key and an agent with
// --tls-signer-name, as the chart's per-node mode would: the agent, with its own pod-bound
// ServiceAccount token, obtains a certificate naming its node, and a client verifying
// "*.<name>" reaches it as that node and refuses it as any other.
func TestPerNodeIdentity(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const (
		ns   = "per-node"
		node = "node-pn"
		name = "node-agent.per-node.svc"
	)
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
	must(cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{}))
	roles := map[string][]rbacv1.PolicyRule{
		// The agent's own rights in per-node mode: the chart's, plus its certificate requests.
		"pn-agent": {
			{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
			{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
			{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get"}},
			{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"certificatesigningrequests"}, Verbs: []string{"create", "get"}},
		},
		"pn-reader": {{APIGroups: []string{contract.Group}, Resources: []string{"nodes"}, Verbs: []string{"get"}}},
	}
	for sa, rules := range roles {
		must(cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}))
		must(cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: sa}, Rules: rules}, metav1.CreateOptions{}))
		must(cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: sa},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: sa},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns}},
		}, metav1.CreateOptions{}))
	}
	// The agent's token is bound to its pod on the node, as the kubelet mounts it.
	pod, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "agent"},
		Spec:       corev1.PodSpec{NodeName: node, ServiceAccountName: "pn-agent", Containers: []corev1.Container{{Name: "agent", Image: "agent"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	agentToken, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "pn-agent", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: env.Config.Host, CertificateAuthorityData: env.Config.CAData}
	kc.AuthInfos["agent"] = &clientcmdapi.AuthInfo{Token: agentToken.Status.Token}
	kc.Contexts["agent"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "agent"}
	kc.CurrentContext = "agent"
	agentKubeconfig := filepath.Join(dir, "agent.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, agentKubeconfig); err != nil {
		t.Fatal(err)
	}

	caPool, caCert, caKey := writeCA(t, dir)
	var signerLogs, agentLogs testenv.LogBuffer
	signerDone := make(chan error, 1)
	go func() {
		signerDone <- runSigner(ctx, []string{"--ca-cert", caCert, "--ca-key", caKey, "--agent-service-account", ns + "/pn-agent",
			"--name", name, "--interval", "100ms", "--kubeconfig", env.Kubeconfig(t)}, &signerLogs)
	}()
	addr := testenv.FreeAddr(t)
	agentDone := make(chan error, 1)
	go func() {
		agentDone <- run(ctx, []string{"--listen", addr, "--tls-signer-name", name, "--tls-signer-ttl", "1h", "--node-name", node,
			"--kubeconfig", agentKubeconfig, "--agent-root", filepath.Join(dir, "agent"), "--pv-root", filepath.Join(dir, "pv")}, &agentLogs)
	}()

	tokens, err := nodeagent.NewTokenRequester(env.Config, ns, "pn-reader")
	if err != nil {
		t.Fatal(err)
	}
	pool := func(asNode string, attempts int) *nodeagent.Client {
		p, err := nodeagent.NewPool(nodeagent.Config{
			Resolver: nodeagent.StaticResolver{asNode: addr},
			CA:       nodeagent.StaticCA{Pool: caPool, ServerName: contract.PerNodeServerNamePrefix + name},
			Tokens:   tokens,
			Options:  nodeagent.Options{Timeout: 5 * time.Second, Attempts: attempts, Backoff: 250 * time.Millisecond},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		return p.Node(asNode)
	}
	rep, err := pool(node, 40).GetNodeReport(ctx, &nodeagentv1.GetNodeReportRequest{})
	if err != nil {
		t.Fatalf("reaching %s's agent by its own name: %v\nagent: %s\nsigner: %s", node, err, agentLogs.String(), signerLogs.String())
	}
	if rep.NodeName != node {
		t.Fatalf("report of %s", rep.NodeName)
	}
	// The same agent, dialed as another node's, does not pass: its certificate names node-pn.
	if _, err := pool("node-other", 1).GetNodeReport(ctx, &nodeagentv1.GetNodeReportRequest{}); status.Code(err) != codes.Unavailable ||
		!strings.Contains(err.Error(), "node-other."+name) {
		t.Fatalf("node-pn's agent dialed as node-other: %v", err)
	}

	cancel()
	for _, done := range []chan error{agentDone, signerDone} {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("did not stop")
		}
	}
	if strings.Contains(agentLogs.String(), agentToken.Status.Token) {
		t.Fatal("the agent's token is logged")
	}
}

// writeCA writes a CA certificate and key, as the chart's signer Secret would hold them.
func writeCA(t *testing.T, dir string) (*x509.CertPool, string, string) {
	t.Helper()
	ca := testenv.NewCA(t, "node-agent-ca")
	certFile, keyFile := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	for file, b := range map[string][]byte{certFile: ca.PEM, keyFile: ca.KeyPEM} {
		if err := os.WriteFile(file, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return ca.Pool(), certFile, keyFile
}
