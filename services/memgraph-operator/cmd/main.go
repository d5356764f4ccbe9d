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
	"github.com/opsuite/suite/services/memgraph-operator/internal/controller/backup"
	"github.com/opsuite/suite/services/memgraph-operator/internal/metricsexporter"
	"github.com/opsuite/suite/services/memgraph-operator/internal/migrate"
	"github.com/opsuite/suite/services/memgraph-operator/internal/snapshot"
	"github.com/opsuite/suite/shared/manager"
	"github.com/opsuite/suite/shared/nodeagent"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The metrics endpoint authenticates and authorizes its callers through the API server.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// EnvOperatorImage names the operator's own image (the chart sets it): members' pods run
// it as the metrics exporter, data instances also as the backup agent sidecar and the
// restore init container.
const EnvOperatorImage = "MEMGRAPH_OPERATOR_IMAGE"

func main() {
	if err := run(ctrl.SetupSignalHandler(), os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "memgraph-operator:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	// The subcommands members' pods run: the backup agent sidecar and the restore init
	// container of data instances (package snapshot), every member's metrics exporter.
	if len(args) > 0 {
		switch args[0] {
		case snapshot.CommandAgent:
			return snapshot.AgentCommand(ctx, args[1:], os.Stderr)
		case snapshot.CommandRestore:
			return snapshot.RestoreCommand(ctx, args[1:], os.Getenv, os.Stderr)
		case metricsexporter.Command:
			return metricsexporter.Run(ctx, args[1:], os.Stderr)
		}
	}
	return manager.Run(ctx, manager.Operator{
		Name:    "memgraph-operator",
		Schemes: []func(*runtime.Scheme) error{memgraphv1alpha1.AddToScheme},
		Setup: func(mgr ctrl.Manager, log logr.Logger) error {
			return setup(ctx, mgr, log)
		},
		// Only the operator's own pods (their nodes are checked), not every pod; Secrets'
		// names only, never their data.
		ManagerOptions: controller.ManagerOptions,
	}, args, os.Stderr)
}

// setup first moves MemgraphClusters stored by an earlier operator to the current shape
// (see package migrate: the controller's typed cache could not read them otherwise), then
// adds the controller. The node agent is optional: without NODE_AGENT_NAMESPACE
// (the chart sets it with nodeAgent.enabled) vm.max_map_count is not checked.
func setup(ctx context.Context, mgr ctrl.Manager, log logr.Logger) error {
	direct, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme()})
	if err != nil {
		return err
	}
	n, err := migrate.Run(ctx, direct)
	if err != nil {
		return fmt.Errorf("moving MemgraphClusters to the current shape: %w", err)
	}
	if n > 0 {
		log.Info("Moved MemgraphClusters stored by an earlier operator to the current shape (spec.license to spec.secrets, storage.retentionPolicy to a string)", "clusters", n)
	}
	cfg := controller.Config{Registrar: controller.BoltRegistrar{}, OperatorImage: os.Getenv(EnvOperatorImage)}
	if cfg.OperatorImage == "" {
		log.Info("The operator's image is not set; spec.backup, spec.bootstrap and spec.metricsExporter add no backup agent, restore container or metrics exporter", "env", EnvOperatorImage)
	}
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
	if err := backup.Setup(mgr, backup.Config{}); err != nil {
		return fmt.Errorf("MemgraphBackup controller: %w", err)
	}
	if err := backup.SetupSchedule(mgr, backup.ScheduleConfig{}); err != nil {
		return fmt.Errorf("MemgraphScheduledBackup controller: %w", err)
	}
	if err := backup.SetupRetention(mgr, backup.RetentionConfig{}); err != nil {
		return fmt.Errorf("backup retention controller: %w", err)
	}
	return nil
}
