package server_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	nodeagentv1 "github.com/opsuite/suite/proto/nodeagent/v1"
	"github.com/opsuite/suite/services/node-agent/agenttest"
	"github.com/opsuite/suite/services/node-agent/internal/host"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
)

// holdOpen starts a process (sleep) that holds dev open read-write, as a database holding a
// raw device would, and returns its pid; it is killed when the test ends.
func holdOpen(t *testing.T, dev string) int {
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
	return cmd.Process.Pid
}

// writeData puts bytes no probe recognises on a device: data of an application that writes
// raw blocks.
func writeData(t *testing.T, dev string) {
	t.Helper()
	f, err := os.OpenFile(dev, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte(strings.Repeat("raw application data ", 1000)), 4*mib); err != nil {
		t.Fatal(err)
	}
}

// withHost rebuilds the env's host (and server) with a changed host configuration.
func withHost(t *testing.T, e *testEnv, mutate func(*host.Config)) {
	t.Helper()
	cfg := testHostConfig()
	mutate(&cfg)
	h, err := host.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.host = h
	e.srv = e.newServer()
}

// TestDeviceHeldOpenIsRefused is the report: a loop device holding data and held open
// read-write by a process was formatted by a PrepareDisks that named it, and the call answered
// OK. Now it is refused, naming the process, whole or split, and reported as such.
func TestDeviceHeldOpenIsRefused(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	dev := newLoop(t, e.root, 512*mib)
	writeData(t, dev)
	before := fileHash(t, backingFile(t, dev))
	pid := holdOpen(t, dev)
	for _, pct := range []uint32{0, 80} {
		_, err := e.srv.PrepareDisks(ctx, prepareReq(e.pv(fmt.Sprintf("held-%d", pct)), pct, dev))
		wantCode(t, err, codes.FailedPrecondition, dev, "open by process "+strconv.Itoa(pid)+" (sleep)")
	}
	if after := fileHash(t, backingFile(t, dev)); after != before {
		t.Fatal("the device held open was written")
	}
	rep, err := e.srv.GetNodeReport(ctx, &nodeagentv1.GetNodeReportRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range rep.Devices {
		if d.Path == dev && (d.Eligible || !strings.Contains(d.IneligibleReason, "(sleep)")) {
			t.Fatalf("reported %+v", d)
		}
	}
}

// TestLoopBackingIsRefused: a disk that backs a loop device is in use even though no process
// holds it open and the kernel grants exclusive access.
func TestLoopBackingIsRefused(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	dev := newLoop(t, e.root, 512*mib)
	out, err := exec.Command("losetup", "--find", "--show", dev).CombinedOutput()
	if err != nil {
		t.Fatalf("losetup over %s: %v: %s", dev, err, out)
	}
	upper := strings.TrimSpace(string(out))
	t.Cleanup(func() { _ = exec.Command("losetup", "--detach", upper).Run() })
	_, err = e.srv.PrepareDisks(ctx, prepareReq(e.pv("backing"), 0, dev))
	wantCode(t, err, codes.FailedPrecondition, dev+" backs loop device "+upper)
}

// TestActiveSwapIsRefused: a partition or disk that is active swap says so.
func TestActiveSwapIsRefused(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	dev := newLoop(t, e.root, 512*mib)
	mustRun(t, "mkswap", dev)
	mustRun(t, "swapon", dev)
	t.Cleanup(func() { _ = exec.Command("swapoff", dev).Run() })
	_, err := e.srv.PrepareDisks(ctx, prepareReq(e.pv("swap"), 0, dev))
	wantCode(t, err, codes.FailedPrecondition, dev+" is active swap")
}

// TestKubeletBlockVolumeIsRefused: a disk the kubelet maps as a block volume (a pod's symlink,
// or a device node in the CSI plugins' volumeDevices tree) is in use though nothing holds it
// open. The kubelet's directory is a fixture with real symlinks and device nodes.
func TestKubeletBlockVolumeIsRefused(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	dev := newLoop(t, e.root, 512*mib)
	kubelet := filepath.Join(e.root, "kubelet")
	withHost(t, e, func(c *host.Config) { c.KubeletRoot = kubelet })

	podDir := filepath.Join(kubelet, "pods", "1b2c", "volumeDevices", "kubernetes.io~csi")
	if err := os.MkdirAll(podDir, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(dev, filepath.Join(podDir, "pvc-1")); err != nil {
		t.Fatal(err)
	}
	_, err := e.srv.PrepareDisks(ctx, prepareReq(e.pv("mapped"), 0, dev))
	wantCode(t, err, codes.FailedPrecondition, dev+" is mapped as a block volume at "+filepath.Join(podDir, "pvc-1"))

	if err := os.RemoveAll(filepath.Join(kubelet, "pods")); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(dev, &st); err != nil {
		t.Fatal(err)
	}
	staging := filepath.Join(kubelet, "plugins", "kubernetes.io", "csi", "volumeDevices", "staging", "pvc-1")
	if err := os.MkdirAll(staging, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mknod(filepath.Join(staging, "dev"), unix.S_IFBLK|0o600, int(st.Rdev)); err != nil {
		t.Fatal(err)
	}
	_, err = e.srv.PrepareDisks(ctx, prepareReq(e.pv("mapped"), 0, dev))
	wantCode(t, err, codes.FailedPrecondition, dev+" is mapped as a block volume at "+filepath.Join(staging, "dev"))

	// A device node bind-mounted elsewhere (how the kubelet publishes a block volume to a pod).
	if err := os.RemoveAll(filepath.Join(kubelet, "plugins")); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(e.root, "published")
	if err := os.WriteFile(target, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(dev, target, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = unix.Unmount(target, unix.MNT_DETACH) }()
	_, err = e.srv.PrepareDisks(ctx, prepareReq(e.pv("mapped"), 0, dev))
	wantCode(t, err, codes.FailedPrecondition, dev+" is bind-mounted at "+target)
	if sig := agenttest.Blkid(t, dev); len(sig) != 0 {
		t.Fatalf("the mapped device was written: %v", sig)
	}
}

// TestWipeRefusesRawPartitionInUse: ReleaseDisks with wipe applies the same rule to the raw
// partition, which a pod (here a process) may still use after the XFS side is unmounted.
func TestWipeRefusesRawPartitionInUse(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	dev := newLoop(t, e.root, 2048*mib)
	resp, err := e.srv.PrepareDisks(ctx, prepareReq(e.pv("vlog"), 20, dev))
	if err != nil {
		t.Fatal(err)
	}
	raw := resp.Disks[0].RawDevice
	pid := holdOpen(t, raw)
	_, err = e.srv.ReleaseDisks(ctx, &nodeagentv1.ReleaseDisksRequest{PvPath: e.pv("vlog"), Wipe: true})
	wantCode(t, err, codes.FailedPrecondition, raw+" is open by process "+strconv.Itoa(pid)+" (sleep)")
	if sig := agenttest.Blkid(t, dev); sig["PTTYPE"] != "gpt" {
		t.Fatalf("the refused wipe changed the device: %v", sig)
	}
	if !isMounted(t, resp.Disks[0].PvPath) {
		t.Fatal("mounts not put back after a refused wipe")
	}
}
