package testenv

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSweepKillsOrphansAndStaleScratch orphans two stand-ins for the control plane (copies
// of sleep named like it, left behind by a shell that exits) and checks Sweep kills them
// and removes a stale scratch directory, while a fresh one stays.
func TestSweepKillsOrphansAndStaleScratch(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal("sleep (coreutils) is needed for this test")
	}
	bin := t.TempDir()
	for _, name := range []string{"kube-apiserver", "etcd"} {
		copyFile(t, sleep, filepath.Join(bin, name))
	}
	out, err := exec.Command("sh", "-c", bin+"/etcd 120 >/dev/null 2>&1 & echo $!; "+bin+"/kube-apiserver 120 >/dev/null 2>&1 & echo $!").Output()
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, f := range strings.Fields(string(out)) {
		pid, _ := strconv.Atoi(f)
		pids = append(pids, pid)
	}
	t.Cleanup(func() {
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	stale, err := os.MkdirTemp("", "opsuite-testenv-")
	if err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	fresh, err := os.MkdirTemp("", "opsuite-testenv-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(fresh) })

	Sweep(bin)

	for _, pid := range pids {
		deadline := time.Now().Add(5 * time.Second)
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if alive(pid) {
			t.Errorf("orphaned process %d survived the sweep", pid)
		}
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale scratch directory %s was not removed", stale)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("fresh scratch directory was removed: %v", err)
	}
}

// alive reports whether pid runs and is not a zombie.
func alive(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	s := string(stat)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(fields) > 0 && fields[0] != "Z"
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
