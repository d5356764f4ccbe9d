package testenv

import (
	"fmt"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// A child the leader forked outlives a kill of the leader alone, and not KillGroup.
func TestKillGroupTakesForkedChildren(t *testing.T) {
	cmd := exec.Command("sh", "-c", "sleep 300 & echo $!; wait")
	OwnGroup(cmd)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var child int
	buf := make([]byte, 32)
	n, _ := out.Read(buf)
	if _, err := fmt.Sscan(string(buf[:n]), &child); err != nil || child == 0 {
		t.Fatalf("child pid %q: %v", buf[:n], err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	if err := KillGroup(cmd.Process.Pid, done, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	// The child is init's to reap; gone or a zombie both mean it runs no more.
	Eventually(t, 10*time.Second, "the forked child gone", func() (bool, string) {
		err := syscall.Kill(child, 0)
		return err == syscall.ESRCH, fmt.Sprint(err)
	})
}
