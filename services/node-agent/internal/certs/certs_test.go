package certs_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/opsuite/suite/services/node-agent/internal/certs"
	"github.com/opsuite/suite/shared/testenv"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

var env *testenv.Env

// TestMain runs against a real kube-apiserver: the CSR API, pod-bound tokens and the node
// name the apiserver derives from them are its own.
func TestMain(m *testing.M) { testenv.Main(m, &env) }

const (
	ns   = "node-agent-system"
	name = "node-agent.node-agent-system.svc"
)

// podClient is a client authenticated as sa with a token bound to a pod on node, as the
// kubelet mounts it in the agent's pod; node "" binds no pod.
func podClient(t *testing.T, admin kubernetes.Interface, sa, node string) kubernetes.Interface {
	t.Helper()
	ctx := context.Background()
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{}}
	if node != "" {
		pod, err := admin.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{GenerateName: sa + "-" + node + "-"},
			Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: sa,
				Containers: []corev1.Container{{Name: "agent", Image: "agent"}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		req.Spec.BoundObjectRef = &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}
	}
	tr, err := admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, req, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(env.Config)
	cfg.BearerToken = tr.Status.Token
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// TestPerNodeCertificates: the agent of node-a gets a certificate naming node-a.<name> from
// the signer; asking for another node's name, without a pod-bound token, or as another
// ServiceAccount is denied.
func TestPerNodeCertificates(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}))
	for _, sa := range []string{"node-agent", "intruder"} {
		must(admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}))
	}
	for _, node := range []string{"node-a", "node-b"} {
		must(admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{}))
	}
	// What the chart would grant the agents (and, here, the intruder too, so that only the
	// signer's check refuses it).
	must(admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "node-agent-csr"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"certificatesigningrequests"}, Verbs: []string{"create", "get"}}},
	}, metav1.CreateOptions{}))
	must(admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "node-agent-csr"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "node-agent-csr"},
		Subjects: []rbacv1.Subject{
			{Kind: rbacv1.ServiceAccountKind, Name: "node-agent", Namespace: ns},
			{Kind: rbacv1.ServiceAccountKind, Name: "intruder", Namespace: ns},
		},
	}, metav1.CreateOptions{}))

	ca := testenv.NewCA(t, "node-agent-ca")
	pool := ca.Pool()
	signer := &certs.Signer{Client: admin, CA: ca.Cert, Key: ca.Key, ServiceAccount: "system:serviceaccount:" + ns + ":node-agent", Name: name}
	go signer.Run(ctx, 100*time.Millisecond, func(err error) { t.Log(err) })

	agentA := podClient(t, admin, "node-agent", "node-a")
	cert, err := certs.Request(ctx, agentA, "node-a", name, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cert.Leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "node-a." + name, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Fatalf("the issued certificate: %v", err)
	}
	if cert.Leaf.VerifyHostname("node-b."+name) == nil || cert.Leaf.VerifyHostname(name) == nil {
		t.Fatalf("the certificate names more than node-a: %v", cert.Leaf.DNSNames)
	}
	if d := time.Until(cert.Leaf.NotAfter); d > time.Hour || d < 50*time.Minute {
		t.Fatalf("asked for an hour, valid for %s", d)
	}

	// The agent renews before expiry, without a restart.
	r := &certs.Renewer{Client: agentA, Node: "node-a", Name: name, TTL: time.Hour,
		RenewAt: func(*x509.Certificate) time.Time { return time.Now().Add(100 * time.Millisecond) }}
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	first := r.Certificate().Leaf.SerialNumber
	// Served as a listener serves it: each handshake asks GetCertificate.
	lis, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{GetCertificate: r.GetCertificate, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			go func() { _ = c.(*tls.Conn).Handshake(); _ = c.Close() }()
		}
	}()
	served := func() *big.Int {
		t.Helper()
		conn, err := tls.Dial("tcp", lis.Addr().String(), &tls.Config{RootCAs: pool, ServerName: "node-a." + name, MinVersion: tls.VersionTLS12})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber
	}
	if got := served(); got.Cmp(first) != 0 {
		t.Fatalf("served serial %x, want the first certificate's %x", got, first)
	}
	rctx, rcancel := context.WithCancel(ctx)
	defer rcancel()
	go r.Run(rctx)
	for deadline := time.Now().Add(30 * time.Second); r.Certificate().Leaf.SerialNumber.Cmp(first) == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the certificate was not renewed")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got, err := r.GetCertificate(nil); err != nil || got.Leaf.VerifyHostname("node-a."+name) != nil {
		t.Fatalf("the renewed certificate: %v", err)
	}
	// A new handshake presents the renewed certificate, the listener never restarted.
	if got := served(); got.Cmp(first) == 0 {
		t.Fatalf("a handshake after the renewal still presents serial %x", first)
	}
	rcancel()

	denied := []struct {
		name   string
		client kubernetes.Interface
		node   string
		reason string
	}{
		{"node-a's agent asking for node-b's name", agentA, "node-b", "must name node-a." + name + " alone"},
		{"a token bound to no pod", podClient(t, admin, "node-agent", ""), "node-a", "not bound to a pod"},
		{"another ServiceAccount on node-a", podClient(t, admin, "intruder", "node-a"), "node-a", "not the agents' ServiceAccount"},
	}
	for _, c := range denied {
		t.Run(c.name, func(t *testing.T) {
			_, err := certs.Request(ctx, c.client, c.node, name, time.Hour)
			if err == nil || !strings.Contains(err.Error(), "Denied") || !strings.Contains(err.Error(), c.reason) {
				t.Fatalf("got %v, want Denied with %q", err, c.reason)
			}
		})
	}
}
