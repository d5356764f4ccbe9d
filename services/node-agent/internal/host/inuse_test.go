package host

import (
	"bufio"
	"fmt"
	"slices"
	"time"

	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// loopDevice attaches a loop device over a sparse file (needs root and losetup).
func loopDevice(t *testing.T, size int64) string {
	t.Helper()
	img := filepath.Join(t.TempDir(), "disk.img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, size); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("losetup", "--find", "--show", img).CombinedOutput()
	if err != nil {
		t.Fatalf("losetup (needs root and util-linux): %v: %s", err, out)
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() { _ = exec.Command("losetup", "--detach", dev).Run() })
	return dev
}

// holdOpen starts sleep with dev open read-write; killed when the test ends.
func holdOpen(t *testing.T, dev string) {
	t.Helper()
	f, err := os.OpenFile(dev, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command("sleep", "600")
	cmd.ExtraFiles = []*os.File{f}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
}

// TestWithFreeMedia: a destructive step never starts on a disk in use, and a user that
// appears while it runs fails the step (it would otherwise answer OK).
func TestWithFreeMedia(t *testing.T) {
	ctx := context.Background()
	cfg := DefaultConfig()
	h := &Host{cfg: cfg}
	dev := loopDevice(t, 64<<20)
	d, err := h.DiskByPath(dev)
	if err != nil {
		t.Fatal(err)
	}
	err = h.withFreeMedia(ctx, d, func() error {
		holdOpen(t, dev) // opened by someone else during the step
		return nil
	})
	if !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), "after writing") || !strings.Contains(err.Error(), "(sleep)") {
		t.Fatalf("a user appearing during the step: %v", err)
	}
	ran := false
	err = h.withFreeMedia(ctx, d, func() error { ran = true; return nil })
	if !errors.Is(err, ErrInUse) || ran {
		t.Fatalf("a step on a disk in use ran=%v: %v", ran, err)
	}
}

// TestMemoryMappedDeviceIsInUse: a process that mapped the device and closed its descriptor
// still uses it; only its maps show it. The helper process is this test binary.
func TestMemoryMappedDeviceIsInUse(t *testing.T) {
	if dev := os.Getenv("HOST_TEST_MMAP"); dev != "" {
		mmapAndWait(dev)
		return
	}
	h := &Host{cfg: DefaultConfig()}
	dev := loopDevice(t, 64<<20)
	cmd := exec.Command(os.Args[0], "-test.run=^TestMemoryMappedDeviceIsInUse$")
	cmd.Env = append(os.Environ(), "HOST_TEST_MMAP="+dev)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "mapped" {
		t.Fatalf("helper: %q, %v", line, err)
	}
	d, err := h.DiskByPath(dev)
	if err != nil {
		t.Fatal(err)
	}
	uses, err := h.Users(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("%s is memory-mapped by process %d", dev, cmd.Process.Pid)
	if !slices.ContainsFunc(uses, func(u string) bool { return strings.HasPrefix(u, want) }) {
		t.Fatalf("users %v, want %q", uses, want)
	}
}

// mmapAndWait maps dev, closes its descriptor, says so and waits to be killed.
func mmapAndWait(dev string) {
	fd, err := unix.Open(dev, unix.O_RDONLY, 0)
	if err != nil {
		panic(err)
	}
	if _, err := unix.Mmap(fd, 0, 4096, unix.PROT_READ, unix.MAP_SHARED); err != nil {
		panic(err)
	}
	_ = unix.Close(fd)
	fmt.Println("mapped")
	time.Sleep(10 * time.Minute)
}
