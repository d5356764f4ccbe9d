package podrunner

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestHostOnlyAncestor: the highest directory above a mount point that others may not
// search, none when all may (or the path goes missing first).
func TestHostOnlyAncestor(t *testing.T) {
	root := searchableTempDir(t)
	open := filepath.Join(root, "open")
	closed := filepath.Join(root, "open", "closed")
	inner := filepath.Join(closed, "inner")
	if err := os.MkdirAll(inner, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(closed, 0o2770); err != nil {
		t.Fatal(err)
	}
	for target, want := range map[string]string{
		filepath.Join(open, "conf"):         "",
		filepath.Join(closed, "conf"):       closed,
		filepath.Join(inner, "deeper", "x"): closed,
		filepath.Join(root, "missing", "x"): "",
		closed:                              "", // the mount point itself is replaced by the mount
	} {
		if got := hostOnlyAncestor(target); got != want {
			t.Errorf("hostOnlyAncestor(%s) = %q, want %q", target, got, want)
		}
	}
}

// TestMountUnderHostOnlyDir: a process run as a non-root user reads a volume mounted below
// a host directory only its owner's group may search (as Debian's /etc/valkey, 2770), as
// it would in an image without that directory; before, it got "permission denied".
func TestMountUnderHostOnlyDir(t *testing.T) {
	needRoot(t, "mount namespaces and credentials")
	root := searchableTempDir(t)
	hostDir := filepath.Join(root, "etc-valkey")
	if err := os.MkdirAll(filepath.Join(hostDir, "conf"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(hostDir, "host-only.conf"), []byte("host"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(hostDir, 0o2770); err != nil {
		t.Fatal(err)
	}
	volume := filepath.Join(root, "volume")
	if err := os.MkdirAll(volume, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(volume, "valkey.conf"), []byte("port 6379\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := execSpec{Argv: []string{"/bin/cat", filepath.Join(hostDir, "conf", "valkey.conf")}, Dir: "/", Env: []string{"PATH=/usr/bin:/bin"},
		Mounts: []mountSpec{{Source: volume, Target: filepath.Join(hostDir, "conf"), ReadOnly: true}},
		User:   &credentials{UID: 41001, GID: 41001}}
	data, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	specPath := filepath.Join(t.TempDir(), "spec.json")
	if err := os.WriteFile(specPath, data, 0o600); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, HelperCommand, specPath)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWUTS}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "port 6379") {
		t.Fatalf("reading the volume as 41001: %v: %s", err, out)
	}
	// The host directory is untouched outside the process's namespace.
	if b, err := os.ReadFile(filepath.Join(hostDir, "host-only.conf")); err != nil || string(b) != "host" {
		t.Errorf("host directory changed: %q %v", b, err)
	}
}

// searchableTempDir is a temporary directory every user may search, below /tmp (1777):
// t.TempDir's parent is 0700.
func searchableTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "podrunner-hostdirs-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}
