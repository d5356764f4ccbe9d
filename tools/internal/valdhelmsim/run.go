// Package valdhelmsim stands in for the Vald Helm Operator (the vdaas/vald-helm-operator
// image, operator-sdk's helm-operator serving the Vald chart) on the local cluster and in
// tests: it writes the helm-operator's status on every ValdRelease (Initialized, then
// Deployed after a delay, ReleaseFailed and Irreconcilable when an annotation says so)
// without rendering or installing anything. See tools/cmd/vald-helm-sim/README.md.
package valdhelmsim

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// Options are the helm-operator's `run` flags the Vald chart passes, plus the
// simulator's own.
type Options struct {
	Kubeconfig              string
	WatchesFile             string
	LeaderElect             bool
	LeaderElectionID        string
	LeaderElectionNamespace string
	MetricsAddr             string
	ProbeAddr               string
	ReconcilePeriod         time.Duration
	MaxConcurrentReconciles int
	// Namespaces to watch; empty watches all. --namespace, else $WATCH_NAMESPACE as the
	// real operator reads it.
	Namespaces  []string
	DeployDelay time.Duration
	// UninstallFinalizer holds deployed ValdReleases with the helm-operator's finalizer.
	UninstallFinalizer bool
	QPS                float64
	Burst              int
	Zap                zap.Options
}

// ParseOptions reads the arguments after the binary's name; a leading "run" (the
// helm-operator's subcommand) is accepted and dropped.
func ParseOptions(args []string, getenv func(string) string, stderr io.Writer) (Options, error) {
	if len(args) > 0 && args[0] == "run" {
		args = args[1:]
	}
	o := Options{Zap: zap.Options{Development: false}}
	fs := flag.NewFlagSet("vald-helm-sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "Path to a kubeconfig; empty uses $KUBECONFIG or the in-cluster config.")
	fs.StringVar(&o.WatchesFile, "watches-file", "./watches.yaml", "Accepted for the image's command line; the simulator serves ValdRelease only and does not read it.")
	fs.BoolVar(&o.LeaderElect, "leader-elect", false, "Elect a leader so that only one replica writes status.")
	fs.StringVar(&o.LeaderElectionID, "leader-election-id", "vald-helm-operator", "Name of the leader-election Lease.")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", "", "Namespace of the Lease; empty means the pod's namespace.")
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", ":8080", "Address of the Prometheus metrics endpoint; \"0\" disables it.")
	fs.StringVar(&o.ProbeAddr, "health-probe-bind-address", ":8081", "Address of /healthz and /readyz.")
	fs.DurationVar(&o.ReconcilePeriod, "reconcile-period", time.Minute, "Accepted for the image's command line; no effect (nothing drifts in a simulated release).")
	fs.IntVar(&o.MaxConcurrentReconciles, "max-concurrent-reconciles", 1, "ValdReleases reconciled at once.")
	namespace := fs.String("namespace", "", "Comma-separated namespaces to watch; empty reads $WATCH_NAMESPACE, and when that is empty too every namespace is watched.")
	fs.DurationVar(&o.DeployDelay, "deploy-delay", 2*time.Second, "How long one install, upgrade or uninstall takes before its result (Deployed, ReleaseFailed, the finalizer's removal) is written.")
	fs.BoolVar(&o.UninstallFinalizer, "uninstall-finalizer", true, "Hold each deployed ValdRelease with the finalizer "+Finalizer+" until its release is uninstalled, as the real operator does.")
	// Well above a real operator's: the stand-in must not be what a benchmark measures.
	fs.Float64Var(&o.QPS, "kube-api-qps", 1000, "Requests per second to the API server.")
	fs.IntVar(&o.Burst, "kube-api-burst", 2000, "Requests in a burst above --kube-api-qps.")
	o.Zap.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return Options{}, err
	}
	if fs.NArg() > 0 {
		return Options{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	ns := *namespace
	if ns == "" {
		ns = getenv("WATCH_NAMESPACE")
	}
	for _, n := range strings.Split(ns, ",") {
		if n = strings.TrimSpace(n); n != "" {
			o.Namespaces = append(o.Namespaces, n)
		}
	}
	return o, o.Validate()
}

// Validate reports every invalid option at once.
func (o Options) Validate() error {
	var errs []error
	if o.MetricsAddr != "0" {
		if _, _, err := net.SplitHostPort(o.MetricsAddr); err != nil {
			errs = append(errs, fmt.Errorf("--metrics-bind-address %q is not host:port", o.MetricsAddr))
		}
	}
	if _, _, err := net.SplitHostPort(o.ProbeAddr); err != nil {
		errs = append(errs, fmt.Errorf("--health-probe-bind-address %q is not host:port", o.ProbeAddr))
	}
	if o.DeployDelay < 0 {
		errs = append(errs, errors.New("--deploy-delay must not be negative"))
	}
	if o.MaxConcurrentReconciles < 1 {
		errs = append(errs, errors.New("--max-concurrent-reconciles must be at least 1"))
	}
	if o.LeaderElect && o.LeaderElectionID == "" {
		errs = append(errs, errors.New("--leader-election-id must not be empty with --leader-elect"))
	}
	if o.QPS <= 0 || o.Burst < 1 {
		errs = append(errs, errors.New("--kube-api-qps must be positive and --kube-api-burst at least 1"))
	}
	return errors.Join(errs...)
}

// Main parses args and runs the simulator until ctx ends. `--help` returns flag.ErrHelp.
func Main(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	o, err := ParseOptions(args, getenv, stderr)
	if err != nil {
		return err
	}
	logger := zap.New(zap.UseFlagOptions(&o.Zap), zap.WriteTo(stderr))
	ctrl.SetLogger(logger)
	cfg, err := restConfig(o.Kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = float32(o.QPS), o.Burst
	mo := ctrl.Options{
		Logger:                        logger,
		Metrics:                       metricsserver.Options{BindAddress: o.MetricsAddr},
		HealthProbeBindAddress:        o.ProbeAddr,
		LeaderElection:                o.LeaderElect,
		LeaderElectionID:              o.LeaderElectionID,
		LeaderElectionNamespace:       o.LeaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
	}
	// Reads of ValdReleases (unstructured) come from the informer, not the API server.
	mo.Client.Cache = &client.CacheOptions{Unstructured: true}
	if len(o.Namespaces) > 0 {
		mo.Cache.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range o.Namespaces {
			mo.Cache.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	mgr, err := ctrl.NewManager(cfg, mo)
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	r := &Reconciler{Client: mgr.GetClient(), DeployDelay: o.DeployDelay, Finalizer: o.UninstallFinalizer}
	if err := r.SetupWithManager(mgr, o.MaxConcurrentReconciles); err != nil {
		return fmt.Errorf("setting up the ValdRelease controller: %w", err)
	}
	logger.Info("Starting the Vald Helm Operator simulator", "deployDelay", o.DeployDelay.String(), "uninstallFinalizer", o.UninstallFinalizer,
		"namespaces", o.Namespaces, "leaderElection", o.LeaderElect)
	return mgr.Start(ctx)
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("loading kubeconfig %s: %w", kubeconfig, err)
		}
		return cfg, nil
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return nil, fmt.Errorf("loading the cluster config: %w", err)
	}
	return cfg, nil
}
