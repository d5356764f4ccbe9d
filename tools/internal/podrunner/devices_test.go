package podrunner

import (
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func needRoot(t *testing.T, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatalf("needs root (%s); run the tests as root, as CI does", why)
	}
}

// attachLoop attaches a sparse file to a free loop device and detaches it at cleanup.
func attachLoop(t *testing.T, losetupArgs ...string) string {
	t.Helper()
	img := filepath.Join(t.TempDir(), "disk.img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 64<<20); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("losetup", append(append([]string{"--find", "--show"}, losetupArgs...), img)...).CombinedOutput()
	if err != nil {
		t.Fatalf("losetup --find --show: %v: %s", err, out)
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() {
		// Partitions added with BLKPG outlive the detach: drop them for the next user.
		if parts, _ := filepath.Glob(filepath.Join("/sys/block", filepath.Base(dev), filepath.Base(dev)+"p*")); len(parts) > 0 {
			if out, err := exec.Command("partx", "--delete", dev).CombinedOutput(); err != nil {
				t.Errorf("partx --delete %s: %v: %s", dev, err, out)
			}
		}
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
	want := append(append([]string{}, basicDevices...), filepath.Base(dev), "fd", "stdin", "stdout", "stderr", "disk")
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

// TestPartUUIDLinks: a node's /dev links its disks' GPT partitions by partition GUID under
// disk/by-partuuid, as udev would, and a Block volume naming such a link resolves to the
// node's device node of that partition.
func TestPartUUIDLinks(t *testing.T) {
	needRoot(t, "losetup, sfdisk and mknod")
	dev := attachLoop(t, "--partscan")
	cmd := exec.Command("sfdisk", "--quiet", dev)
	cmd.Stdin = strings.NewReader("label: gpt\nsize=20MiB\nsize=20MiB\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("sfdisk: %v: %s", err, out)
	}
	// This machine's kernel may not read GPT itself: add the partitions as the agent does
	// (BLKPG, here through partx).
	if out, err := exec.Command("partx", "--add", dev).CombinedOutput(); err != nil {
		t.Fatalf("partx --add: %v: %s", err, out)
	}
	out, err := exec.Command("sfdisk", "--part-uuid", dev, "2").Output()
	if err != nil {
		t.Fatalf("sfdisk --part-uuid: %v", err)
	}
	uuid := strings.ToLower(strings.TrimSpace(string(out)))
	part := dev + "p2"
	for i := 0; i < 50; i++ {
		if _, err := os.Stat(part); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	devDir := t.TempDir()
	r := &Runner{cfg: Config{NodeDevDir: devDir, NodeDevices: map[string][]string{"node-a": {dev}}}, log: slog.Default()}
	if err := r.syncNodeDev("node-a"); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(devDir, "node-a", "disk", "by-partuuid", uuid)
	if got, err := os.Readlink(link); err != nil || got != "../../"+filepath.Base(part) {
		t.Fatalf("link %s -> %q (%v), want ../../%s", link, got, err, filepath.Base(part))
	}
	entries, _ := os.ReadDir(filepath.Dir(link))
	if len(entries) != 2 {
		t.Errorf("%d links, want one per partition (2)", len(entries))
	}
	mode := corev1.PersistentVolumeBlock
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "raw"}, Spec: corev1.PersistentVolumeSpec{
		VolumeMode:             &mode,
		PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: "/dev/disk/by-partuuid/" + uuid}}}}
	got, err := r.blockDevice("node-a", pv)
	if err != nil || got != filepath.Join(devDir, "node-a", filepath.Base(part)) {
		t.Fatalf("blockDevice = %q, %v; want node-a's %s", got, err, filepath.Base(part))
	}
	hr, _ := rdev(t, part)
	if nr, _ := rdev(t, got); nr != hr {
		t.Errorf("the node's %s has rdev %d, the host's %d", filepath.Base(part), nr, hr)
	}
	// A partition that is gone takes its link with it; the volume is not there yet.
	if out, err := exec.Command("partx", "--delete", "--nr", "2", dev).CombinedOutput(); err != nil {
		t.Fatalf("partx --delete: %v: %s", err, out)
	}
	for i := 0; i < 50; i++ {
		if _, err := os.Stat(part); os.IsNotExist(err) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := r.syncNodeDev("node-a"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(link); !os.IsNotExist(err) {
		t.Errorf("link of the deleted partition: %v", err)
	}
	if _, err := r.blockDevice("node-a", pv); !errors.Is(err, errNotYet) {
		t.Errorf("blockDevice of a missing partition: %v, want errNotYet", err)
	}
}
