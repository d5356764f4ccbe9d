package agenttest

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/opsuite/suite/services/node-agent/internal/host"
	"golang.org/x/sys/unix"
)

// AttachLoop attaches a loop device (with partition scanning) over a sparse file of size
// bytes under the agent's root, restarts the agent with the device in its allowlist and
// returns its path; when the test ends, everything mounted under the agent's root is
// unmounted and the device detached.
func (a *Agent) AttachLoop(size int64) string {
	a.t.Helper()
	f, err := os.CreateTemp(a.Root, "disk-*.img")
	if err != nil {
		a.t.Fatal(err)
	}
	name := f.Name()
	err = errors.Join(f.Truncate(size), f.Close())
	if err != nil {
		a.t.Fatal(err)
	}
	out, err := exec.Command("losetup", "--find", "--show", "--partscan", name).CombinedOutput()
	if err != nil {
		a.t.Fatalf("agenttest: losetup over %s (needs root and util-linux): %v: %s", name, err, out)
	}
	dev := strings.TrimSpace(string(out))
	clearPartitions(a.t, dev)
	a.loops = append(a.loops, dev)
	a.t.Cleanup(func() {
		UnmountUnder(a.t, a.Root)
		clearPartitions(a.t, dev)
		if out, err := exec.Command("losetup", "--detach", dev).CombinedOutput(); err != nil {
			a.t.Errorf("agenttest: detaching %s: %v: %s", dev, err, out)
		}
		_ = os.Remove(name)
	})
	a.Restart()
	return dev
}

// MountPoints lists the mount points of this mount namespace (/proc/self/mountinfo).
func MountPoints(t testing.TB) []string {
	t.Helper()
	mounts, err := host.ReadMountInfo("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	points := make([]string, len(mounts))
	for i, m := range mounts {
		points[i] = m.MountPoint
	}
	return points
}

// UnmountUnder unmounts, deepest first, everything mounted at or under dir in this mount
// namespace.
func UnmountUnder(t testing.TB, dir string) {
	t.Helper()
	var targets []string
	for _, m := range MountPoints(t) {
		if m == dir || strings.HasPrefix(m, dir+"/") {
			targets = append(targets, m)
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(targets)))
	for _, m := range slices.Compact(targets) {
		if err := unix.Unmount(m, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			t.Errorf("agenttest: unmounting %s: %v", m, err)
		}
	}
}

// Blkid returns what `blkid -p` sees on a device (KEY=value pairs, empty when it finds
// nothing): a look at the device that does not go through the agent's own probing.
func Blkid(t testing.TB, dev string) map[string]string {
	t.Helper()
	out, err := exec.Command("blkid", "-p", "-o", "export", dev).Output()
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) && ee.ExitCode() == 2 {
		return map[string]string{}
	}
	if err != nil {
		t.Fatalf("blkid -p %s: %v", dev, err)
	}
	kv := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			kv[k] = v
		}
	}
	return kv
}

// clearPartitions drops the kernel's partitions of a loop device: those the agent added
// with BLKPG outlive losetup --detach, and the next file attached to that loop device (in
// this test or another, e.g. the local cluster's) would show them.
func clearPartitions(t testing.TB, dev string) {
	t.Helper()
	parts, _ := filepath.Glob(filepath.Join("/sys/block", filepath.Base(dev), filepath.Base(dev)+"p*"))
	if len(parts) == 0 {
		return
	}
	if out, err := exec.Command("partx", "--delete", dev).CombinedOutput(); err != nil {
		t.Errorf("agenttest: dropping the partitions %v of %s: %v: %s", parts, dev, err, out)
	}
}
