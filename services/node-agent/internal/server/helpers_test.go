package server_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/opsuite/suite/services/node-agent/agenttest"
	"github.com/opsuite/suite/services/node-agent/internal/host"
	"github.com/opsuite/suite/services/node-agent/internal/server"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

const mib = 1 << 20

// testTools are the commands the tests run besides the agent's own, with their packages.
var testTools = map[string]string{
	"losetup":   "mount",
	"mkfs.ext4": "e2fsprogs",
	"mkfs.xfs":  "xfsprogs",
	"sfdisk":    "fdisk",
	"blkid":     "util-linux",
	"wipefs":    "util-linux",
}

// requireTools fails (never skips) when a command is missing, naming the package to install.
func requireTools(t testing.TB) {
	t.Helper()
	if !agenttest.InPrivateMountNamespace() {
		t.Fatal("not running in the private mount namespace TestMain sets up")
	}
	for tool, pkg := range testTools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found: apt-get install %s (listed in .ci/apt-packages.txt)", tool, pkg)
		}
	}
}

// testEnv is an agent over the real host with its roots in a temporary directory.
type testEnv struct {
	t    testing.TB
	root string
	opts server.Options
	host *host.Host
	srv  *server.Server
}

func newEnv(t testing.TB, mutate ...func(*server.Options)) *testEnv {
	t.Helper()
	requireTools(t)
	root := t.TempDir()
	opts := server.Options{
		NodeName: "node-a", Version: "test", PoolLabelPrefix: "pool.opsuite.io",
		AgentRoot: filepath.Join(root, "agent"), PVRoot: filepath.Join(root, "pv"),
		StateFile:        filepath.Join(root, "agent", "state.json"),
		AllowLoopDevices: true,
		SysctlMinimums:   map[string]int64{"vm.max_map_count": 262144},
	}
	for _, m := range mutate {
		m(&opts)
	}
	h, err := host.New(testHostConfig())
	if err != nil {
		t.Fatal(err)
	}
	e := &testEnv{t: t, root: root, opts: opts, host: h}
	e.srv = e.newServer()
	// Loop devices attached later unmount before detaching (cleanups run last-in first-out);
	// this one catches mounts made without a loop device.
	t.Cleanup(func() { agenttest.UnmountUnder(t, root) })
	return e
}

// testHostConfig is the real host, offering loop devices (the tests' disks) for preparation.
func testHostConfig() host.Config {
	cfg := host.DefaultConfig()
	cfg.DeviceAllow = []string{"/dev/loop*"}
	return cfg
}

// testNamespace is the namespace the test node lends its disks to (label
// pool.opsuite.io/namespace), which every request of the tests names.
const testNamespace = "search"

// newServer starts a fresh agent on the same state, as after a restart.
func (e *testEnv) newServer() *server.Server {
	e.t.Helper()
	labels := server.StaticLabels{"pool.opsuite.io/namespace": testNamespace, "pool.opsuite.io/type": "nvme", "other": "x"}
	srv, err := server.New(e.opts, e.host, labels, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		e.t.Fatal(err)
	}
	return srv
}

// newServerWithLabels starts an agent on the env's state with other node labels.
func newServerWithLabels(t testing.TB, e *testEnv, labels map[string]string) *server.Server {
	t.Helper()
	srv, err := server.New(e.opts, e.host, server.StaticLabels(labels), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

// newServerWithHost starts an agent on the env's state over another Host (a test double of the
// node's hardware).
func newServerWithHost(t testing.TB, e *testEnv, h server.Host) *server.Server {
	t.Helper()
	labels := server.StaticLabels{"pool.opsuite.io/namespace": testNamespace}
	srv, err := server.New(e.opts, h, labels, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

func (e *testEnv) pv(name string) string { return filepath.Join(e.opts.PVRoot, name) }

// newLoop attaches a loop device (with partition scanning) over a sparse file and detaches it
// when the test ends, after unmounting anything of the test that still uses it.
func newLoop(t testing.TB, root string, size int64) string {
	t.Helper()
	dev, detach := attachLoop(t, root, size)
	t.Cleanup(detach)
	return dev
}

// attachLoop attaches a loop device and returns the function that unmounts the test's mounts
// and detaches it; benchmarks call it every iteration so devices never pile up.
func attachLoop(t testing.TB, root string, size int64) (string, func()) {
	t.Helper()
	f, err := os.CreateTemp(root, "disk-*.img")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	f.Close()
	out, err := exec.Command("losetup", "--find", "--show", "--partscan", f.Name()).CombinedOutput()
	if err != nil {
		os.Remove(f.Name())
		t.Fatalf("losetup: %v: %s", err, out)
	}
	dev := strings.TrimSpace(string(out))
	return dev, func() {
		agenttest.UnmountUnder(t, root)
		if out, err := exec.Command("losetup", "--detach", dev).CombinedOutput(); err != nil {
			t.Errorf("detaching %s: %v: %s", dev, err, out)
		}
		os.Remove(f.Name())
	}
}

func isMounted(t testing.TB, target string) bool {
	t.Helper()
	return slices.Contains(agenttest.MountPoints(t), target)
}

func mustRun(t testing.TB, name string, args ...string) {
	t.Helper()
	if out, err := exec.CommandContext(context.Background(), name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
}

func wantCode(t testing.TB, err error, code codes.Code, contains ...string) {
	t.Helper()
	if status.Code(err) != code {
		t.Fatalf("got %v, want code %v", err, code)
	}
	for _, c := range contains {
		if !strings.Contains(status.Convert(err).Message(), c) {
			t.Fatalf("message %q does not contain %q", status.Convert(err).Message(), c)
		}
	}
}

func command(t testing.TB, name string, args ...string) *exec.Cmd {
	t.Helper()
	return exec.Command(name, args...)
}

// backingFile names the file behind a loop device.
func backingFile(t testing.TB, dev string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/sys/block", filepath.Base(dev), "loop", "backing_file"))
	if err != nil {
		t.Fatalf("%s is not an attached loop device: %v", dev, err)
	}
	return strings.TrimSpace(string(b))
}

// fileHash is the SHA-256 of a whole file (sparse files read fast).
func fileHash(t testing.TB, p string) string {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}
