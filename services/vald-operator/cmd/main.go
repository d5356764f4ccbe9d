// Command vald-operator turns ValdOperatorReleases into ValdReleases for the Vald Helm
// Operator.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	goruntime "runtime"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	valdv1 "github.com/opsuite/suite/api/vald/v1"
	"github.com/opsuite/suite/services/vald-operator/internal/controller"
	"github.com/opsuite/suite/shared/manager"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
)

// The metrics endpoint authenticates and authorizes its callers through the API server.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "vald-operator:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return runWith(ctx, os.Args[1:], os.Getenv, os.Stderr)
}

// runWith parses args (with defaults from getenv), validates every option once, and runs
// the manager until ctx ends.
func runWith(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	opts := controller.DefaultOptions()
	var validate func() error
	var pprofAddr string
	return manager.Run(ctx, manager.Operator{
		Name: controller.Name,
		AddFlags: func(fs *flag.FlagSet) {
			validate = operatorFlags(fs, &opts, &pprofAddr, getenv)
			apiRateDefaults(fs)
		},
		Validate: func() error { return validate() },
		Schemes:  []func(*runtime.Scheme) error{valdv1.AddToScheme},
		ManagerOptions: func(mo *ctrl.Options) {
			controller.ManagerOptions(mo)
			if pprofAddr != "" {
				mo.PprofBindAddress = pprofAddr
				// Sample goroutines blocked 1 ms or more, and one mutex contention in 100.
				goruntime.SetBlockProfileRate(int(time.Millisecond))
				goruntime.SetMutexProfileFraction(100)
			}
		},
		Setup: func(mgr ctrl.Manager, log logr.Logger) error {
			if _, err := controller.SetupWithManager(mgr, opts); err != nil {
				return err
			}
			log.Info("Registered ValdOperatorRelease controller",
				"requeueAfter", opts.RequeueAfter, "requireNodePoolMatch", opts.RequireNodePoolMatch,
				"nodePoolLabelPrefix", opts.Build.NodePoolLabelPrefix)
			return nil
		},
	}, args, stderr)
}
