package testenv

import (
	"errors"
	"fmt"
	"os/exec"
	"syscall"
	"time"
)

// OwnGroup makes cmd, once started, the leader of a process group of its own, for
// KillGroup.
func OwnGroup(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
}

// KillGroup kills the process group that the process pid leads (started with OwnGroup) and
// waits until done (closed once the caller's cmd.Wait returned) and until no member of the
// group is left. A server's forked children (a BGSAVE writing an RDB file) outlive a kill of
// the server alone and go on writing into its directory or holding its port.
func KillGroup(pid int, done <-chan struct{}, timeout time.Duration) error {
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	deadline := time.After(timeout)
	select {
	case <-done:
	case <-deadline:
		return fmt.Errorf("pid %d did not exit within %s", pid, timeout)
	}
	for {
		err := syscall.Kill(-pid, 0)
		if errors.Is(err, syscall.ESRCH) {
			return nil
		}
		// Killed again: a child forked between the first kill and its parent's death.
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		select {
		case <-deadline:
			return fmt.Errorf("process group %d still has members after %s (%w)", pid, timeout, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
