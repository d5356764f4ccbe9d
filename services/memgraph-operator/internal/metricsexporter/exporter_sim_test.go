package metricsexporter

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opsuite/suite/services/memgraph-operator/internal/memgraph/memgraphtest"
	"github.com/opsuite/suite/shared/testenv"
)

// TestExporterReadsSimulator runs bin/memgraph-sim as a data instance with --metrics-port
// (Memgraph's JSON document) and the exporter in front of it, scraped as Prometheus
// would: the graph's counts come out as vertex_count and edge_count with the pod as
// instance_name, CommitedTransactions too; once the instance is gone the scrape fails
// with 502 and says where it read.
func TestExporterReadsSimulator(t *testing.T) {
	metrics, stop := startSim(t)
	source := "http://" + metrics + "/metrics"
	srv := httptest.NewServer((&Exporter{Source: source, Instance: "demo-data-0", Timeout: 5 * time.Second}).Handler())
	t.Cleanup(srv.Close)

	scrape := func() (int, string, string) { return scrapeOnce(t, srv.URL) }
	code, ct, text := scrapeReady(t, srv.URL)
	if code != http.StatusOK || !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Fatalf("HTTP %d %q:\n%s", code, ct, text)
	}
	for _, want := range []string{`vertex_count{instance_name="demo-data-0"} 0`, `edge_count{instance_name="demo-data-0"} 0`,
		`CommitedTransactions{instance_name="demo-data-0"} `, "# TYPE memory_usage gauge"} {
		if !strings.Contains(text, "\n"+want) {
			t.Errorf("missing %q in:\n%s", want, text)
		}
	}

	stop()
	if code, _, text = scrape(); code != http.StatusBadGateway || !strings.Contains(text, source) {
		t.Errorf("with Memgraph gone: HTTP %d %q, want 502 naming %s", code, text, source)
	}
}

// TestExporterReadsSimulatorOverTLS: with --bolt-cert-file and --bolt-key-file Memgraph
// serves its metrics over HTTPS under the Bolt certificate (the simulator does too); the
// exporter pinned to that certificate reads them, pinned to another it refuses the
// server and says so, and plain HTTP gets nothing.
func TestExporterReadsSimulatorOverTLS(t *testing.T) {
	ca := testenv.NewCA(t, "bolt-ca")
	files := ca.WriteFiles(t, t.TempDir(), "memgraph-data-0.memgraph.default.svc")
	other := testenv.NewCA(t, "other-ca").WriteFiles(t, t.TempDir(), "memgraph-data-0.memgraph.default.svc")
	metrics, _ := startSim(t, "--bolt-cert-file="+files.Cert, "--bolt-key-file="+files.Key)

	pinned := httptest.NewServer((&Exporter{Source: "https://" + metrics + "/metrics", Instance: "demo-data-0", Timeout: 5 * time.Second,
		Client: PinnedClient(files.Cert)}).Handler())
	t.Cleanup(pinned.Close)
	if code, _, text := scrapeReady(t, pinned.URL); code != http.StatusOK || !strings.Contains(text, `vertex_count{instance_name="demo-data-0"} 0`) {
		t.Fatalf("pinned to the Bolt certificate: HTTP %d:\n%s", code, text)
	}
	wrong := httptest.NewServer((&Exporter{Source: "https://" + metrics + "/metrics", Timeout: 5 * time.Second, Client: PinnedClient(other.Cert)}).Handler())
	t.Cleanup(wrong.Close)
	if code, _, text := scrapeOnce(t, wrong.URL); code != http.StatusBadGateway || !strings.Contains(text, "a certificate other than "+other.Cert) {
		t.Errorf("pinned to another certificate: HTTP %d %q, want 502 naming the pin", code, text)
	}
	plain := httptest.NewServer((&Exporter{Source: "http://" + metrics + "/metrics", Timeout: 5 * time.Second}).Handler())
	t.Cleanup(plain.Close)
	if code, _, text := scrapeOnce(t, plain.URL); code != http.StatusBadGateway {
		t.Errorf("plain HTTP to a TLS metrics server: HTTP %d %q, want 502", code, text)
	}
}

// startSim runs bin/memgraph-sim as a data instance with --metrics-port and args; it
// returns the metrics address and what stops the process (also run at the test's end).
func startSim(t *testing.T, args ...string) (string, func()) {
	t.Helper()
	bolt, metrics := testenv.FreePortBelowEphemeral(t), testenv.FreePortBelowEphemeral(t)
	cmd := exec.Command(memgraphtest.SimBinary(t), append([]string{"--bolt-address=127.0.0.1", "--bolt-port=" + strconv.Itoa(bolt),
		"--metrics-port=" + strconv.Itoa(metrics), "--data-directory=" + t.TempDir()}, args...)...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
	}
	t.Cleanup(stop)
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(metrics)), stop
}

// scrapeOnce GETs the exporter's /metrics: status, Content-Type and body.
func scrapeOnce(t *testing.T, url string) (int, string, string) {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

// scrapeReady scrapes until the answer is 200 or 30 s went by (the simulator starting).
func scrapeReady(t *testing.T, url string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code, ct, text := scrapeOnce(t, url)
	for code != http.StatusOK && ctx.Err() == nil {
		time.Sleep(200 * time.Millisecond)
		code, ct, text = scrapeOnce(t, url)
	}
	return code, ct, text
}
