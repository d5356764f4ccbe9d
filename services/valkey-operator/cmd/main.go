// Command valkey-operator runs the Valkey operator's controllers.
package main

import (
	"context"
	"fmt"
	"os"

	valkeyv1alpha1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	"github.com/opsuite/suite/shared/manager"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
)

// The metrics endpoint authenticates and authorizes its callers through the API server.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

func main() {
	if err := run(ctrl.SetupSignalHandler(), os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "valkey-operator:", err)
		os.Exit(1)
	}
}

// run starts the manager. The Valkey reconcilers are added by their product issue; until
// then the binary serves health, readiness and metrics and takes its leader-election lease.
func run(ctx context.Context, args []string) error {
	return manager.Run(ctx, manager.Operator{
		Name:    "valkey-operator",
		Schemes: []func(*runtime.Scheme) error{valkeyv1alpha1.AddToScheme},
	}, args, os.Stderr)
}
