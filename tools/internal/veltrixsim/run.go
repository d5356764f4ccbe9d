package veltrixsim

import (
	"context"
	"io"
	"log/slog"
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
