// Command veltrix-sim stands in for the VeltrixDB server in tests and on the local
// cluster; see README.md for what it models and what it does not.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/opsuite/suite/tools/internal/veltrixsim"
)

func main() {
	err := run()
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
	case errors.Is(err, veltrixsim.ErrCrashedMidMove):
		fmt.Fprintln(os.Stderr, "veltrix-sim:", err)
		os.Exit(3)
	default:
		fmt.Fprintln(os.Stderr, "veltrix-sim:", err)
		os.Exit(1)
	}
}

func run() error {
	// SIGTERM is the kubelet's stop: a clean shutdown that writes a checkpoint.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return veltrixsim.Main(ctx, os.Args[1:], os.Getenv, os.Stderr)
}
