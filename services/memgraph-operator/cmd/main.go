// Command memgraph-operator runs the Memgraph operator's MemgraphCluster controller: each
// role's StatefulSet and Services, the HA registration over Bolt, scaling, status.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/go-logr/logr"
	memgraphv1alpha1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/services/memgraph-operator/internal/controller"
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
		fmt.Fprintln(os.Stderr, "memgraph-operator:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	return manager.Run(ctx, manager.Operator{
		Name:    "memgraph-operator",
		Schemes: []func(*runtime.Scheme) error{memgraphv1alpha1.AddToScheme},
		Setup:   setup,
		// Only the operator's own pods (their nodes are checked), not every pod; Secrets'
		// names only, never their data.
		ManagerOptions: controller.ManagerOptions,
	}, args, os.Stderr)
}

// setup adds the controller. The node agent is optional: without NODE_AGENT_NAMESPACE
// (the chart sets it with nodeAgent.enabled) vm.max_map_count is not checked.
func setup(mgr ctrl.Manager, log logr.Logger) error {
	cfg := controller.Config{Registrar: controller.BoltRegistrar{}}
	if os.Getenv(nodeagent.EnvNamespace) == "" {
		log.Info("No node agent configured; vm.max_map_count is not checked", "env", nodeagent.EnvNamespace)
	} else {
		agents, err := nodeagent.AgentsFromEnv()
		if err != nil {
			return err
		}
		pool, err := nodeagent.NewForManager(mgr, agents, nodeagent.Options{})
		if err != nil {
			return err
		}
		cfg.Sysctls = controller.NodeAgentSysctls{Pool: pool}
	}
	if err := controller.Setup(mgr, cfg); err != nil {
		return fmt.Errorf("MemgraphCluster controller: %w", err)
	}
	return nil
}
