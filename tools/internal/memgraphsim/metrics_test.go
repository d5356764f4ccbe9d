package memgraphsim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/opsuite/suite/shared/testenv"
)

// TestMetricsEndpoint runs one coordinator and two data instances, each with
// --metrics-port, forms the cluster and reads their metrics as memgraph/prometheus-exporter
// would: one JSON document of sections of numbers (Memgraph Enterprise's shape), so
//   - the coordinator counts one leadership won and no failover;
//   - after a CREATE of three nodes and one relationship on the MAIN, the MAIN and the
//     replica both count 3 vertices and 1 edge (SYNC replication), the MAIN a committed
//     transaction more than before, and both a data directory that is not empty;
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

	type doc map[string]map[string]float64
	read := func(p *simProc) doc {
		t.Helper()
		resp, err := http.Get("http://" + p.opts.Addr(p.opts.MetricsPort) + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("Content-Type %q, want Memgraph's application/json", ct)
		}
		var d doc
		if err := json.NewDecoder(resp.Body).Decode(&d); err != nil {
			t.Fatalf("not Memgraph's JSON shape (sections of numbers): %v", err)
		}
		return d
	}
	want := func(who string, d doc, section, key string, ok func(float64) bool, what string) {
		t.Helper()
		v, found := d[section][key]
		if !found || !ok(v) {
			t.Errorf("%s: %s.%s = %v (present %v), want %s; document %v", who, section, key, v, found, what, d)
		}
	}
	eq := func(n float64) func(float64) bool { return func(v float64) bool { return v == n } }
	positive := func(v float64) bool { return v > 0 }

	coord := read(tc.coords[0])
	want("coordinator", coord, "HighAvailability", "BecomeLeaderSuccess", eq(1), "1")
	want("coordinator", coord, "HighAvailability", "SuccessfulFailovers", eq(0), "0")
	want("coordinator", coord, "General", "memory_usage", positive, "> 0")
	if _, ok := coord["General"]["vertex_count"]; ok {
		t.Error("a coordinator reports vertex_count: coordinators have no storage")
	}
	main, replica := tc.data[0], tc.data[1]
	before := read(main)
	want("main", before, "General", "vertex_count", eq(0), "0")

	mustRun(t, main, `CREATE (:Person {name: "ann"})-[:KNOWS]->(:Person {name: "bob"}), (:City {name: "Oslo"})`)
	for who, p := range map[string]*simProc{"main": main, "replica": replica} {
		d := read(p)
		want(who, d, "General", "vertex_count", eq(3), "3")
		want(who, d, "General", "edge_count", eq(1), "1")
		want(who, d, "General", "average_degree", eq(2.0/3), "2/3")
		want(who, d, "General", "disk_usage", positive, "> 0")
	}
	after := read(main)
	want("main", after, "Transaction", "CommitedTransactions", func(v float64) bool { return v > before["Transaction"]["CommitedTransactions"] },
		fmt.Sprintf("more than %v before the CREATE", before["Transaction"]["CommitedTransactions"]))

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
