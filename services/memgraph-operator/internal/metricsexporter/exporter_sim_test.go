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
	bolt, metrics := testenv.FreePortBelowEphemeral(t), testenv.FreePortBelowEphemeral(t)
	cmd := exec.Command(memgraphtest.SimBinary(t), "--bolt-address=127.0.0.1", "--bolt-port="+strconv.Itoa(bolt),
		"--metrics-port="+strconv.Itoa(metrics), "--data-directory="+t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	source := "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(metrics)) + "/metrics"
	srv := httptest.NewServer((&Exporter{Source: source, Instance: "demo-data-0", Timeout: 5 * time.Second}).Handler())
	t.Cleanup(srv.Close)

	scrape := func() (int, string, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
	}
	var code int
	var ct, text string
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for code, ct, text = scrape(); code != http.StatusOK && ctx.Err() == nil; code, ct, text = scrape() {
		time.Sleep(200 * time.Millisecond) // the simulator is starting
	}
	if code != http.StatusOK || !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Fatalf("HTTP %d %q:\n%s", code, ct, text)
	}
	for _, want := range []string{`vertex_count{instance_name="demo-data-0"} 0`, `edge_count{instance_name="demo-data-0"} 0`,
		`CommitedTransactions{instance_name="demo-data-0"} `, "# TYPE memory_usage gauge"} {
		if !strings.Contains(text, "\n"+want) {
			t.Errorf("missing %q in:\n%s", want, text)
		}
	}

	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	stopped = true
	if code, _, text = scrape(); code != http.StatusBadGateway || !strings.Contains(text, source) {
		t.Errorf("with Memgraph gone: HTTP %d %q, want 502 naming %s", code, text, source)
	}
}
