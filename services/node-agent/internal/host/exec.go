package host

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
)

func run(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			return stdout.String(), &CommandError{Cmd: name, Args: args, Stderr: strings.TrimSpace(stderr.String()), exit: exitErr}
		}
		if errors.Is(err, exec.ErrNotFound) {
			return "", fmt.Errorf("%s not found: apt-get install %s", name, RequiredTools[name])
		}
		return "", fmt.Errorf("%s: %w", name, err)
	}
	return stdout.String(), nil
}

// CommandError is a command that ran and failed.
type CommandError struct {
	Cmd    string
	Args   []string
	Stderr string
	exit   *exec.ExitError
}

func (e *CommandError) Error() string {
	return fmt.Sprintf("%s %s: %v: %s", e.Cmd, strings.Join(e.Args, " "), e.exit, e.Stderr)
}

// Unwrap exposes the exit status.
func (e *CommandError) Unwrap() error { return e.exit }
