package nodeagent_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	nodeagentv1 "github.com/opsuite/suite/proto/nodeagent/v1"
	"github.com/opsuite/suite/shared/nodeagent"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// scriptedAgent answers GetNodeReport with the scripted errors first, then a report, and
// records the authorization header of every call.
type scriptedAgent struct {
	nodeagentv1.UnimplementedNodeAgentServer
	mu     sync.Mutex
	errs   []error
	calls  int
	tokens []string
}

func (a *scriptedAgent) GetNodeReport(ctx context.Context, _ *nodeagentv1.GetNodeReportRequest) (*nodeagentv1.GetNodeReportResponse, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls++
	md, _ := metadata.FromIncomingContext(ctx)
	a.tokens = append(a.tokens, md.Get("authorization")...)
	if len(a.errs) > 0 {
		err := a.errs[0]
		a.errs = a.errs[1:]
		return nil, err
	}
	return &nodeagentv1.GetNodeReportResponse{NodeName: "node-a"}, nil
}

func counterTokens() nodeagent.TokenSource {
	var n atomic.Int64
	return nodeagent.TokenSourceFunc(func(context.Context) (string, error) {
		return fmt.Sprintf("token-%d", n.Add(1)), nil
	})
}

var fast = nodeagent.Options{Timeout: 5 * time.Second, Attempts: 4, Backoff: time.Millisecond}

func TestRetriesUnavailableOnly(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name      string
		errs      []error
		wantCode  codes.Code
		wantCalls int
	}{
		{"unavailable then ok", []error{status.Error(codes.Unavailable, "x"), status.Error(codes.Unavailable, "x")}, codes.OK, 3},
		{"unavailable exhausts attempts", []error{
			status.Error(codes.Unavailable, "x"), status.Error(codes.Unavailable, "x"),
			status.Error(codes.Unavailable, "x"), status.Error(codes.Unavailable, "x"), status.Error(codes.Unavailable, "x"),
		}, codes.Unavailable, 4},
		{"failed precondition is final", []error{status.Error(codes.FailedPrecondition, "boot disk")}, codes.FailedPrecondition, 1},
		{"permission denied is final", []error{status.Error(codes.PermissionDenied, "no")}, codes.PermissionDenied, 1},
		{"deadline is final", []error{status.Error(codes.DeadlineExceeded, "slow")}, codes.DeadlineExceeded, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			agent := &scriptedAgent{errs: c.errs}
			cl, err := nodeagent.Embedded(agent, counterTokens(), fast)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			_, err = cl.GetNodeReport(ctx, &nodeagentv1.GetNodeReportRequest{})
			if status.Code(err) != c.wantCode {
				t.Fatalf("got %v, want %v", err, c.wantCode)
			}
			if agent.calls != c.wantCalls {
				t.Fatalf("%d calls, want %d", agent.calls, c.wantCalls)
			}
			// A fresh token for every attempt.
			for i, tok := range agent.tokens {
				if want := fmt.Sprintf("Bearer token-%d", i+1); tok != want {
					t.Fatalf("call %d sent %q, want %q", i, tok, want)
				}
			}
		})
	}
}

func TestTokenErrorIsUnauthenticatedAndNotRetried(t *testing.T) {
	agent := &scriptedAgent{}
	cl, err := nodeagent.Embedded(agent, nodeagent.FileTokenSource("/nonexistent/token"), fast)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	_, err = cl.GetNodeReport(context.Background(), &nodeagentv1.GetNodeReportRequest{})
	if status.Code(err) != codes.Unauthenticated || agent.calls != 0 {
		t.Fatalf("got %v after %d calls", err, agent.calls)
	}
}

// testPKI is a CA and a server certificate for the agent's service name.
type testPKI struct {
	pool   *x509.CertPool
	server tls.Certificate
}

func newPKI(t *testing.T, serverName string) testPKI {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "node-agent-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: serverName}, DNSNames: []string{serverName},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return testPKI{pool: pool, server: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}}
}

// serveTLS serves an agent on 127.0.0.1 with the given certificate.
func serveTLS(t *testing.T, agent nodeagentv1.NodeAgentServer, cert tls.Certificate) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}})))
	nodeagentv1.RegisterNodeAgentServer(gs, agent)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	return lis.Addr().String()
}

func TestDialAddressVerifiesTLS(t *testing.T) {
	const name = "node-agent.opsuite-system.svc"
	pki := newPKI(t, name)
	agent := &scriptedAgent{}
	addr := serveTLS(t, agent, pki.server)

	d := &nodeagent.Dialer{RootCAs: pki.pool, ServerName: name, Tokens: counterTokens(), Options: fast}
	cl, err := d.DialAddress(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	rep, err := cl.GetNodeReport(context.Background(), &nodeagentv1.GetNodeReportRequest{})
	if err != nil || rep.NodeName != "node-a" {
		t.Fatalf("%v, %v", rep, err)
	}
	if len(agent.tokens) != 1 || agent.tokens[0] != "Bearer token-1" {
		t.Fatalf("tokens sent: %v", agent.tokens)
	}

	t.Run("other CA", func(t *testing.T) {
		other := newPKI(t, name)
		d := &nodeagent.Dialer{RootCAs: other.pool, ServerName: name, Tokens: counterTokens(), Options: fast}
		cl, err := d.DialAddress(addr)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		before := agent.calls
		_, err = cl.GetNodeReport(context.Background(), &nodeagentv1.GetNodeReportRequest{})
		if status.Code(err) != codes.Unavailable || agent.calls != before {
			t.Fatalf("got %v; the agent saw %d calls", err, agent.calls-before)
		}
	})
	t.Run("other name", func(t *testing.T) {
		d := &nodeagent.Dialer{RootCAs: pki.pool, ServerName: "evil.example", Tokens: counterTokens(), Options: fast}
		cl, err := d.DialAddress(addr)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		if _, err := cl.GetNodeReport(context.Background(), &nodeagentv1.GetNodeReportRequest{}); status.Code(err) != codes.Unavailable {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("agent down is retried then Unavailable", func(t *testing.T) {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		dead := lis.Addr().String()
		lis.Close()
		cl, err := d.DialAddress(dead)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		if _, err := cl.GetNodeReport(context.Background(), &nodeagentv1.GetNodeReportRequest{}); status.Code(err) != codes.Unavailable {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("required fields", func(t *testing.T) {
		if _, err := (&nodeagent.Dialer{}).DialAddress(addr); err == nil {
			t.Fatal("dialed without CA, name and tokens")
		}
	})
}
