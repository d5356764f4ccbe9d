package server_test

import (
	"context"
	"crypto/tls"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// grpcurlPath finds the grpcurl that tools/go.mod pins, built into <repo>/.cache/bin.
func grpcurlPath(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.work above the working directory: run the tests inside the repository")
		}
		dir = parent
	}
	bin := filepath.Join(dir, ".cache", "bin", "grpcurl")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("grpcurl not found at %s: build it with `cd tools && GOWORK=off go build -o ../.cache/bin/ github.com/fullstorydev/grpcurl/cmd/grpcurl`", bin)
	}
	return bin
}

// TestGRPCurl runs the diagnostics the README documents against the agent's real gRPC stack.
func TestGRPCurl(t *testing.T) {
	bin := grpcurlPath(t)
	e := newEnv(t)
	pki, files := newPKI(t)
	addr := serveAgent(t, e.srv, pki)

	run := func(args ...string) (string, error) {
		out, err := exec.Command(bin, args...).CombinedOutput()
		return string(out), err
	}
	out, err := run("-insecure", "-H", "authorization: Bearer reader-token", addr, "list")
	if err != nil {
		t.Fatalf("grpcurl list: %v\n%s", err, out)
	}
	for _, svc := range []string{"nodeagent.v1.NodeAgent", "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection"} {
		if !strings.Contains(out, svc) {
			t.Fatalf("grpcurl list lacks %s:\n%s", svc, out)
		}
	}
	out, err = run("-insecure", "-H", "authorization: Bearer reader-token", addr, "describe", "nodeagent.v1.NodeAgent")
	if err != nil || !strings.Contains(out, "rpc PrepareDisks") {
		t.Fatalf("grpcurl describe: %v\n%s", err, out)
	}

	// Verified TLS, as a careful operator would run it.
	out, err = run("-cacert", files.CA, "-servername", agentName, "-H", "authorization: Bearer reader-token",
		"-d", "{}", addr, "nodeagent.v1.NodeAgent/GetNodeReport")
	if err != nil || !strings.Contains(out, `"nodeName": "node-a"`) || !strings.Contains(out, `"vm.max_map_count"`) {
		t.Fatalf("grpcurl GetNodeReport: %v\n%s", err, out)
	}

	out, err = run("-insecure", "-d", "{}", addr, "nodeagent.v1.NodeAgent/GetNodeReport")
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || !strings.Contains(out, "Unauthenticated") {
		t.Fatalf("a call without a token: %v\n%s", err, out)
	}
	out, err = run("-insecure", "-H", "authorization: Bearer reader-token", "-d",
		`{"selector":{"paths":["/dev/null"]},"pvPath":"`+e.pv("x")+`"}`, addr, "nodeagent.v1.NodeAgent/PrepareDisks")
	if err == nil || !strings.Contains(out, "PermissionDenied") {
		t.Fatalf("a reader preparing a disk: %v\n%s", err, out)
	}

	out, err = run("-insecure", "-H", "authorization: Bearer reader-token", addr, "grpc.health.v1.Health/Check")
	if err != nil || !strings.Contains(out, "SERVING") {
		t.Fatalf("health: %v\n%s", err, out)
	}

	// Health itself answers without a token, for probes (grpcurl needs one for reflection).
	cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(
		credentials.NewTLS(&tls.Config{RootCAs: pki.Pool, ServerName: agentName})))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	hr, err := healthpb.NewHealthClient(cc).Check(context.Background(), &healthpb.HealthCheckRequest{})
	if err != nil || hr.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health without a token: %v, %v", hr, err)
	}
}
