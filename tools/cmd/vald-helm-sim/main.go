// Command vald-helm-sim stands in for the Vald Helm Operator on the local cluster; see
// README.md for what it models and what it does not.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/opsuite/suite/tools/internal/valdhelmsim"
)

func main() {
	if err := run(); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "vald-helm-sim:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return valdhelmsim.Main(ctx, os.Args[1:], os.Getenv, os.Stderr)
}
