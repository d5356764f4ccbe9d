// Command memgraph-sim stands in for Memgraph (coordinators and data instances of a
// high-availability cluster) where no Memgraph binary can run: the local cluster runs it
// for memgraph/memgraph* images and the operator's tests start it as a process. README.md
// beside this file says what it models and what it does not.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/opsuite/suite/tools/internal/memgraphsim"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "memgraph-sim:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	opts, warnings, err := memgraphsim.ParseOptions(args, memgraphsim.Getenv)
	log := memgraphsim.NewLogger(opts)
	for _, w := range warnings {
		log.Warn(w)
	}
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	srv, err := memgraphsim.Start(ctx, opts, log)
	if err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		log.Info("Shutting down")
	case err = <-srv.Done():
		log.Error("Bolt server stopped", "error", err)
	}
	if cerr := srv.Close(); err == nil {
		err = cerr
	}
	return err
}
