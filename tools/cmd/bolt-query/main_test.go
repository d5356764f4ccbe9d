package main

import (
	"bytes"
	"context"
	"net"
	"reflect"
	"strings"
	"testing"

	"github.com/opsuite/suite/shared/testenv"
	"github.com/opsuite/suite/tools/internal/memgraphsim"
)

func TestSplit(t *testing.T) {
	got := split("CREATE (:P {name: 'a;b'}); MATCH (n) RETURN n;\n  ;SHOW REPLICATION ROLE")
	want := []string{"CREATE (:P {name: 'a;b'})", "MATCH (n) RETURN n", "SHOW REPLICATION ROLE"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("split = %q, want %q", got, want)
	}
}

// TestAgainstSimulator runs the README's queries against a simulator data instance that
// requires a login, as the sample's data instances do.
func TestAgainstSimulator(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv, err := memgraphsim.Start(ctx, memgraphsim.Options{BoltAddress: "127.0.0.1", DataDirectory: t.TempDir(),
		User: "memgraph-admin", Password: "s3cret", ManagementPort: 0}, memgraphsim.NewLogger(memgraphsim.Options{LogLevel: "WARNING"}))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Close() }()
	host, port, _ := net.SplitHostPort(srv.BoltAddr())
	args := []string{"--host", host, "--port", port, "--username", "memgraph-admin", "--password", "s3cret"}
	var out bytes.Buffer
	in := strings.NewReader(`CREATE (:Person {name: "Ada"}); MATCH (n:Person) RETURN count(n) AS people; SHOW REPLICATION ROLE;`)
	if err := run(ctx, args, in, &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	t.Logf("output:\n%s", out.String())
	if len(lines) != 4 || strings.TrimSpace(lines[0]) != "people" || strings.TrimSpace(lines[1]) != "1" || !strings.Contains(lines[3], "main") {
		t.Fatalf("output:\n%s", out.String())
	}
	// Without the password the data instance refuses the login.
	err = run(ctx, []string{"--host", host, "--port", port}, strings.NewReader("MATCH (n) RETURN n;"), &out)
	if err == nil || !strings.Contains(strings.ToLower(err.Error()), "auth") {
		t.Fatalf("no credentials: %v, want an authentication failure", err)
	}
	t.Logf("no credentials: %v", err)
	// --route asks for a routing table, which only a coordinator gives.
	err = run(ctx, append(args, "--route"), strings.NewReader(""), &out)
	if err == nil || !strings.Contains(err.Error(), memgraphsim.ErrRouteOnDataInstance) {
		t.Fatalf("--route on a data instance: %v, want %q", err, memgraphsim.ErrRouteOnDataInstance)
	}
}

// TestTLS: --use-ssl with --ca-file and --server-name reaches a member serving Bolt over
// TLS by its IP address with a certificate for its DNS name; without the CA it is refused.
func TestTLS(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := t.TempDir()
	ca := testenv.NewCA(t, "bolt-query test CA")
	files := ca.WriteFiles(t, dir, "memgraph-tls-data-0.memgraph-tls-data.default.svc.cluster.local")
	caFile := files.CA
	srv, err := memgraphsim.Start(ctx, memgraphsim.Options{BoltAddress: "127.0.0.1", DataDirectory: t.TempDir(),
		BoltCertFile: files.Cert, BoltKeyFile: files.Key}, memgraphsim.NewLogger(memgraphsim.Options{LogLevel: "WARNING"}))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Close() }()
	host, port, _ := net.SplitHostPort(srv.BoltAddr())
	var out bytes.Buffer
	args := []string{"--host", host, "--port", port, "--use-ssl", "--ca-file", caFile,
		"--server-name", "memgraph-tls-data-0.memgraph-tls-data.default.svc.cluster.local"}
	if err := run(ctx, args, strings.NewReader("SHOW REPLICATION ROLE;"), &out); err != nil || !strings.Contains(out.String(), "main") {
		t.Fatalf("over TLS: %v, output %q", err, out.String())
	}
	noCA := []string{"--host", host, "--port", port, "--use-ssl", "--server-name", "memgraph-tls-data-0.memgraph-tls-data.default.svc.cluster.local"}
	if err := run(ctx, noCA, strings.NewReader("SHOW REPLICATION ROLE;"), &out); err == nil || !strings.Contains(err.Error(), "unknown authority") {
		t.Fatalf("without the CA: %v, want a certificate signed by an unknown authority", err)
	}
	if err := run(ctx, []string{"--host", host, "--port", port, "--use-ssl", "--ca-file", caFile}, strings.NewReader("SHOW REPLICATION ROLE;"), &out); err == nil {
		t.Fatal("an IP address the certificate does not name was accepted without --server-name")
	}
}
