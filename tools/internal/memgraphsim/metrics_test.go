package memgraphsim

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opsuite/suite/shared/testenv"
)

// TestMetricsEndpoint runs one coordinator and two data instances, each with
// --metrics-port, forms the cluster and scrapes them as Prometheus would:
//   - the coordinator reports itself the Raft leader;
//   - the MAIN and the replica report their roles, and after a CREATE of three nodes and
//     one relationship on the MAIN both count 3 vertices and 1 edge (SYNC replication) and
//     a committed transaction more than before;
//   - a process without --metrics-port opens no metrics listener.
func TestMetricsEndpoint(t *testing.T) {
	root := t.TempDir()
	tc := &testCluster{t: t, ilog: filepath.Join(root, "invariants.jsonl")}
	o := fastOptions(filepath.Join(root, "coord1"))
	o.CoordinatorID, o.CoordinatorPort, o.ManagementPort, o.BoltPort = 1, testenv.FreePortBelowEphemeral(t), testenv.FreePortBelowEphemeral(t), testenv.FreePortBelowEphemeral(t)
	o.MetricsPort = testenv.FreePortBelowEphemeral(t)
	tc.coords = append(tc.coords, &simProc{opts: o})
	for i := range 2 {
		o := fastOptions(filepath.Join(root, fmt.Sprintf("data%d", i)))
		o.ManagementPort, o.BoltPort, o.MetricsPort = testenv.FreePortBelowEphemeral(t), testenv.FreePortBelowEphemeral(t), testenv.FreePortBelowEphemeral(t)
		tc.data = append(tc.data, &simProc{opts: o})
	}
	for _, p := range append(append([]*simProc{}, tc.coords...), tc.data...) {
		tc.start(p)
		t.Cleanup(func() { tc.stop(p) })
	}
	tc.bootstrap()

	scrape := func(p *simProc) string {
		t.Helper()
		resp, err := http.Get("http://" + p.opts.Addr(p.opts.MetricsPort) + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
			t.Errorf("Content-Type %q, want the Prometheus text format", ct)
		}
		return string(b)
	}
	has := func(text string, lines ...string) {
		t.Helper()
		for _, l := range lines {
			if !strings.Contains(text, "\n"+l+"\n") {
				t.Errorf("metrics lack %q:\n%s", l, text)
			}
		}
	}
	has(scrape(tc.coords[0]), `memgraph_sim_up{role="coordinator"} 1`, "memgraph_sim_raft_leader 1")
	main, replica := tc.data[0], tc.data[1]
	before := scrape(main)
	has(before, `memgraph_sim_up{role="main"} 1`, "vertex_count 0", "edge_count 0")
	has(scrape(replica), `memgraph_sim_up{role="replica"} 1`, "vertex_count 0")

	mustRun(t, main, `CREATE (:Person {name: "ann"})-[:KNOWS]->(:Person {name: "bob"}), (:City {name: "Oslo"})`)
	after := scrape(main)
	has(after, "vertex_count 3", "edge_count 1")
	has(scrape(replica), "vertex_count 3", "edge_count 1")
	if committed(t, after) <= committed(t, before) {
		t.Errorf("CommittedTransactions %d after a CREATE, %d before", committed(t, after), committed(t, before))
	}

	// No flag, no listener: Memgraph's flag is what the operator passes.
	plain := fastOptions(filepath.Join(root, "plain"))
	plain.BoltPort = testenv.FreePortBelowEphemeral(t)
	p := &simProc{opts: plain}
	tc.start(p)
	t.Cleanup(func() { tc.stop(p) })
	if p.srv.mets != nil {
		t.Error("a metrics listener without --metrics-port")
	}
}

func committed(t *testing.T, text string) int64 {
	t.Helper()
	for _, l := range strings.Split(text, "\n") {
		var n int64
		if _, err := fmt.Sscanf(l, "CommittedTransactions %d", &n); err == nil {
			return n
		}
	}
	t.Fatalf("no CommittedTransactions in:\n%s", text)
	return 0
}
