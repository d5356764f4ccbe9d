package e2e

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	nodeagentv1 "github.com/opsuite/suite/proto/nodeagent/v1"
	"github.com/opsuite/suite/shared/nodeagent"
	"github.com/opsuite/suite/shared/nodeagent/contract"
)

// agentSignerName is the CSR signer of the agents' certificates
// (services/node-agent/internal/certs.SignerName, internal to the agent's module).
const agentSignerName = "nodeagent.opsuite.io/serving"

// TestNodeAgentPerNodeIdentity: a plain install gives every agent a certificate of its own,
// naming its node alone, issued by the chart's signer through the CSR API to the agents'
// ServiceAccount; a client that reaches node A's agent while asking for node B is refused
// in the TLS handshake, before any token minted for B is handed over; a request for an
// agent's name from anyone but the agents' ServiceAccount is denied.
func TestNodeAgentPerNodeIdentity(t *testing.T) {
	needRunner(t, "dialing every agent's pod address")
	needInstalled(t, "node-agent")
	s := serviceByName("node-agent")
	ctx := t.Context()
	begin := time.Now()

	ds, err := env.client.AppsV1().DaemonSets(s.namespace()).List(ctx, metav1.ListOptions{LabelSelector: selector(s.name)})
	if err != nil || len(ds.Items) != 1 {
		t.Fatalf("DaemonSet of %s: %v (%d found)", s.name, err, len(ds.Items))
	}
	fullname, agentSA := ds.Items[0].Name, ds.Items[0].Spec.Template.Spec.ServiceAccountName
	port := 0
	for _, p := range ds.Items[0].Spec.Template.Spec.Containers[0].Ports {
		if p.Name == "grpc" {
			port = int(p.ContainerPort)
		}
	}
	nodes, err := env.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil || len(nodes.Items) < 2 {
		t.Fatalf("nodes: %v (%d, want 2 or more)", err, len(nodes.Items))
	}
	addr := map[string]string{}
	err = poll(ctx, t, fmt.Sprintf("an agent Ready on each of %d nodes", len(nodes.Items)), 3*time.Minute, func(ctx context.Context) (bool, error) {
		ps, err := readyAgents(ctx, s)
		clear(addr)
		for _, p := range ps {
			addr[p.Spec.NodeName] = net.JoinHostPort(p.Status.PodIP, strconv.Itoa(port))
		}
		return len(addr) == len(nodes.Items), err
	})
	if err != nil {
		diagnose(ctx, t, s)
		t.Fatal(err)
	}
	names := make([]string, 0, len(addr))
	for n := range addr {
		names = append(names, n)
	}
	sort.Strings(names)

	// What clients read: the CA, and a server name standing for one name per node.
	cm, err := env.client.CoreV1().ConfigMaps(s.namespace()).Get(ctx, fullname+"-ca", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	serverName := strings.TrimSpace(cm.Data[nodeagent.ServerNameKey])
	if !strings.HasPrefix(serverName, contract.PerNodeServerNamePrefix) {
		t.Fatalf("ConfigMap %s-ca names %q: the default install is not per node (want %s<name>)", fullname, serverName, contract.PerNodeServerNamePrefix)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM([]byte(cm.Data[nodeagent.CAKey])) {
		t.Fatalf("ConfigMap %s-ca holds no PEM CA", fullname)
	}

	// Each agent serves its own key, under its node's name alone, verified by the CA.
	keys := map[string]string{}
	for _, node := range names {
		want := contract.NodeServerName(serverName, node)
		leaf, err := servedCertificate(ctx, addr[node], &tls.Config{RootCAs: roots, ServerName: want, MinVersion: tls.VersionTLS12})
		if err != nil {
			t.Errorf("node %s: the agent at %s does not verify as %s: %v", node, addr[node], want, err)
			continue
		}
		if !slices.Equal(leaf.DNSNames, []string{want}) || len(leaf.IPAddresses) > 0 {
			t.Errorf("node %s: the agent's certificate names %v %v, want %s alone", node, leaf.DNSNames, leaf.IPAddresses, want)
		}
		pub, _ := x509.MarshalPKIXPublicKey(leaf.PublicKey)
		if other, ok := keys[string(pub)]; ok {
			t.Errorf("the agents of %s and %s serve one key", other, node)
		}
		keys[string(pub)] = node
		t.Logf("node %s: agent at %s serves %s (serial %x, valid until %s)", node, addr[node], leaf.Subject.CommonName,
			leaf.SerialNumber.Bytes()[:4], leaf.NotAfter.UTC().Format(time.RFC3339))
	}

	// The attack, as a client sees it: node A's agent (or whoever holds its key)
	// answering for node B. The library refuses it in the handshake; no token for B is minted.
	a, b := names[0], names[1]
	var tokensAsked atomic.Int32
	tokens := nodeagent.TokenSourceFunc(func(ctx context.Context, audience string) (string, error) {
		tokensAsked.Add(1)
		// The agents' namespace's default ServiceAccount: authenticated, bound to nothing.
		return requestToken(ctx, s.namespace(), "default", audience)
	})
	dial := func(resolve nodeagent.StaticResolver) *nodeagent.Pool {
		p, err := nodeagent.NewPool(nodeagent.Config{
			Resolver: resolve,
			CA:       nodeagent.StaticCA{Pool: roots, ServerName: serverName},
			Tokens:   tokens,
			Options:  nodeagent.Options{Timeout: 20 * time.Second, Attempts: 1},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		return p
	}
	_, err = dial(nodeagent.StaticResolver{b: addr[a]}).Node(b).GetNodeReport(ctx, &nodeagentv1.GetNodeReportRequest{})
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), contract.NodeServerName(serverName, b)) {
		t.Errorf("node %s asked at node %s's agent: %v, want Unavailable naming %s", b, a, err, contract.NodeServerName(serverName, b))
	}
	if n := tokensAsked.Load(); n != 0 {
		t.Errorf("%d tokens for node %s were minted for a connection to node %s's agent, want 0", n, b, a)
	}
	t.Logf("node %s asked at node %s's agent: %v", b, a, err)
	// The same client at the right address gets through TLS and authentication: the agent
	// answers the unbound ServiceAccount PermissionDenied.
	_, err = dial(nodeagent.StaticResolver{b: addr[b]}).Node(b).GetNodeReport(ctx, &nodeagentv1.GetNodeReportRequest{})
	if status.Code(err) != codes.PermissionDenied || tokensAsked.Load() != 1 {
		t.Errorf("node %s at its own agent: %v after %d tokens, want PermissionDenied after 1", b, err, tokensAsked.Load())
	}

	// The signer issued each agent's certificate to the agents' ServiceAccount.
	csrs, err := env.client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{FieldSelector: "spec.signerName=" + agentSignerName})
	if err != nil {
		t.Fatal(err)
	}
	agentUser := "system:serviceaccount:" + s.namespace() + ":" + agentSA
	issued := map[string]bool{}
	for _, c := range csrs.Items {
		if c.Spec.Username == agentUser && len(c.Status.Certificate) > 0 && csrCondition(&c, certificatesv1.CertificateApproved) {
			if leaf, err := firstCertificate(c.Status.Certificate); err == nil && len(leaf.DNSNames) == 1 {
				issued[leaf.DNSNames[0]] = true
			}
		}
	}
	for _, node := range names {
		if !issued[contract.NodeServerName(serverName, node)] {
			t.Errorf("no CertificateSigningRequest of %s was issued for node %s", agentUser, node)
		}
	}

	// Anyone else asking for an agent's name is denied, with the reason.
	forgedName := contract.NodeServerName(serverName, a)
	forged := forgedCSR(t, forgedName)
	created, err := env.client.CertificatesV1().CertificateSigningRequests().Create(ctx, forged, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.client.CertificatesV1().CertificateSigningRequests().Delete(context.Background(), created.Name, metav1.DeleteOptions{})
	})
	var final *certificatesv1.CertificateSigningRequest
	err = poll(ctx, t, "the signer decides CertificateSigningRequest "+created.Name, time.Minute, func(ctx context.Context) (bool, error) {
		final, err = env.client.CertificatesV1().CertificateSigningRequests().Get(ctx, created.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return len(final.Status.Certificate) > 0 || csrCondition(final, certificatesv1.CertificateDenied), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(final.Status.Certificate) > 0 || !csrCondition(final, certificatesv1.CertificateDenied) {
		t.Fatalf("a request by %s for %s was issued, not denied", final.Spec.Username, forgedName)
	}
	for _, c := range final.Status.Conditions {
		if c.Type == certificatesv1.CertificateDenied {
			t.Logf("a request by %s for node %s's name: Denied, %s: %s", final.Spec.Username, a, c.Reason, c.Message)
		}
	}
	t.Logf("%d agents with their own certificates; whole test %s", len(keys), since(begin))
}

// readyAgents are the node agent release's Ready DaemonSet pods: the release also runs the
// certificate signer (a Deployment), which is no node's agent.
func readyAgents(ctx context.Context, s service) ([]corev1.Pod, error) {
	ps, err := readyPods(ctx, s)
	return slices.DeleteFunc(ps, func(p corev1.Pod) bool {
		return !slices.ContainsFunc(p.OwnerReferences, func(o metav1.OwnerReference) bool { return o.Kind == "DaemonSet" })
	}), err
}

// servedCertificate is the leaf an address serves, verified as cfg says.
func servedCertificate(ctx context.Context, addr string, cfg *tls.Config) (*x509.Certificate, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := (&tls.Dialer{Config: cfg}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.(*tls.Conn).ConnectionState().PeerCertificates[0], nil
}

func csrCondition(c *certificatesv1.CertificateSigningRequest, typ certificatesv1.RequestConditionType) bool {
	return slices.ContainsFunc(c.Status.Conditions, func(x certificatesv1.CertificateSigningRequestCondition) bool { return x.Type == typ })
}

func firstCertificate(chain []byte) (*x509.Certificate, error) {
	b, _ := pem.Decode(chain)
	if b == nil {
		return nil, fmt.Errorf("no PEM certificate")
	}
	return x509.ParseCertificate(b.Bytes)
}

// forgedCSR asks the agents' signer for name, as the suite's admin: not the agents'
// ServiceAccount, and no token bound to a pod on the node.
func forgedCSR(t *testing.T, name string) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: name}, DNSNames: []string{name}}, key)
	if err != nil {
		t.Fatal(err)
	}
	return &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-forged-"},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:           bytes.TrimSpace(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})),
			SignerName:        agentSignerName,
			ExpirationSeconds: ptr.To[int32](3600),
			Usages:            []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth},
		},
	}
}
