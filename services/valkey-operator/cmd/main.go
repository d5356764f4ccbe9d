// Command valkey-operator runs the Valkey operator's controllers: ValkeyCluster (topology,
// rolling updates, status) and ValkeyNode (one member's pod, PVC, live config and users).
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/go-logr/logr"
	valkeyv1alpha1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	"github.com/opsuite/suite/services/valkey-operator/internal/connect"
	backupcontroller "github.com/opsuite/suite/services/valkey-operator/internal/controller/backup"
	clustercontroller "github.com/opsuite/suite/services/valkey-operator/internal/controller/cluster"
	nodecontroller "github.com/opsuite/suite/services/valkey-operator/internal/controller/node"
	"github.com/opsuite/suite/services/valkey-operator/internal/handover"
	"github.com/opsuite/suite/services/valkey-operator/internal/resources"
	"github.com/opsuite/suite/services/valkey-operator/internal/restore"
	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
	"github.com/opsuite/suite/shared/manager"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
)

// EnvOperatorImage names the operator's own image (the chart sets it): the members' pods
// copy the preStop hand-over binary from it.
const EnvOperatorImage = "VALKEY_OPERATOR_IMAGE"

// The metrics endpoint authenticates and authorizes its callers through the API server.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

func main() {
	if err := run(ctrl.SetupSignalHandler(), os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "valkey-operator:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	// The subcommands a member's pod runs: the init container installs this binary, the
	// server container's preStop hook hands a primary's slots over.
	if len(args) > 0 {
		switch args[0] {
		case handover.CommandInstall:
			return handover.Install(args[1:])
		case handover.CommandHandover:
			return handover.Command(ctx, args[1:], os.Stderr)
		case restore.Command:
			return restore.Run(ctx, args[1:], os.Getenv, os.Stderr)
		}
	}
	var namespaces []string
	return manager.Run(ctx, manager.Operator{
		Name:    "valkey-operator",
		Schemes: []func(*runtime.Scheme) error{valkeyv1alpha1.AddToScheme},
		Setup:   func(mgr ctrl.Manager, log logr.Logger) error { return setup(mgr, log, namespaces) },
		// Only the members' pods and the operator's own Secrets and ConfigMaps, not every
		// one of the cluster.
		CacheByObject: nodecontroller.CacheByObject(),
		// The namespaces the manager watches (--namespaces), for the users' Secrets' watch.
		ManagerOptions: func(mo *ctrl.Options) {
			for ns := range mo.Cache.DefaultNamespaces {
				namespaces = append(namespaces, ns)
			}
		},
	}, args, os.Stderr)
}

// setup adds both controllers; they log in to the members as the operator's own user.
func setup(mgr ctrl.Manager, _ logr.Logger, namespaces []string) error {
	c := connect.CacheThenAPI(mgr.GetClient(), mgr.GetAPIReader())
	if err := clustercontroller.Setup(mgr, clustercontroller.Config{Namespaces: namespaces}); err != nil {
		return fmt.Errorf("ValkeyCluster controller: %w", err)
	}
	if err := backupcontroller.Setup(mgr, backupcontroller.Config{}); err != nil {
		return fmt.Errorf("ValkeyBackup controller: %w", err)
	}
	if err := backupcontroller.SetupSchedule(mgr, backupcontroller.ScheduleConfig{}); err != nil {
		return fmt.Errorf("ValkeyScheduledBackup controller: %w", err)
	}
	if err := backupcontroller.SetupRetention(mgr, backupcontroller.RetentionConfig{}); err != nil {
		return fmt.Errorf("backup retention controller: %w", err)
	}
	return nodecontroller.Setup(mgr, nodecontroller.Config{
		// The pods install the preStop hand-over from the operator's own image (the chart
		// sets it).
		Build: resources.NodeOptions{HandoverImage: os.Getenv(EnvOperatorImage)},
		Options: func(ctx context.Context, n *valkeyv1alpha1.ValkeyNode) (valkey.Options, error) {
			secret := ""
			if n.Spec.TLS != nil {
				secret = n.Spec.TLS.Certificate.SecretName
			}
			return connect.Options(ctx, c, n.Namespace, n.Spec.ClusterName, secret)
		},
	})
}
