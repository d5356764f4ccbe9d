package memgraphsim

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// metricsServer answers GET /metrics on --metrics-port in the Prometheus text format, with
// numbers the simulator really keeps: the graph's size and committed transactions on a data
// instance, the replication role, and whether a coordinator leads the Raft group.
//
// Memgraph Enterprise serves its metrics on the same port (9091 by default) as a JSON
// document, which memgraph/prometheus-exporter turns into Prometheus series named after
// its keys (vertex_count, edge_count, ...). The simulator serves those series itself,
// under the exporter's names where Memgraph has the number and memgraph_sim_* where it is
// the simulator's own, so a ServiceMonitor has something real to scrape on the local
// cluster; cmd/memgraph-sim/README.md says so.
type metricsServer struct {
	s   *Server
	lis net.Listener
	srv *http.Server
}

func startMetrics(s *Server, addr string) (*metricsServer, error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics server: %w", err)
	}
	m := &metricsServer{s: s, lis: lis}
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", m.serve)
	m.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := m.srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Warn("Metrics server stopped", "err", err)
		}
	}()
	return m, nil
}

func (m *metricsServer) close() {
	if m != nil {
		_ = m.srv.Close()
	}
}

func (m *metricsServer) serve(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	m.s.writeMetrics(w)
}

// writeMetrics writes the instance's series.
func (s *Server) writeMetrics(w io.Writer) {
	gauge := func(name, help string, v int64, labels string) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s gauge\n%s%s %d\n", name, help, name, name, labels, v)
	}
	if s.coord != nil {
		leader := int64(0)
		if s.coord.isLeader() {
			leader = 1
		}
		gauge("memgraph_sim_up", "1 while the simulated instance serves.", 1, `{role="coordinator"}`)
		gauge("memgraph_sim_raft_leader", "1 while this coordinator leads the Raft group.", leader, "")
		return
	}
	vertices, edges, committed := s.data.store.Stats()
	gauge("memgraph_sim_up", "1 while the simulated instance serves.", 1, fmt.Sprintf("{role=%q}", s.data.role()))
	gauge("vertex_count", "Vertex count.", vertices, "")
	gauge("edge_count", "Edge count.", edges, "")
	fmt.Fprintf(w, "# HELP CommittedTransactions Number of committed transactions.\n# TYPE CommittedTransactions counter\nCommittedTransactions %d\n", committed)
}
