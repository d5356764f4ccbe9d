package server_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// nsEnv marks the test binary re-executed inside its own mount namespace.
const nsEnv = "NODEAGENT_TEST_MOUNTNS"

// TestMain re-runs the test binary under "unshare -m --propagation private", so that every
// mount a test makes lives in a namespace that dies with the process and never reaches the
// host. A goroutine-level unshare would not do: Go runs code and child processes on many
// threads, and only the unsharing thread would move.
func TestMain(m *testing.M) {
	if os.Getenv(nsEnv) == "" && !slices.ContainsFunc(os.Args, func(a string) bool {
		return strings.HasPrefix(a, "-test.fuzzworker")
	}) {
		os.Exit(reexecInMountNamespace())
	}
	os.Exit(m.Run())
}

func reexecInMountNamespace() int {
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "FAIL: node-agent tests need root: they attach loop devices, make filesystems and mount them")
		return 1
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: unshare not found: apt-get install util-linux")
		return 1
	}
	cmd := exec.Command(unshare, append([]string{"--mount", "--propagation", "private", os.Args[0]}, os.Args[1:]...)...)
	cmd.Env = append(os.Environ(), nsEnv+"=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			return exitErr.ExitCode()
		}
		fmt.Fprintln(os.Stderr, "FAIL: re-running the tests in a private mount namespace:", err)
		return 1
	}
	return 0
}
