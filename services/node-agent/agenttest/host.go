package agenttest

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"

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
	a.loops = append(a.loops, dev)
	a.t.Cleanup(func() {
		unmountUnder(a.t, a.Root)
		if out, err := exec.Command("losetup", "--detach", dev).CombinedOutput(); err != nil {
			a.t.Errorf("agenttest: detaching %s: %v: %s", dev, err, out)
		}
		_ = os.Remove(name)
	})
	a.Restart()
	return dev
}

// unmountUnder unmounts, deepest first, everything mounted under dir in this mount namespace.
func unmountUnder(t testing.TB, dir string) {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Error(err)
		return
	}
	defer f.Close()
	var targets []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// Field 5 is the mount point, with spaces and the like octal-escaped.
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 {
			m := unescapeMountPoint(fields[4])
			if m == dir || strings.HasPrefix(m, dir+"/") {
				targets = append(targets, m)
			}
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(targets)))
	for _, m := range slices.Compact(targets) {
		if err := unix.Unmount(m, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			t.Errorf("agenttest: unmounting %s: %v", m, err)
		}
	}
}

func unescapeMountPoint(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var c byte
			if _, err := fmt.Sscanf(s[i+1:i+4], "%03o", &c); err == nil {
				b.WriteByte(c)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
