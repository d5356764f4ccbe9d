// Command veltrix-operator runs the VeltrixDB operator's controller: VeltrixCluster on disks
// the node agents prepare, online membership, search-ready readiness gates, checkpoints on
// deletion.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-logr/logr"
	veltrixv1alpha1 "github.com/opsuite/suite/api/veltrix/v1alpha1"
	"github.com/opsuite/suite/services/veltrix-operator/internal/controller"
	"github.com/opsuite/suite/services/veltrix-operator/internal/disks"
	"github.com/opsuite/suite/shared/envflag"
	"github.com/opsuite/suite/shared/manager"
	"github.com/opsuite/suite/shared/nodeagent"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
)

// The metrics endpoint authenticates and authorizes its callers through the API server.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

func main() {
	if err := run(ctrl.SetupSignalHandler(), os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "veltrix-operator:", err)
		os.Exit(1)
	}
}

// EnvPVRoot sets --pv-root's default; the chart sets it from nodeAgent.pvRoot.
const EnvPVRoot = "NODE_AGENT_PV_ROOT"

// EnvPoolLabelPrefix sets --pool-label-prefix's default.
const EnvPoolLabelPrefix = "NODE_AGENT_POOL_LABEL_PREFIX"

// options are the operator's own flags.
type options struct {
	pvRoot     string
	poolPrefix string
	env        *envflag.Set
}

func (o *options) addFlags(fs *flag.FlagSet) {
	o.pvRoot = "/mnt/opsuite"
	o.env = envflag.New(fs, os.Getenv)
	o.poolPrefix = disks.DefaultPoolLabelPrefix
	o.env.String(&o.poolPrefix, "pool-label-prefix", EnvPoolLabelPrefix, "The node agents' --pool-label-prefix: a node labelled <prefix>/namespace=<ns> lends its disks to the clusters of namespace <ns> only ($"+EnvPoolLabelPrefix+").")
	o.env.String(&o.pvRoot, "pv-root", EnvPVRoot, "The node agents' --pv-root (the node-agent chart's pvRoot): the PV source paths of the clusters' disks are made below it; $(NODE_NAME) in it stands for each node's name, for agents whose roots differ per node ($"+EnvPVRoot+").")
}

func (o *options) validate() error {
	errs := []error{o.env.Err()}
	if !filepath.IsAbs(o.pvRoot) || filepath.Clean(o.pvRoot) == "/" {
		errs = append(errs, errors.New("--pv-root must be an absolute path other than /"))
	}
	if o.poolPrefix == "" || strings.Contains(o.poolPrefix, "/") {
		errs = append(errs, errors.New("--pool-label-prefix must be a DNS subdomain without a slash"))
	}
	return errors.Join(errs...)
}

func run(ctx context.Context, args []string) error {
	o := options{}
	return manager.Run(ctx, manager.Operator{
		Name:     "veltrix-operator",
		AddFlags: o.addFlags,
		Validate: o.validate,
		Schemes:  []func(*runtime.Scheme) error{veltrixv1alpha1.AddToScheme},
		Setup:    func(mgr ctrl.Manager, log logr.Logger) error { return setup(mgr, log, o) },
		// Only the operator's own pods, Secrets, ConfigMaps and volumes, not every one of
		// the cluster; the user's admin token Secret is read through the API reader.
		CacheByObject: controller.CacheByObject(),
	}, args, os.Stderr)
}

// setup reaches the node agents as the chart configures them (NODE_AGENT_*); without them
// the controller still runs and says on every cluster why it cannot prepare disks.
func setup(mgr ctrl.Manager, log logr.Logger, o options) error {
	cfg := controller.Config{PVRoot: disks.SamePVRoot(o.pvRoot), PoolLabelPrefix: o.poolPrefix}
	agents, err := nodeagent.AgentsFromEnv()
	if err != nil {
		log.Error(err, "Node agents not configured; clusters will wait with condition Ready=False (NodeAgentsNotConfigured)")
	} else {
		pool, err := nodeagent.NewForManager(mgr, agents, nodeagent.Options{})
		if err != nil {
			return fmt.Errorf("node agents: %w", err)
		}
		cfg.Agents = disks.PoolAgents{Pool: pool}
	}
	if err := controller.Setup(mgr, cfg); err != nil {
		return fmt.Errorf("VeltrixCluster controller: %w", err)
	}
	return nil
}
