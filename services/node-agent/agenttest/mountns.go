package agenttest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
)

// mountNSEnv marks a test binary re-executed in its own mount namespace.
const mountNSEnv = "AGENTTEST_MOUNTNS"

// PrivateMountNamespace is called first in TestMain: it re-runs the test binary under
// "unshare --mount --propagation private" and exits with its status, so that every mount the
// in-process agents make dies with the test process and never reaches the host. It returns
// only in the re-executed binary. A goroutine-level unshare would not do: Go runs code and
// child processes (mkfs, blkid) on many threads, and only the unsharing thread would move.
func PrivateMountNamespace() {
	if os.Getenv(mountNSEnv) != "" || slices.ContainsFunc(os.Args, func(a string) bool {
		return strings.HasPrefix(a, "-test.fuzzworker")
	}) {
		return
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "FAIL: the in-process node agent needs root: it attaches loop devices, makes filesystems and mounts them")
		os.Exit(1)
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: unshare not found: apt-get install util-linux")
		os.Exit(1)
	}
	cmd := exec.Command(unshare, append([]string{"--mount", "--propagation", "private", os.Args[0]}, os.Args[1:]...)...)
	cmd.Env = append(os.Environ(), mountNSEnv+"=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err = cmd.Run()
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		os.Exit(0)
	case errors.As(err, &exitErr):
		os.Exit(exitErr.ExitCode())
	default:
		fmt.Fprintln(os.Stderr, "FAIL: re-running the tests in a private mount namespace:", err)
		os.Exit(1)
	}
}

// InPrivateMountNamespace reports whether this binary is the one PrivateMountNamespace
// re-ran, so a test about to mount can refuse to touch the host's mount table.
func InPrivateMountNamespace() bool { return os.Getenv(mountNSEnv) != "" }
