package testenv

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// TestReservePortAcrossProcesses: a port whose lock another process holds (an open file
// description of its own, as another test binary has) is not handed out; one nobody
// holds is, and stays held by this process.
func TestReservePortAcrossProcesses(t *testing.T) {
	held := FreePortBelowEphemeral(t)
	f, err := os.OpenFile(filepath.Join(portLockDir, strconv.Itoa(held)), os.O_RDWR, 0)
	if err != nil {
		t.Fatalf("FreePortBelowEphemeral left no lock file for %d: %v", held, err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
		t.Fatalf("port %d handed out, yet its lock is free for another holder", held)
	}

	// Another process's reservation, as this test can make one: a lock on a file of its own.
	other := 20000
	for ; other < 32000; other++ {
		if reservePortFree(t, other) {
			break
		}
	}
	g, err := os.OpenFile(filepath.Join(portLockDir, strconv.Itoa(other)), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := syscall.Flock(int(g.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatalf("locking %d as another process would: %v", other, err)
	}
	if reservePort(other) {
		t.Errorf("port %d reserved while another holder has its lock", other)
	}
}

// reservePortFree reports whether port p's lock is free now (taken and let go at once).
func reservePortFree(t *testing.T, p int) bool {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(portLockDir, strconv.Itoa(p)), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		return false
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return true
}
