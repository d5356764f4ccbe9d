// Command node-agent is the node DaemonSet: a gRPC service that reports the node and prepares
// its disks and sysctls for the data planes.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/opsuite/suite/services/node-agent/internal/auth"
	"github.com/opsuite/suite/services/node-agent/internal/certs"
	"github.com/opsuite/suite/services/node-agent/internal/host"
	"github.com/opsuite/suite/services/node-agent/internal/kube"
	"github.com/opsuite/suite/services/node-agent/internal/server"
	"github.com/opsuite/suite/services/node-agent/internal/tlscert"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// version is set at link time (-ldflags "-X main.version=...").
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	run := run
	if len(os.Args) > 1 && os.Args[1] == "signer" { // the per-node certificates' signer (signer.go)
		run, os.Args = runSigner, os.Args[1:]
	}
	if err := run(ctx, os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "node-agent:", err)
		os.Exit(1)
	}
}

// options is everything the agent is configured with, validated once.
type options struct {
	listen           string
	healthListen     string
	metricsListen    string
	tlsCert, tlsKey  string
	tlsSignerName    string
	tlsTTL           time.Duration
	nodeName         string
	poolLabelPrefix  string
	agentRoot        string
	pvRoot           string
	stateFile        string
	allowRaiseSysctl bool
	allowLoopDevices bool
	maxMapCount      int64
	logLevel         string
	kubeconfig       string
	host             host.Config
	shutdownTimeout  time.Duration
	reviewCache      auth.CacheConfig
	peerLimits       auth.PeerLimits
	keyRefresh       time.Duration
	kubeQPS          float64
	kubeBurst        int
}

func parseOptions(args []string, output io.Writer) (options, error) {
	o := options{host: host.DefaultConfig()}
	fs := flag.NewFlagSet("node-agent", flag.ContinueOnError)
	fs.SetOutput(output)
	fs.StringVar(&o.listen, "listen", ":7443", "TCP address of the gRPC listener")
	fs.StringVar(&o.healthListen, "health-listen", "", "plaintext address serving only grpc.health.v1, for kubelet probes (empty: none)")
	fs.StringVar(&o.metricsListen, "metrics-bind-address", "", "plaintext HTTP address serving Prometheus metrics at /metrics: the agent's gRPC calls and disks (empty: none)")
	fs.StringVar(&o.tlsCert, "tls-cert", "", "PEM certificate of the listener (required; read again when it changes)")
	fs.StringVar(&o.tlsKey, "tls-key", "", "PEM private key of the listener (required)")
	fs.StringVar(&o.tlsSignerName, "tls-signer-name", "", "instead of --tls-cert and --tls-key: a key made at start and a certificate naming <node>.<this name> from the node-agent signer (CSR API), renewed before it expires")
	fs.DurationVar(&o.tlsTTL, "tls-signer-ttl", 24*time.Hour, "lifetime asked of the signer (at least 10m)")
	fs.StringVar(&o.nodeName, "node-name", os.Getenv("NODE_NAME"), "name of the Node the agent runs on (default $NODE_NAME)")
	fs.StringVar(&o.poolLabelPrefix, "pool-label-prefix", "pool.opsuite.io", "prefix of the node-pool labels <prefix>/namespace and <prefix>/type")
	fs.StringVar(&o.agentRoot, "agent-root", "/var/lib/opsuite-node-agent", "directory where the agent mounts the filesystems it makes")
	fs.StringVar(&o.pvRoot, "pv-root", "/mnt/opsuite", "the only tree under which PV source paths may be bind-mounted")
	fs.StringVar(&o.stateFile, "state-file", "", "file remembering what the agent prepared (default <agent-root>/state.json)")
	fs.BoolVar(&o.allowRaiseSysctl, "allow-raise-sysctl", false, "allow EnsureSysctl to raise values (never lowers them)")
	fs.BoolVar(&o.allowLoopDevices, "allow-loop-devices", false, "allow preparing loop devices (tests only)")
	// Disks are offered for preparation explicitly; one not offered is reported, never prepared.
	fs.Func("device-allow", "comma-separated globs of device paths offered for preparation, e.g. /dev/loop7,/dev/nvme*n1 (default: none)", globList(&o.host.DeviceAllow))
	fs.Func("device-allow-by-id", "comma-separated globs of /dev/disk/by-id links offered for preparation, e.g. /dev/disk/by-id/nvme-Amazon_EC2_NVMe_Instance_Storage_* (default: none)", globList(&o.host.DeviceAllowByID))
	fs.Func("device-allow-model", "comma-separated globs of disk models offered for preparation, e.g. Amazon EC2 NVMe Instance Storage (default: none)", globList(&o.host.DeviceAllowModel))
	fs.StringVar(&o.host.ProcRoot, "proc-root", o.host.ProcRoot, "the host's /proc, where every process's open devices are seen")
	fs.StringVar(&o.host.Swaps, "swaps", o.host.Swaps, "the kernel's list of active swap areas")
	fs.StringVar(&o.host.KubeletRoot, "kubelet-root", o.host.KubeletRoot, "the kubelet's directory, where it maps block volumes (a missing one maps nothing)")
	fs.StringVar(&o.host.ByIDRoot, "by-id-root", o.host.ByIDRoot, "directory of the /dev/disk/by-id links")
	fs.Int64Var(&o.maxMapCount, "max-map-count-minimum", 262144, "vm.max_map_count the report requires")
	fs.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig for the apiserver (default: in-cluster)")
	fs.StringVar(&o.host.SysRoot, "sysfs", o.host.SysRoot, "sysfs mount")
	fs.StringVar(&o.host.SysctlRoot, "sysctl-root", o.host.SysctlRoot, "directory holding sysctls (/proc/sys)")
	fs.StringVar(&o.host.BootMountInfo, "boot-mountinfo", o.host.BootMountInfo, "mount table showing the host's root filesystem")
	fs.DurationVar(&o.reviewCache.Allowed, "review-cache-allowed", 10*time.Second, "how long an authenticated token or an allowed access is reused (bounded by the token's expiry)")
	fs.DurationVar(&o.reviewCache.Denied, "review-cache-denied", 5*time.Second, "how long a refused token or a denied access is reused")
	fs.IntVar(&o.reviewCache.Size, "review-cache-size", 4096, "most token and access decisions remembered")
	fs.Float64Var(&o.peerLimits.Rate, "peer-failures-per-second", 2, "failed calls (refused token or access) each remote IP earns back per second")
	fs.IntVar(&o.peerLimits.Burst, "peer-failures-burst", 20, "failed calls a remote IP may make at once; past them it gets ResourceExhausted until it earns some back (callers with a token already accepted are never held back)")
	fs.DurationVar(&o.keyRefresh, "issuer-keys-min-refresh", 10*time.Second, "least time between two fetches of the apiserver's service-account signing keys (a token naming an unknown key asks for one)")
	fs.Float64Var(&o.kubeQPS, "kube-api-qps", 50, "steady requests per second to the apiserver (reviews, the Node); client-go's default of 5 would queue real callers' reviews")
	fs.IntVar(&o.kubeBurst, "kube-api-burst", 100, "requests to the apiserver allowed at once above --kube-api-qps")
	fs.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 10*time.Second, "how long running calls may finish on shutdown")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if o.stateFile == "" {
		o.stateFile = filepath.Join(o.agentRoot, "state.json")
	}
	return o, o.validate()
}

func (o options) validate() error {
	var errs []error
	if o.tlsSignerName != "" && (o.tlsCert != "" || o.tlsKey != "") {
		errs = append(errs, errors.New("--tls-signer-name excludes --tls-cert and --tls-key"))
	}
	if o.tlsSignerName != "" && o.tlsTTL < 10*time.Minute {
		errs = append(errs, errors.New("--tls-signer-ttl must be at least 10m (the CSR API's minimum)"))
	}
	if o.tlsSignerName == "" && (o.tlsCert == "" || o.tlsKey == "") {
		errs = append(errs, errors.New("--tls-cert and --tls-key are required"))
	}
	if o.nodeName == "" {
		errs = append(errs, errors.New("--node-name or $NODE_NAME is required"))
	}
	if o.poolLabelPrefix == "" || strings.Contains(o.poolLabelPrefix, "/") {
		errs = append(errs, errors.New("--pool-label-prefix must be a DNS subdomain without a slash"))
	}
	for name, p := range map[string]string{"--agent-root": o.agentRoot, "--pv-root": o.pvRoot, "--state-file": o.stateFile} {
		if !filepath.IsAbs(p) || filepath.Clean(p) != p {
			errs = append(errs, fmt.Errorf("%s %q must be an absolute, clean path", name, p))
		}
	}
	if o.pvRoot == "/" || strings.HasPrefix(o.agentRoot+"/", o.pvRoot+"/") || strings.HasPrefix(o.pvRoot+"/", o.agentRoot+"/") {
		errs = append(errs, errors.New("--pv-root must not be / and must not overlap --agent-root"))
	}
	if o.reviewCache.Allowed <= 0 || o.reviewCache.Denied <= 0 || o.reviewCache.Size <= 0 {
		errs = append(errs, errors.New("--review-cache-allowed, --review-cache-denied and --review-cache-size must be positive"))
	}
	if o.peerLimits.Rate <= 0 || o.peerLimits.Burst <= 0 || o.keyRefresh <= 0 {
		errs = append(errs, errors.New("--peer-failures-per-second, --peer-failures-burst and --issuer-keys-min-refresh must be positive"))
	}
	if o.kubeQPS <= 0 || o.kubeBurst <= 0 {
		errs = append(errs, errors.New("--kube-api-qps and --kube-api-burst must be positive"))
	}
	if err := host.ValidateDeviceAllow(o.host.DeviceAllow); err != nil {
		errs = append(errs, fmt.Errorf("--device-allow: %w", err))
	}
	if err := host.ValidateDeviceAllowByID(o.host.DeviceAllowByID); err != nil {
		errs = append(errs, fmt.Errorf("--device-allow-by-id: %w", err))
	}
	if err := host.ValidateDeviceAllowModel(o.host.DeviceAllowModel); err != nil {
		errs = append(errs, fmt.Errorf("--device-allow-model: %w", err))
	}
	if o.maxMapCount < 0 {
		errs = append(errs, errors.New("--max-map-count-minimum must not be negative"))
	}
	if _, err := parseLevel(o.logLevel); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// globList sets a comma-separated list of globs, blanks dropped.
func globList(dst *[]string) func(string) error {
	return func(v string) error {
		*dst = nil
		for _, g := range strings.Split(v, ",") {
			if g = strings.TrimSpace(g); g != "" {
				*dst = append(*dst, g)
			}
		}
		return nil
	}
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return l, fmt.Errorf("--log-level %q: %w", s, err)
	}
	return l, nil
}

// run serves until ctx ends (SIGTERM from the kubelet), then stops gracefully.
func run(ctx context.Context, args []string, stderr io.Writer) error {
	o, err := parseOptions(args, stderr)
	if err != nil {
		return err
	}
	level, _ := parseLevel(o.logLevel)
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))

	// The files are read again when they change (a renewal), without a restart.
	var cert certSource
	if o.tlsSignerName == "" {
		files, err := tlscert.Load(o.tlsCert, o.tlsKey)
		if err != nil {
			return err
		}
		files.Log, cert = log, files
	}
	cfg, err := restConfig(o.kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = float32(o.kubeQPS), o.kubeBurst
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building Kubernetes client: %w", err)
	}
	if o.tlsSignerName != "" {
		r := &certs.Renewer{Client: client, Node: o.nodeName, Name: o.tlsSignerName, TTL: o.tlsTTL, Log: log}
		sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		err := r.Start(sctx)
		cancel()
		if err != nil {
			return fmt.Errorf("getting the serving certificate from the signer: %w", err)
		}
		go r.Run(ctx)
		cert = r
	}
	h, err := host.New(o.host)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := server.NewMetrics(reg)
	srv, err := server.New(server.Options{
		NodeName: o.nodeName, Version: version, PoolLabelPrefix: o.poolLabelPrefix,
		AgentRoot: o.agentRoot, PVRoot: o.pvRoot, StateFile: o.stateFile,
		AllowRaiseSysctl: o.allowRaiseSysctl, AllowLoopDevices: o.allowLoopDevices,
		SysctlMinimums: map[string]int64{"vm.max_map_count": o.maxMapCount},
		Metrics:        metrics,
	}, h, &kube.NodeLabels{Client: client, NodeName: o.nodeName, TTL: 30 * time.Second}, log)
	if err != nil {
		return err
	}
	reg.MustRegister(srv.Collector())

	// A device that cannot be restored is reported missing; the agent still serves the rest.
	if err := srv.Restore(ctx); err != nil {
		log.Error("Restoring prepared devices was incomplete", "err", err)
	}

	policy := kube.NewPolicyWith(client, o.nodeName, kube.PolicyOptions{Cache: o.reviewCache, Peers: o.peerLimits, KeyRefresh: o.keyRefresh}, log)
	if a, ok := policy.Authn.(*auth.CachedAuthenticator); ok {
		// Callers get Unavailable until the keys can be read; the agent serves the rest.
		if err := a.Prefetch(ctx); err != nil {
			log.Error("Reading the service-account issuer keys failed; callers get Unavailable until it works", "err", err)
		}
	}
	hs := server.NewHealth()
	gs := server.NewGRPCServer(srv, policy, credentials.NewTLS(&tls.Config{
		GetCertificate: cert.GetCertificate, MinVersion: tls.VersionTLS12,
	}), hs, metrics)
	lis, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("listening: %w", err)
	}
	servers := []served{{gs, lis}}
	if o.healthListen != "" {
		hl, err := net.Listen("tcp", o.healthListen)
		if err != nil {
			lis.Close()
			return fmt.Errorf("listening for health: %w", err)
		}
		servers = append(servers, served{server.NewHealthOnlyServer(hs), hl})
	}
	if o.metricsListen != "" {
		ml, err := net.Listen("tcp", o.metricsListen)
		if err != nil {
			for _, s := range servers {
				s.lis.Close()
			}
			return fmt.Errorf("listening for metrics: %w", err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		hsrv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := hsrv.Serve(ml); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("Serving metrics failed", "err", err)
			}
		}()
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = hsrv.Shutdown(sctx)
		}()
	}
	log.Info("Serving", "address", lis.Addr().String(), "healthAddress", o.healthListen, "metricsAddress", o.metricsListen, "node", o.nodeName, "version", version)
	err = serve(ctx, servers, o.shutdownTimeout, hs.Shutdown)
	log.Info("Stopped")
	return err
}

type served struct {
	gs  *grpc.Server
	lis net.Listener
}

// serve runs until ctx ends or a server fails, then reports not serving and lets running calls
// finish (a half-made filesystem is worse than a slow shutdown) before forcing the stop.
func serve(ctx context.Context, servers []served, timeout time.Duration, notServing func()) error {
	errc := make(chan error, len(servers))
	for _, s := range servers {
		go func() { errc <- s.gs.Serve(s.lis) }()
	}
	var err error
	select {
	case err = <-errc:
	case <-ctx.Done():
	}
	notServing()
	done := make(chan struct{})
	go func() {
		for _, s := range servers {
			s.gs.GracefulStop()
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(timeout):
		for _, s := range servers {
			s.gs.Stop()
		}
	}
	return err
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("loading kubeconfig: %w", err)
		}
		return cfg, nil
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("in-cluster config (use --kubeconfig outside a pod): %w", err)
	}
	return cfg, nil
}
