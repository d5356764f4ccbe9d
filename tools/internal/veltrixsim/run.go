package veltrixsim

import (
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

// Main parses args and the environment, applies the server's refusals and serves until
// ctx ends. The binary and the tests' re-executed processes both enter here.
func Main(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	cfg, err := ParseConfig(args, getenv, stderr)
	if err != nil {
		return err
	}
	n, err := NewNode(cfg, slog.New(slog.NewTextHandler(stderr, nil)))
	if err != nil {
		return err
	}
	return n.Run(ctx)
}

// RunProcess is Main for a process: SIGTERM (the kubelet's stop) and SIGINT end it
// cleanly, with a checkpoint.
func RunProcess(args []string) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return Main(ctx, args, os.Getenv, os.Stderr)
}

// ExitCode is the process exit code for Main's error: 0 after a clean stop (or -h), 3 after
// the crash-mid-move knob fired, 1 for a refusal or a failure.
func ExitCode(err error) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, ErrCrashedMidMove):
		return 3
	default:
		return 1
	}
}
