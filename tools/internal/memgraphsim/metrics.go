package memgraphsim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/opsuite/suite/tools/internal/bolt"
)

// metricsServer answers GET /metrics on --metrics-port as Memgraph Enterprise does: one
// JSON document of sections ("General", "Transaction", "HighAvailability", ...), each a
// flat object of numbers named as in Memgraph's monitoring documentation. Prometheus
// cannot read it; memgraph/prometheus-exporter, or the operator's metrics-exporter
// sidecar, turns it into series named after the keys.
//
// The simulator serves only the keys whose numbers it really keeps (cmd/memgraph-sim/
// README.md lists them); the real server serves many more, which an exporter passes on
// the same way.
type metricsServer struct {
	s    *Server
	lis  net.Listener
	srv  *http.Server
	peak atomic.Uint64
}

// haCounts are the coordinator's HighAvailability counters.
type haCounts struct {
	becameLeader, failovers, raftFailedFailovers, noAliveFailovers atomic.Int64
}

// startMetrics serves the document on addr; with the Bolt certificate pair (certs) it
// serves HTTPS, as Memgraph does: its metrics server is given the Bolt server's SSL
// context, so --bolt-cert-file and --bolt-key-file make the metrics endpoint TLS only too.
func startMetrics(s *Server, addr string, certs *bolt.CertFiles) (*metricsServer, error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics server: %w", err)
	}
	if certs != nil {
		lis = bolt.TLSListener(lis, certs)
	}
	m := &metricsServer{s: s, lis: lis}
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", m.serve)
	mux.HandleFunc("/", m.serve) // Memgraph's documentation GETs both the root and /metrics
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
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(m.document())
}

// document is the instance's metrics as Memgraph's JSON: memory of this process, and on a
// data instance the graph's size, its data directory's size and committed transactions;
// on a coordinator the HighAvailability counters it keeps.
func (m *metricsServer) document() map[string]map[string]any {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	peak := m.peak.Load()
	for ms.Sys > peak && !m.peak.CompareAndSwap(peak, ms.Sys) {
		peak = m.peak.Load()
	}
	general := map[string]any{"memory_usage": ms.Sys, "peak_memory_usage": max(peak, ms.Sys)}
	doc := map[string]map[string]any{"General": general}
	if c := m.s.coord; c != nil {
		doc["HighAvailability"] = map[string]any{
			"BecomeLeaderSuccess":            c.counts.becameLeader.Load(),
			"SuccessfulFailovers":            c.counts.failovers.Load(),
			"RaftFailedFailovers":            c.counts.raftFailedFailovers.Load(),
			"NoAliveInstanceFailedFailovers": c.counts.noAliveFailovers.Load(),
		}
		return doc
	}
	vertices, edges, committed := m.s.data.store.Stats()
	degree := 0.0
	if vertices > 0 {
		degree = 2 * float64(edges) / float64(vertices)
	}
	general["vertex_count"], general["edge_count"], general["average_degree"] = vertices, edges, degree
	general["disk_usage"] = dirSize(m.s.opts.DataDirectory)
	// Memgraph's key is spelled with one m.
	doc["Transaction"] = map[string]any{"CommitedTransactions": committed}
	return doc
}

// dirSize is the bytes of the regular files under dir (what Memgraph's disk_usage counts
// of its data directory).
func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil //nolint:nilerr // a file removed during the walk is not an error
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}
