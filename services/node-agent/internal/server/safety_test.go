package server_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	nodeagentv1 "github.com/opsuite/suite/proto/nodeagent/v1"
	"github.com/opsuite/suite/services/node-agent/agenttest"
	"github.com/opsuite/suite/services/node-agent/internal/host"
	"github.com/opsuite/suite/services/node-agent/internal/server"
	"google.golang.org/grpc/codes"
)

// TestSymlinkUnderPVRootIsRefused: a symlink planted under the PV root, pointing outside it,
// neither redirects a mount nor gets a directory created through it.
func TestSymlinkUnderPVRootIsRefused(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	dev := newLoop(t, e.root, 512*mib)
	outside := t.TempDir()
	if err := os.MkdirAll(e.opts.PVRoot, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, e.pv("evil")); err != nil {
		t.Fatal(err)
	}
	for _, pv := range []string{e.pv("evil"), e.pv("evil/vol"), e.pv("evil/deeper/vol")} {
		_, err := e.srv.PrepareDisks(ctx, prepareReq(pv, 0, dev))
		wantCode(t, err, codes.InvalidArgument, "symlink")
	}
	// Planted after the request was checked: the mount itself resolves beneath the root.
	src := t.TempDir()
	for _, target := range []string{e.pv("evil"), e.pv("evil/vol")} {
		if err := e.host.BindMount(src, e.opts.PVRoot, target); !errors.Is(err, host.ErrUnsafePath) {
			t.Fatalf("bind mount at %s: %v, want %v", target, err, host.ErrUnsafePath)
		}
	}
	if err := e.host.Unmount(e.opts.PVRoot, e.pv("evil/vol")); !errors.Is(err, host.ErrUnsafePath) {
		t.Fatalf("unmount through the symlink: %v", err)
	}
	entries, err := os.ReadDir(outside)
	if err != nil || len(entries) != 0 {
		t.Fatalf("the directory outside the root got %v (%v)", entries, err)
	}
	if isMounted(t, outside) {
		t.Fatal("the directory outside the root is a mount point")
	}
	if sig := agenttest.Blkid(t, dev); len(sig) != 0 {
		t.Fatalf("the device was written: %v", sig)
	}
	if rep, err := e.srv.GetNodeReport(ctx, &nodeagentv1.GetNodeReportRequest{}); err != nil || len(rep.Prepared) != 0 {
		t.Fatalf("reserved after a refusal: %v, %v", rep.GetPrepared(), err)
	}
}

// withAllowlist rebuilds the env's host and server with a device allowlist.
func withAllowlist(t *testing.T, e *testEnv, globs ...string) {
	t.Helper()
	cfg := testHostConfig()
	cfg.DeviceAllow = globs
	h, err := host.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.host = h
	e.srv = e.newServer()
}

// TestDeviceOutsideAllowlistIsReportedNeverPrepared: with --device-allow naming one loop
// device, another is reported, with the reason, but neither prepared nor written.
func TestDeviceOutsideAllowlistIsReportedNeverPrepared(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	const size = 617 * mib // an unusual size keeps the selector away from other loop devices
	in, out := newLoop(t, e.root, size), newLoop(t, e.root, size)
	withAllowlist(t, e, in)

	rep, err := e.srv.GetNodeReport(ctx, &nodeagentv1.GetNodeReportRequest{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]*nodeagentv1.BlockDevice{}
	for _, d := range rep.Devices {
		seen[d.Path] = d
	}
	if d := seen[in]; d == nil || !d.Eligible || d.OfferedBy != "device:"+in {
		t.Fatalf("offered device reported as %+v", d)
	}
	if d := seen[out]; d == nil || d.Eligible || d.OfferedBy != "" || d.IneligibleReason != server.NotOffered {
		t.Fatalf("device outside the allowlist reported as %+v", d)
	}

	_, err = e.srv.PrepareDisks(ctx, prepareReq(e.pv("v"), 0, out))
	wantCode(t, err, codes.FailedPrecondition, out, "not offered by the node's disk allowlist")
	_, err = e.srv.PrepareDisks(ctx, &nodeagentv1.PrepareDisksRequest{
		Selector: &nodeagentv1.DeviceSelector{MinSizeBytes: size, MaxSizeBytes: size, Count: 2}, PvPath: e.pv("pair"), Namespace: testNamespace,
	})
	wantCode(t, err, codes.FailedPrecondition, "1 eligible devices match the selector, 2 requested")
	rel, err := e.srv.ReleaseDisks(ctx, &nodeagentv1.ReleaseDisksRequest{Devices: []string{out}, Wipe: true})
	if err != nil || len(rel.Released) != 0 {
		t.Fatalf("releasing a device the agent never prepared: %v, %v", rel, err)
	}
	if sig := agenttest.Blkid(t, out); len(sig) != 0 {
		t.Fatalf("the device outside the allowlist was written: %v", sig)
	}
	// The allowed one works as ever.
	if _, err := e.srv.PrepareDisks(ctx, prepareReq(e.pv("v"), 0, in)); err != nil {
		t.Fatal(err)
	}
	// A glob allows by pattern.
	withAllowlist(t, e, filepath.Dir(out)+"/nothing*", out)
	if _, err := e.srv.PrepareDisks(ctx, prepareReq(e.pv("w"), 0, out)); err != nil {
		t.Fatal(err)
	}
}

// TestNothingOfferedByDefault is item 1 of issue 19: with no allowlist (the chart's default)
// a blank disk, which may be a volume a CSI driver attached or a Block-mode PVC's raw data,
// is reported and never prepared; a by-id link offers it.
func TestNothingOfferedByDefault(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	dev := newLoop(t, e.root, 512*mib)
	byID := filepath.Join(e.root, "by-id")
	withHost(t, e, func(c *host.Config) { c.DeviceAllow = nil; c.ByIDRoot = byID })
	_, err := e.srv.PrepareDisks(ctx, prepareReq(e.pv("v"), 0, dev))
	wantCode(t, err, codes.FailedPrecondition, dev, "not offered")
	if sig := agenttest.Blkid(t, dev); len(sig) != 0 {
		t.Fatalf("written: %v", sig)
	}
	if err := os.MkdirAll(byID, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(dev, filepath.Join(byID, "nvme-Test_Instance_Storage_1")); err != nil {
		t.Fatal(err)
	}
	withHost(t, e, func(c *host.Config) {
		c.DeviceAllow, c.ByIDRoot = nil, byID
		c.DeviceAllowByID = []string{"/dev/disk/by-id/nvme-Test_Instance_Storage_*"}
	})
	resp, err := e.srv.PrepareDisks(ctx, prepareReq(e.pv("v"), 0, dev))
	if err != nil || len(resp.Disks) != 1 {
		t.Fatalf("offered by id: %v, %v", resp, err)
	}
}

type slowProbe struct {
	*host.Host
	dev     string
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func (s *slowProbe) Probe(ctx context.Context, dev string) (host.Signature, error) {
	if dev == s.dev {
		s.once.Do(func() { close(s.entered) })
		<-s.release
	}
	return s.Host.Probe(ctx, dev)
}

// TestSlowProbeHoldsUpOnlyItsDevice: while probing one device hangs, calls on another device
// and calls that touch no device go through.
func TestSlowProbeHoldsUpOnlyItsDevice(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	slow, fast := newLoop(t, e.root, 512*mib), newLoop(t, e.root, 512*mib)
	h := &slowProbe{Host: e.host, dev: slow, entered: make(chan struct{}), release: make(chan struct{})}
	srv, err := server.New(e.opts, h, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	stuck := make(chan error, 2)
	go func() {
		_, err := srv.PrepareDisks(ctx, prepareReq(e.pv("slow"), 0, slow))
		stuck <- err
	}()
	go func() {
		_, err := srv.GetNodeReport(ctx, &nodeagentv1.GetNodeReportRequest{})
		stuck <- err
	}()
	select {
	case <-h.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the slow device was never probed")
	}

	done := make(chan error, 1)
	go func() {
		if _, err := srv.PrepareDisks(ctx, prepareReq(e.pv("fast"), 0, fast)); err != nil {
			done <- err
			return
		}
		if _, err := srv.EnsureSysctl(ctx, &nodeagentv1.EnsureSysctlRequest{Name: "vm.max_map_count", ReportOnly: true}); err != nil {
			done <- err
			return
		}
		_, err := srv.ReleaseDisks(ctx, &nodeagentv1.ReleaseDisksRequest{PvPath: e.pv("fast"), Wipe: true})
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		close(h.release)
		t.Fatal("calls on another device waited for the slow probe")
	}
	select {
	case err := <-stuck:
		t.Fatalf("a call needing the slow device finished before its probe: %v", err)
	default:
	}
	close(h.release)
	for range 2 {
		if err := <-stuck; err != nil {
			t.Fatal(err)
		}
	}
	if !isMounted(t, e.pv("slow")) {
		t.Fatal("the slow device was not prepared once released")
	}
}

// TestWritesRefuseOtherMedia: every host write checks, holding the device open, that the
// media behind the name is still the one identified; a loop device re-attached to another file
// under the same name is not written.
func TestWritesRefuseOtherMedia(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	dev := newLoop(t, e.root, 512*mib)
	identified, err := e.host.DiskByPath(dev)
	if err != nil {
		t.Fatal(err)
	}
	if identified.DiskSeq == 0 {
		t.Fatalf("the kernel gives %s no disk sequence number: Linux 5.15 or later is needed", dev)
	}
	other := filepath.Join(e.root, "other.img")
	if err := os.WriteFile(other, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(other, 512*mib); err != nil {
		t.Fatal(err)
	}
	detach(t, dev)
	attachAt(t, dev, other)
	before := fileHash(t, other)
	writes := map[string]func() error{
		"mkfs.xfs": func() error {
			return e.host.MkfsXFS(ctx, identified, dev, server.XFSLabel, "6b1e2c1a-4f55-4c1e-9a51-2f0d4f7d9a11")
		},
		"wipe": func() error { return e.host.Wipe(ctx, identified, nil, host.WipeZero) },
		"split": func() error {
			_, _, err := e.host.PartitionSplit(ctx, identified, 50, "6b1e2c1a-4f55-4c1e-9a51-2f0d4f7d9a12")
			return err
		},
		"mount": func() error {
			return e.host.MountXFS(identified, dev, e.opts.AgentRoot, filepath.Join(e.opts.AgentRoot, "m"))
		},
	}
	for name, write := range writes {
		if err := write(); !errors.Is(err, host.ErrMediaChanged) {
			t.Errorf("%s: %v, want %v", name, err, host.ErrMediaChanged)
		}
	}
	if fileHash(t, other) != before {
		t.Fatal("the other media was written")
	}
}
