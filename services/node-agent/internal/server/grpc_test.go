package server_test

import (
	"context"
	"crypto/tls"
	"net"
	"testing"
	"time"

	nodeagentv1 "github.com/opsuite/suite/proto/nodeagent/v1"
	"github.com/opsuite/suite/services/node-agent/internal/auth"
	"github.com/opsuite/suite/services/node-agent/internal/server"
	"github.com/opsuite/suite/shared/nodeagent"
	"github.com/opsuite/suite/shared/nodeagent/nodeagenttest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
)

const agentName = "node-agent.opsuite-system.svc"

// newPKI is a CA and a server certificate for the agent's service name, also written as PEM
// files for grpcurl.
func newPKI(t testing.TB) (*nodeagenttest.PKI, nodeagenttest.Files) {
	t.Helper()
	pki := nodeagenttest.MustPKI(t, agentName)
	files, err := pki.WriteFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return pki, files
}

// staticTokens stands in for TokenReview and SubjectAccessReview where the apiserver is not
// the subject of the test (latency, grpcurl); package kube tests the real reviews.
type staticTokens map[string]auth.Identity

func (s staticTokens) Authenticate(_ context.Context, token string) (auth.Identity, error) {
	id, ok := s[token]
	if !ok {
		return auth.Identity{}, auth.ErrUnauthenticated
	}
	return id, nil
}

func (s staticTokens) Authorize(_ context.Context, id auth.Identity, a auth.Attributes) (bool, string, error) {
	return id.User == "admin" || a.Verb == "get", "", nil
}

var testTokens = staticTokens{"admin-token": {User: "admin"}, "reader-token": {User: "reader"}}

// serveAgent runs the agent's full gRPC stack (TLS, auth, health, reflection) on 127.0.0.1.
func serveAgent(t testing.TB, srv *server.Server, pki *nodeagenttest.PKI) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := server.NewGRPCServer(srv, auth.Policy{Authn: testTokens, Authz: testTokens},
		credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{pki.Cert}}), server.NewHealth(), nil)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	return lis.Addr().String()
}

func dialAgent(t testing.TB, addr string, pki *nodeagenttest.PKI, token string) *nodeagent.Client {
	t.Helper()
	p, err := nodeagent.NewPool(nodeagent.Config{
		Resolver: nodeagent.StaticResolver{"node-a": addr},
		CA:       nodeagent.StaticCA{Pool: pki.Pool, ServerName: agentName},
		Tokens:   nodeagent.StaticToken(token),
		Options:  nodeagent.Options{Timeout: time.Minute, Attempts: 2, Backoff: 10 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p.Node("node-a")
}

func TestOverTheNetwork(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	pki, _ := newPKI(t)
	addr := serveAgent(t, e.srv, pki)
	dev := newLoop(t, e.root, 512*mib)

	reader := dialAgent(t, addr, pki, "reader-token")
	rep, err := reader.GetNodeReport(ctx, &nodeagentv1.GetNodeReportRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.NodeName != "node-a" || rep.Pool.GetNamespace() != "search" || rep.Pool.GetType() != "nvme" ||
		len(rep.Pool.GetLabels()) != 2 || rep.Capacity.GetCpuMillis() < 1000 || rep.Capacity.GetMemoryBytes() < 1<<20 {
		t.Fatalf("report: %v", rep)
	}
	var sawBoot, sawLoop bool
	for _, d := range rep.Devices {
		sawBoot = sawBoot || d.BootDisk && !d.Eligible && d.IneligibleReason == "is the boot disk"
		sawLoop = sawLoop || d.Path == dev && d.Eligible
	}
	if !sawBoot || !sawLoop {
		t.Fatalf("boot disk or blank loop device missing from the report: %v", rep.Devices)
	}

	_, err = reader.PrepareDisks(ctx, prepareReq(e.pv("v"), 0, dev))
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("reader prepared a disk: %v", err)
	}
	admin := dialAgent(t, addr, pki, "admin-token")
	if _, err := admin.PrepareDisks(ctx, prepareReq(e.pv("v"), 0, dev)); err != nil {
		t.Fatal(err)
	}
	anon := dialAgent(t, addr, pki, "forged")
	if _, err := anon.GetNodeReport(ctx, &nodeagentv1.GetNodeReportRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("forged token: %v", err)
	}
}
