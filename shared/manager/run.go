package manager

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Operator describes one operator binary for Run.
type Operator struct {
	// Name is the binary's name; it names the default lease and the logger.
	Name string
	// AddFlags registers the operator's own flags next to the common ones.
	AddFlags func(fs *flag.FlagSet)
	// Validate checks the operator's own options after parsing.
	Validate func() error
	// Schemes register the kinds the operator reads and writes (built-in kinds are added).
	Schemes []func(*runtime.Scheme) error
	// Setup adds the operator's controllers to the manager.
	Setup func(mgr ctrl.Manager, log logr.Logger) error
	// CacheByObject restricts what the cache holds per kind (label or field selectors,
	// namespaces), so an operator does not cache every Secret or Pod of the cluster.
	CacheByObject map[client.Object]cache.ByObject
	// CacheLabelSelector restricts every kind the cache holds, unless CacheByObject says
	// otherwise for it.
	CacheLabelSelector labels.Selector
	// ManagerOptions changes any other controller-runtime option, last.
	ManagerOptions func(*ctrl.Options)
}

// controllerOptions applies the operator's cache and manager options.
func (op Operator) controllerOptions(mo *ctrl.Options) {
	if len(op.CacheByObject) > 0 {
		if mo.Cache.ByObject == nil {
			mo.Cache.ByObject = map[client.Object]cache.ByObject{}
		}
		for obj, by := range op.CacheByObject {
			mo.Cache.ByObject[obj] = by
		}
	}
	if op.CacheLabelSelector != nil {
		mo.Cache.DefaultLabelSelector = op.CacheLabelSelector
	}
	if op.ManagerOptions != nil {
		op.ManagerOptions(mo)
	}
}

// Run parses args, validates every option once, builds the manager and runs it until ctx
// ends. `--help` prints every flag and returns nil.
func Run(ctx context.Context, op Operator, args []string, stderr io.Writer) error {
	opts := NewOptions(op.Name)
	fs := flag.NewFlagSet(op.Name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	opts.AddFlags(fs)
	if op.AddFlags != nil {
		op.AddFlags(fs)
	}
	fs.Usage = func() {
		_, _ = fmt.Fprintf(fs.Output(), "Usage: %s [flags]\n\nFlags:\n", op.Name)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	errs := []error{opts.Validate()}
	if op.Validate != nil {
		errs = append(errs, op.Validate())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("invalid options: %w", err)
	}
	log := Logger(opts, stderr)
	scheme := runtime.NewScheme()
	for _, add := range append([]func(*runtime.Scheme) error{clientgoscheme.AddToScheme}, op.Schemes...) {
		if err := add(scheme); err != nil {
			return fmt.Errorf("building scheme: %w", err)
		}
	}
	cfg, err := RESTConfig(opts)
	if err != nil {
		return err
	}
	mgr, err := New(opts, cfg, scheme, op.controllerOptions)
	if err != nil {
		return err
	}
	if op.Setup != nil {
		if err := op.Setup(mgr, log); err != nil {
			return fmt.Errorf("setting up controllers: %w", err)
		}
	}
	log.Info("Starting manager", "leaderElection", opts.LeaderElect, "lease", opts.LeaderElectionID, "namespaces", opts.Namespaces)
	return mgr.Start(ctx)
}
