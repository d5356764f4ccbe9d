package server

import (
	"context"
	"time"

	nodeagentv1 "github.com/opsuite/suite/proto/nodeagent/v1"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Metrics are the agent's own series, served on --metrics-bind-address. Every name starts
// with node_agent_; labels hold no node name (the scrape target carries it).
type Metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	diskOps  *prometheus.CounterVec
	prepare  prometheus.Histogram
}

// Disk operation outcomes of node_agent_disk_operations_total.
const (
	outcomeOK    = "ok"
	outcomeError = "error"
)

// NewMetrics makes the series and registers them on reg. The request series of every
// NodeAgent method, and the disk operations, exist at zero from the start, so a rate() or
// an alert on errors has a series before the first call.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "node_agent_grpc_requests_total",
			Help: "gRPC calls the agent answered, by full method and status code (refused ones included).",
		}, []string{"method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "node_agent_grpc_request_duration_seconds",
			Help:    "Time the agent took to answer a gRPC call, by full method.",
			Buckets: []float64{0.005, 0.025, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120},
		}, []string{"method"}),
		diskOps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "node_agent_disk_operations_total",
			Help: "Disks the agent prepared or released, by operation (prepare, release) and outcome (ok, error); a prepare of a disk already prepared counts as ok.",
		}, []string{"operation", "outcome"}),
		prepare: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "node_agent_disk_prepare_duration_seconds",
			Help:    "Time one disk's preparation took (partitioning, mkfs.xfs, mounting; near zero when it was already prepared).",
			Buckets: []float64{0.01, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 180},
		}),
	}
	for _, md := range nodeagentv1.NodeAgent_ServiceDesc.Methods {
		method := "/" + nodeagentv1.NodeAgent_ServiceDesc.ServiceName + "/" + md.MethodName
		m.requests.WithLabelValues(method, codes.OK.String())
		m.duration.WithLabelValues(method)
	}
	for _, op := range []string{"prepare", "release"} {
		for _, outcome := range []string{outcomeOK, outcomeError} {
			m.diskOps.WithLabelValues(op, outcome)
		}
	}
	reg.MustRegister(m.requests, m.duration, m.diskOps, m.prepare)
	return m
}

// Unary counts and times every unary call; it runs before the auth policy, so refused
// calls (Unauthenticated, PermissionDenied, ResourceExhausted) are counted too.
func (m *Metrics) Unary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		began := time.Now()
		resp, err := handler(ctx, req)
		m.requests.WithLabelValues(info.FullMethod, status.Code(err).String()).Inc()
		m.duration.WithLabelValues(info.FullMethod).Observe(time.Since(began).Seconds())
		return resp, err
	}
}

// diskOp counts one disk's operation; m may be nil (tests that want no metrics).
func (m *Metrics) diskOp(op string, err error) {
	if m == nil {
		return
	}
	outcome := outcomeOK
	if err != nil {
		outcome = outcomeError
	}
	m.diskOps.WithLabelValues(op, outcome).Inc()
}

func (m *Metrics) prepared(took time.Duration) {
	if m != nil {
		m.prepare.Observe(took.Seconds())
	}
}

// diskCollector reports what the agent holds at scrape time, from its records.
type diskCollector struct {
	s               *Server
	disks           *prometheus.Desc
	capacity        *prometheus.Desc
	fsSize, fsAvail *prometheus.Desc
}

// Collector reports the agent's prepared disks at scrape time:
// node_agent_prepared_disks{phase} (ready, preparing, missing: prepared but not found in
// place) and node_agent_prepared_bytes{partition} (xfs, raw) of the ready ones, and of each
// ready one's filesystem node_agent_prepared_filesystem_size_bytes and
// node_agent_prepared_filesystem_avail_bytes{fs_uuid, pv_path} (statfs of its mount, read
// at scrape time; a mount that cannot be read is left out, the agent's log says why).
func (s *Server) Collector() prometheus.Collector {
	return &diskCollector{
		s: s,
		disks: prometheus.NewDesc("node_agent_prepared_disks",
			"Disks the agent prepared, by phase: ready, preparing (interrupted or under way), missing (recorded but not found in place).", []string{"phase"}, nil),
		capacity: prometheus.NewDesc("node_agent_prepared_bytes",
			"Bytes of the ready prepared disks, by partition: xfs (the filesystem) and raw (the raw VLog partition).", []string{"partition"}, nil),
		fsSize: prometheus.NewDesc("node_agent_prepared_filesystem_size_bytes",
			"Size of a ready prepared disk's XFS filesystem, by its UUID and the PV path it is bound to.", []string{"fs_uuid", "pv_path"}, nil),
		fsAvail: prometheus.NewDesc("node_agent_prepared_filesystem_avail_bytes",
			"Bytes left to the pods on a ready prepared disk's XFS filesystem, by its UUID and the PV path it is bound to.", []string{"fs_uuid", "pv_path"}, nil),
	}
}

func (c *diskCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.disks
	ch <- c.capacity
	ch <- c.fsSize
	ch <- c.fsAvail
}

func (c *diskCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	s.mu.Lock()
	counts := map[string]int{phaseReady: 0, phasePreparing: 0, phaseMissing: 0}
	var xfs, raw int64
	var mounted []record
	for _, r := range s.records {
		phase := r.Phase
		if _, gone := s.missing[r.FSUUID]; gone {
			phase = phaseMissing
		}
		counts[phase]++
		if phase == phaseReady {
			xfs += r.XFSSizeBytes
			raw += r.RawSizeBytes
			mounted = append(mounted, r)
		}
	}
	s.mu.Unlock()
	// statfs outside the lock: a slow filesystem must not hold up the gRPC calls.
	for _, r := range mounted {
		size, avail, err := s.host.FilesystemUsage(r.MountPath)
		if err != nil {
			s.log.Warn("Reading a prepared disk's filesystem usage failed", "mount", r.MountPath, "error", err)
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.fsSize, prometheus.GaugeValue, float64(size), r.FSUUID, r.PVPath)
		ch <- prometheus.MustNewConstMetric(c.fsAvail, prometheus.GaugeValue, float64(avail), r.FSUUID, r.PVPath)
	}
	for phase, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.disks, prometheus.GaugeValue, float64(n), phase)
	}
	ch <- prometheus.MustNewConstMetric(c.capacity, prometheus.GaugeValue, float64(xfs), "xfs")
	ch <- prometheus.MustNewConstMetric(c.capacity, prometheus.GaugeValue, float64(raw), "raw")
}
