package podrunner

import (
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"k8s.io/utils/ptr"
)

func needRoot(t *testing.T, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatalf("needs root (%s); run the tests as root, as CI does", why)
	}
}

// attachLoop attaches a sparse file to a free loop device and detaches it at cleanup.
func attachLoop(t *testing.T) string {
	t.Helper()
	img := filepath.Join(t.TempDir(), "disk.img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 64<<20); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("losetup", "--find", "--show", img).CombinedOutput()
	if err != nil {
		t.Fatalf("losetup --find --show: %v: %s", err, out)
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() {
		if out, err := exec.Command("losetup", "--detach", dev).CombinedOutput(); err != nil {
			t.Errorf("losetup --detach %s: %v: %s", dev, err, out)
		}
	})
	return dev
}

func rdev(t *testing.T, path string) (uint64, uint32) {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Rdev, st.Mode
}

// A pod's hostPath /dev on a node holds that node's disks and the basic devices, with the
// host's numbers, and nothing else of the host's /dev.
func TestNodeDev(t *testing.T) {
	needRoot(t, "losetup and mknod")
	dev := attachLoop(t)
	other := attachLoop(t)
	devDir := t.TempDir()
	r := &Runner{cfg: Config{NodeDevDir: devDir, NodeDevices: map[string][]string{"node-a": {dev}, "node-b": {other}}}, log: slog.Default()}

	got := r.hostPath("node-a", "/dev")
	if got != filepath.Join(devDir, "node-a") {
		t.Fatalf("hostPath(/dev) = %s, want the node's directory", got)
	}
	if p := r.hostPath("node-a", "/dev/"+filepath.Base(dev)); p != filepath.Join(devDir, "node-a", filepath.Base(dev)) {
		t.Errorf("hostPath(%s) = %s", dev, p)
	}
	if p := r.hostPath("node-a", "/proc"); p != "/proc" {
		t.Errorf("hostPath(/proc) = %s, want the host's", p)
	}
	entries, err := os.ReadDir(got)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	want := append(append([]string{}, basicDevices...), filepath.Base(dev), "fd", "stdin", "stdout", "stderr")
	slices.Sort(names)
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Fatalf("node-a's /dev holds %v, want %v", names, want)
	}
	for _, name := range []string{filepath.Base(dev), "null"} {
		hr, hm := rdev(t, "/dev/"+name)
		nr, nm := rdev(t, filepath.Join(got, name))
		if hr != nr || hm != nm {
			t.Errorf("%s: rdev %d mode %o, host's %d %o", name, nr, nm, hr, hm)
		}
	}
	// The device node works: the loop device's size reads through it.
	f, err := os.Open(filepath.Join(got, filepath.Base(dev)))
	if err != nil {
		t.Fatal(err)
	}
	size, err := f.Seek(0, 2)
	f.Close()
	if err != nil || size != 64<<20 {
		t.Errorf("size through the node's device node: %d, %v", size, err)
	}
	// A device the node no longer owns goes at the next sync.
	r.cfg.NodeDevices["node-a"] = nil
	if err := r.syncNodeDev("node-a"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(got, filepath.Base(dev))); !os.IsNotExist(err) {
		t.Errorf("%s still in node-a's /dev: %v", dev, err)
	}
}

// Files of read-only volumes get the kubelet's modes and the fsGroup; the token its user.
func TestWriteFilesOwnership(t *testing.T) {
	needRoot(t, "chown")
	dir := filepath.Join(t.TempDir(), "vol")
	own := ownership{fsUser: ptr.To[int64](65532), fsGroup: ptr.To[int64](4000)}
	files := map[string]fileContent{
		"token":   {data: []byte("t"), token: true},
		"ca.crt":  {data: []byte("c")},
		"sub/key": {data: []byte("k"), mode: ptr.To[int32](0o400)},
	}
	if err := writeFiles(dir, files, ptr.To[int32](0o644), own); err != nil {
		t.Fatal(err)
	}
	check := func(name string, mode os.FileMode, uid, gid uint32) {
		t.Helper()
		st, err := os.Lstat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		sys := st.Sys().(*syscall.Stat_t)
		if st.Mode() != mode || sys.Uid != uid || sys.Gid != gid {
			t.Errorf("%s: %v %d:%d, want %v %d:%d", name, st.Mode(), sys.Uid, sys.Gid, mode, uid, gid)
		}
	}
	check("token", 0o640, 65532, 4000)
	check("ca.crt", 0o644, 0, 4000)
	check("sub/key", 0o440, 0, 4000)
	check("sub", os.ModeDir|os.ModeSetgid|0o755, 0, 4000)
	check(".", os.ModeDir|os.ModeSetgid|0o755, 0, 4000)
}

// Every path but the kernel's and /dev lives in the node's own root, so two nodes' pods
// (two node agents' state files, say) never share a host directory.
func TestHostPathPerNode(t *testing.T) {
	root := t.TempDir()
	r := &Runner{cfg: Config{NodeRootDir: root}, log: slog.Default()}
	for _, c := range []struct{ node, path, want string }{
		{"node-a", "/var/lib/opsuite-node-agent", filepath.Join(root, "node-a", "var/lib/opsuite-node-agent")},
		{"node-b", "/var/lib/opsuite-node-agent/", filepath.Join(root, "node-b", "var/lib/opsuite-node-agent")},
		{"node-a", "/mnt/../mnt/opsuite", filepath.Join(root, "node-a", "mnt/opsuite")},
		{"node-a", "/proc", "/proc"},
		{"node-a", "/proc/sys/vm", "/proc/sys/vm"},
		{"node-a", "/sys/block", "/sys/block"},
		{"node-a", "/system", filepath.Join(root, "node-a", "system")},
		{"node-a", "/dev", "/dev"}, // no NodeDevDir: the host's
	} {
		if got := r.hostPath(c.node, c.path); got != c.want {
			t.Errorf("hostPath(%s, %s) = %s, want %s", c.node, c.path, got, c.want)
		}
	}
	r.cfg.NodeRootDir = ""
	if got := r.hostPath("node-a", "/var/lib/x"); got != "/var/lib/x" {
		t.Errorf("without NodeRootDir hostPath = %s, want the host's path", got)
	}
}
