package server_test

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	nodeagentv1 "github.com/opsuite/suite/proto/nodeagent/v1"
	"github.com/opsuite/suite/services/node-agent/internal/auth"
	"github.com/opsuite/suite/services/node-agent/internal/server"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
)

// TestMetrics runs the agent's gRPC stack with its metrics on a real loop device and
// scrapes the Prometheus text the agent serves:
//   - before any call every NodeAgent method has a request series at 0 and the disk
//     operations exist at 0;
//   - a refused call (no valid token) counts as Unauthenticated, a report as OK;
//   - a disk prepared through gRPC (mkfs.xfs on the loop device) counts as a prepare, shows
//     as one ready disk with its bytes and a prepare duration, and its filesystem's size
//     and space left by UUID and PV path (statfs of the real XFS); 100 MiB written under the
//     PV path take at least 100 MiB off the space left; released, it counts as a release,
//     the ready disks drop to 0 and the filesystem series go.
func TestMetrics(t *testing.T) {
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	m := server.NewMetrics(reg)
	e := newEnv(t, func(o *server.Options) { o.Metrics = m })
	reg.MustRegister(e.srv.Collector())
	pki, _ := newPKI(t)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := server.NewGRPCServer(e.srv, auth.Policy{Authn: testTokens, Authz: testTokens},
		credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{pki.Cert}}), server.NewHealth(), m)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	hs := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(hs.Close)
	scrape := func() string {
		t.Helper()
		resp, err := http.Get(hs.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	want := func(text string, lines ...string) {
		t.Helper()
		for _, l := range lines {
			if !strings.Contains(text, l+"\n") {
				t.Errorf("metrics lack %q", l)
			}
		}
	}
	const report = "/nodeagent.v1.NodeAgent/GetNodeReport"
	const prepare = "/nodeagent.v1.NodeAgent/PrepareDisks"
	want(scrape(),
		`node_agent_grpc_requests_total{code="OK",method="`+report+`"} 0`,
		`node_agent_grpc_requests_total{code="OK",method="`+prepare+`"} 0`,
		`node_agent_disk_operations_total{operation="prepare",outcome="ok"} 0`,
		`node_agent_disk_operations_total{operation="release",outcome="error"} 0`,
		`node_agent_prepared_disks{phase="ready"} 0`,
	)

	addr := lis.Addr().String()
	if _, err := dialAgent(t, addr, pki, "forged").GetNodeReport(ctx, &nodeagentv1.GetNodeReportRequest{}); err == nil {
		t.Fatal("a forged token got a report")
	} else {
		wantCode(t, err, codes.Unauthenticated)
	}
	admin := dialAgent(t, addr, pki, "admin-token")
	if _, err := admin.GetNodeReport(ctx, &nodeagentv1.GetNodeReportRequest{}); err != nil {
		t.Fatal(err)
	}
	dev := newLoop(t, e.root, 512*mib)
	resp, err := admin.PrepareDisks(ctx, prepareReq(e.pv("vol-m"), 0, dev))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetDisks()) != 1 {
		t.Fatalf("prepared %d disks, want 1", len(resp.GetDisks()))
	}
	text := scrape()
	want(text,
		`node_agent_grpc_requests_total{code="Unauthenticated",method="`+report+`"} 1`,
		`node_agent_grpc_requests_total{code="OK",method="`+report+`"} 1`,
		`node_agent_grpc_requests_total{code="OK",method="`+prepare+`"} 1`,
		`node_agent_grpc_request_duration_seconds_count{method="`+prepare+`"} 1`,
		`node_agent_disk_operations_total{operation="prepare",outcome="ok"} 1`,
		`node_agent_disk_prepare_duration_seconds_count 1`,
		`node_agent_prepared_disks{phase="ready"} 1`,
		`node_agent_prepared_disks{phase="missing"} 0`,
	)
	if strings.Contains(text, `node_agent_prepared_bytes{partition="xfs"} 0`+"\n") {
		t.Errorf("a ready disk of 512 MiB shows no bytes:\n%s", text)
	}
	d := resp.GetDisks()[0]
	fsLabels := `{fs_uuid="` + d.GetFilesystemUuid() + `",pv_path="` + e.pv("vol-m") + `"}`
	size, avail := gauge(t, text, "node_agent_prepared_filesystem_size_bytes"+fsLabels), gauge(t, text, "node_agent_prepared_filesystem_avail_bytes"+fsLabels)
	if size < 400*mib || size > 512*mib || avail <= 0 || avail > size {
		t.Errorf("filesystem size %v, avail %v: want the XFS of a 512 MiB disk, mostly free", size, avail)
	}
	fill := filepath.Join(e.pv("vol-m"), "fill")
	if err := os.WriteFile(fill, make([]byte, 100*mib), 0o600); err != nil {
		t.Fatal(err)
	}
	if after := gauge(t, scrape(), "node_agent_prepared_filesystem_avail_bytes"+fsLabels); avail-after < 100*mib {
		t.Errorf("100 MiB written: space left %v, was %v", after, avail)
	}
	if err := os.Remove(fill); err != nil {
		t.Fatal(err)
	}

	if _, err := e.srv.ReleaseDisks(ctx, &nodeagentv1.ReleaseDisksRequest{PvPath: e.pv("vol-m"), Namespace: testNamespace}); err != nil {
		t.Fatal(err)
	}
	text = scrape()
	want(text,
		`node_agent_disk_operations_total{operation="release",outcome="ok"} 1`,
		`node_agent_prepared_disks{phase="ready"} 0`,
		`node_agent_prepared_bytes{partition="xfs"} 0`,
	)
	if strings.Contains(text, "node_agent_prepared_filesystem_") {
		t.Errorf("a released disk keeps its filesystem series:\n%s", text)
	}
}

// gauge is the value of the series (name and labels, as written) in text.
func gauge(t *testing.T, text, series string) float64 {
	t.Helper()
	for _, l := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(l, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatalf("no series %s in:\n%s", series, text)
	return 0
}
