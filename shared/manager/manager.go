// Package manager builds the controller-runtime manager every operator runs: flags into
// validated options, logging, metrics, health and readiness endpoints, leader election.
package manager

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// Options configure an operator's manager. Fill them with AddFlags, then Validate once.
type Options struct {
	// Name is the operator's name; it prefixes the default lease name.
	Name string
	// Kubeconfig is a kubeconfig path; empty means in-cluster or $KUBECONFIG.
	Kubeconfig string
	// MetricsAddr serves Prometheus metrics; "0" turns them off.
	MetricsAddr string
	// MetricsSecure serves metrics over HTTPS to callers Kubernetes authenticates
	// (TokenReview) and authorizes (SubjectAccessReview: get on the /metrics URL).
	MetricsSecure bool
	// MetricsCertDir holds the metrics serving certificate (a mounted Secret); empty
	// serves a self-signed one generated at start.
	MetricsCertDir string
	// MetricsCertName and MetricsCertKey are the file names in MetricsCertDir.
	MetricsCertName, MetricsCertKey string
	// GracefulShutdownTimeout is how long the manager waits for its runnables to stop
	// after its context ends; 0 does not wait.
	GracefulShutdownTimeout time.Duration
	// ProbeAddr serves /healthz and /readyz.
	ProbeAddr string
	// LeaderElect turns on leader election, so only one replica reconciles.
	LeaderElect bool
	// LeaderElectionID names the Lease; each operator has its own.
	LeaderElectionID string
	// LeaderElectionNamespace holds the Lease; empty means the pod's namespace.
	LeaderElectionNamespace string
	// LeaseDuration, RenewDeadline and RetryPeriod tune leader election.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Namespaces limits the watch to these namespaces; empty watches all.
	Namespaces []string
	// LogLevel is debug, info or error, or a number (higher is more verbose).
	LogLevel string
	// LogFormat is json or text.
	LogFormat string
	// QPS and Burst limit the client's request rate to the API server.
	QPS   float64
	Burst int
}

// NewOptions returns the defaults for the operator called name.
func NewOptions(name string) Options {
	return Options{
		Name:            name,
		MetricsAddr:     ":8080",
		MetricsSecure:   true,
		MetricsCertName: "tls.crt",
		MetricsCertKey:  "tls.key",
		// controller-runtime's default; long enough for an in-flight pass to finish
		// and the Lease to be released.
		GracefulShutdownTimeout: 30 * time.Second,
		ProbeAddr:               ":8081",
		LeaderElect:             true,
		LeaderElectionID:        name + ".opsuite.io",
		LeaseDuration:           15 * time.Second,
		RenewDeadline:           10 * time.Second,
		RetryPeriod:             2 * time.Second,
		LogLevel:                "info",
		LogFormat:               "json",
		QPS:                     50,
		Burst:                   100,
	}
}

// AddFlags registers a flag for every option on fs, with o's values as defaults.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Path to a kubeconfig; empty uses the in-cluster config or $KUBECONFIG.")
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", o.MetricsAddr, "Address the Prometheus metrics endpoint binds to; \"0\" disables it.")
	fs.BoolVar(&o.MetricsSecure, "metrics-secure", o.MetricsSecure, "Serve metrics over HTTPS only to callers whose token Kubernetes authorizes for get on /metrics; false serves plain HTTP to anyone.")
	fs.StringVar(&o.MetricsCertDir, "metrics-cert-dir", o.MetricsCertDir, "Directory with the metrics serving certificate and key (a mounted Secret); empty serves a self-signed certificate generated at start.")
	fs.StringVar(&o.MetricsCertName, "metrics-cert-name", o.MetricsCertName, "File name of the metrics serving certificate in --metrics-cert-dir.")
	fs.StringVar(&o.MetricsCertKey, "metrics-cert-key", o.MetricsCertKey, "File name of the metrics serving key in --metrics-cert-dir.")
	fs.DurationVar(&o.GracefulShutdownTimeout, "graceful-shutdown-timeout", o.GracefulShutdownTimeout, "How long to wait for controllers to finish after a stop signal; 0 does not wait.")
	fs.StringVar(&o.ProbeAddr, "health-probe-bind-address", o.ProbeAddr, "Address the /healthz and /readyz endpoints bind to.")
	fs.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect, "Elect a leader so that only one replica reconciles at a time.")
	fs.StringVar(&o.LeaderElectionID, "leader-election-id", o.LeaderElectionID, "Name of the Lease used for leader election.")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", o.LeaderElectionNamespace, "Namespace of the leader-election Lease; empty means the pod's namespace.")
	fs.DurationVar(&o.LeaseDuration, "leader-elect-lease-duration", o.LeaseDuration, "How long a non-leader waits before it may take over leadership.")
	fs.DurationVar(&o.RenewDeadline, "leader-elect-renew-deadline", o.RenewDeadline, "How long the leader keeps trying to renew before it gives up leadership.")
	fs.DurationVar(&o.RetryPeriod, "leader-elect-retry-period", o.RetryPeriod, "How often candidates retry to acquire or renew leadership.")
	fs.Func("namespaces", "Comma-separated namespaces to watch; empty watches all namespaces.", func(v string) error {
		o.Namespaces = nil
		for _, ns := range strings.Split(v, ",") {
			if ns = strings.TrimSpace(ns); ns != "" {
				o.Namespaces = append(o.Namespaces, ns)
			}
		}
		return nil
	})
	fs.StringVar(&o.LogLevel, "log-level", o.LogLevel, "Log level: debug, info, error, or a verbosity number (0 is info).")
	fs.StringVar(&o.LogFormat, "log-format", o.LogFormat, "Log format: json or text.")
	fs.Float64Var(&o.QPS, "kube-api-qps", o.QPS, "Requests per second the client may send to the API server; -1 means unlimited.")
	fs.IntVar(&o.Burst, "kube-api-burst", o.Burst, "Requests the client may send in a burst above --kube-api-qps.")
}

// Validate checks every option and reports all problems at once.
func (o Options) Validate() error {
	var errs []error
	if o.Name == "" {
		errs = append(errs, errors.New("name must not be empty"))
	}
	if o.MetricsAddr != "0" {
		if err := validAddr(o.MetricsAddr); err != nil {
			errs = append(errs, fmt.Errorf("--metrics-bind-address: %w", err))
		}
	}
	if o.MetricsCertDir != "" {
		if !o.MetricsSecure || o.MetricsAddr == "0" {
			errs = append(errs, errors.New("--metrics-cert-dir needs --metrics-secure and a --metrics-bind-address"))
		}
		for _, name := range []string{o.MetricsCertName, o.MetricsCertKey} {
			if _, err := os.Stat(filepath.Join(o.MetricsCertDir, name)); err != nil {
				errs = append(errs, fmt.Errorf("--metrics-cert-dir: %w", err))
			}
		}
	}
	if o.GracefulShutdownTimeout < 0 {
		errs = append(errs, errors.New("--graceful-shutdown-timeout must not be negative"))
	}
	if err := validAddr(o.ProbeAddr); err != nil {
		errs = append(errs, fmt.Errorf("--health-probe-bind-address: %w", err))
	}
	if o.LeaderElect && o.LeaderElectionID == "" {
		errs = append(errs, errors.New("--leader-election-id must not be empty when --leader-elect is on"))
	}
	if o.LeaderElect && (o.LeaseDuration <= o.RenewDeadline || o.RenewDeadline <= o.RetryPeriod || o.RetryPeriod <= 0) {
		errs = append(errs, errors.New("leader election needs lease duration > renew deadline > retry period > 0"))
	}
	if _, err := level(o.LogLevel); err != nil {
		errs = append(errs, fmt.Errorf("--log-level: %w", err))
	}
	if o.LogFormat != "json" && o.LogFormat != "text" {
		errs = append(errs, fmt.Errorf("--log-format: %q is not json or text", o.LogFormat))
	}
	if o.QPS == 0 || o.QPS < -1 {
		errs = append(errs, errors.New("--kube-api-qps must be positive, or -1 for unlimited"))
	}
	if o.Burst < 1 {
		errs = append(errs, errors.New("--kube-api-burst must be at least 1"))
	}
	return errors.Join(errs...)
}

func validAddr(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port: %w", addr, err)
	}
	if port == "" {
		return fmt.Errorf("%q has no port", addr)
	}
	return nil
}

func level(s string) (zapcore.Level, error) {
	switch s {
	case "debug":
		return zapcore.DebugLevel, nil
	case "info", "":
		return zapcore.InfoLevel, nil
	case "error":
		return zapcore.ErrorLevel, nil
	}
	var v int
	if _, err := fmt.Sscanf(s, "%d", &v); err != nil || v < 0 || v > 127 {
		return 0, fmt.Errorf("%q is not debug, info, error or a number from 0 to 127", s)
	}
	return zapcore.Level(-v), nil
}

// Logger builds the logger the options ask for, writing to w, and installs it as
// controller-runtime's.
func Logger(o Options, w io.Writer) logr.Logger {
	lvl, _ := level(o.LogLevel) // Validate has checked it.
	log := zap.New(zap.UseDevMode(false), zap.Level(lvl), zap.WriteTo(w), func(zo *zap.Options) {
		if o.LogFormat == "text" {
			zo.Encoder = zapcore.NewConsoleEncoder(zapcore.EncoderConfig{
				TimeKey: "ts", LevelKey: "level", NameKey: "logger", MessageKey: "msg",
				EncodeTime: zapcore.ISO8601TimeEncoder, EncodeLevel: zapcore.CapitalLevelEncoder,
				EncodeDuration: zapcore.StringDurationEncoder, EncodeName: zapcore.FullNameEncoder,
			})
		}
	}).WithName(o.Name)
	ctrl.SetLogger(log)
	return log
}

// RESTConfig loads the cluster connection the options name, with their rate limits.
func RESTConfig(o Options) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if o.Kubeconfig != "" {
		if cfg, err = clientcmd.BuildConfigFromFlags("", o.Kubeconfig); err != nil {
			return nil, fmt.Errorf("loading kubeconfig %s: %w", o.Kubeconfig, err)
		}
	} else if cfg, err = ctrl.GetConfig(); err != nil {
		return nil, fmt.Errorf("loading cluster config: %w", err)
	}
	cfg.QPS, cfg.Burst = float32(o.QPS), o.Burst
	return cfg, nil
}

func metricsOptions(o Options) metricsserver.Options {
	mo := metricsserver.Options{BindAddress: o.MetricsAddr}
	if o.MetricsSecure {
		// Scrapers authenticate with their own ServiceAccount token. Without a mounted
		// certificate controller-runtime generates a self-signed one at every start, which
		// scrapers can only skip verifying; with --metrics-cert-dir they can verify it
		// (controller-runtime also reloads it when the Secret is renewed).
		mo.SecureServing = true
		mo.FilterProvider = metricsFilter
		if o.MetricsCertDir != "" {
			mo.CertDir, mo.CertName, mo.KeyName = o.MetricsCertDir, o.MetricsCertName, o.MetricsCertKey
		}
	}
	return mo
}

// New builds a manager from validated options, with /healthz and /readyz registered.
// change, when given, adjusts controller-runtime's options last (cache selectors, ...).
func New(o Options, cfg *rest.Config, scheme *runtime.Scheme, change ...func(*ctrl.Options)) (ctrl.Manager, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	mo := ctrl.Options{
		Scheme:                        scheme,
		Metrics:                       metricsOptions(o),
		HealthProbeBindAddress:        o.ProbeAddr,
		LeaderElection:                o.LeaderElect,
		LeaderElectionID:              o.LeaderElectionID,
		LeaderElectionNamespace:       o.LeaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &o.LeaseDuration,
		RenewDeadline:                 &o.RenewDeadline,
		RetryPeriod:                   &o.RetryPeriod,
		GracefulShutdownTimeout:       &o.GracefulShutdownTimeout,
	}
	if len(o.Namespaces) > 0 {
		mo.Cache.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range o.Namespaces {
			mo.Cache.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	for _, c := range change {
		c(&mo)
	}
	mgr, err := ctrl.NewManager(cfg, mo)
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, fmt.Errorf("adding health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("informers", func(req *http.Request) error {
		if !mgr.GetCache().WaitForCacheSync(req.Context()) {
			return errors.New("informer caches have not synced")
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("adding readiness check: %w", err)
	}
	return mgr, nil
}
