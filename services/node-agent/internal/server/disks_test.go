package server_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	nodeagentv1 "github.com/opsuite/suite/proto/nodeagent/v1"
	"github.com/opsuite/suite/services/node-agent/agenttest"
	"github.com/opsuite/suite/services/node-agent/internal/server"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

func prepareReq(pv string, pct uint32, paths ...string) *nodeagentv1.PrepareDisksRequest {
	return &nodeagentv1.PrepareDisksRequest{
		Selector: &nodeagentv1.DeviceSelector{Paths: paths}, XfsPercent: pct, PvPath: pv, Namespace: testNamespace,
	}
}

func TestPrepareWholeDeviceIsIdempotent(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	dev := newLoop(t, e.root, 512*mib)

	resp, err := e.srv.PrepareDisks(ctx, prepareReq(e.pv("vol-a"), 0, dev))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Disks) != 1 {
		t.Fatalf("got %d disks, want 1", len(resp.Disks))
	}
	d := resp.Disks[0]
	if d.Device != dev || d.XfsDevice != dev || d.PvPath != e.pv("vol-a") || d.State != "ready" || d.RawDevice != "" {
		t.Fatalf("unexpected result %v", d)
	}
	sig := agenttest.Blkid(t, dev)
	if sig["TYPE"] != "xfs" || sig["LABEL"] != server.XFSLabel || sig["UUID"] != d.FilesystemUuid {
		t.Fatalf("blkid -p %s = %v, want xfs labelled %s with UUID %s", dev, sig, server.XFSLabel, d.FilesystemUuid)
	}
	if !isMounted(t, d.MountPath) || !isMounted(t, d.PvPath) {
		t.Fatalf("want %s and %s mounted", d.MountPath, d.PvPath)
	}
	if !strings.HasPrefix(d.MountPath, e.opts.AgentRoot+"/") {
		t.Fatalf("mount path %s is not under the agent root", d.MountPath)
	}
	// The bind mount and the agent's mount are the same filesystem.
	if err := os.WriteFile(filepath.Join(d.PvPath, "probe"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(d.MountPath, "probe")); err != nil {
		t.Fatal(err)
	}

	again, err := e.srv.PrepareDisks(ctx, prepareReq(e.pv("vol-a"), 0, dev))
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(resp, again) {
		t.Fatalf("repeat differs:\n%v\n%v", resp, again)
	}
	if got := agenttest.Blkid(t, dev)["UUID"]; got != d.FilesystemUuid {
		t.Fatalf("repeat re-made the filesystem: UUID %s, want %s", got, d.FilesystemUuid)
	}
	if _, err := os.Stat(filepath.Join(d.PvPath, "probe")); err != nil {
		t.Fatalf("repeat lost data: %v", err)
	}
	// Only one mount each, not one per call.
	n := 0
	for _, m := range agenttest.MountPoints(t) {
		if m == d.PvPath {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%s mounted %d times, want 1", d.PvPath, n)
	}

	// Another pv_path for the same device is refused; so is other settings for the same pv_path.
	_, err = e.srv.PrepareDisks(ctx, prepareReq(e.pv("vol-b"), 0, dev))
	wantCode(t, err, codes.FailedPrecondition, dev, "already prepared")
	_, err = e.srv.PrepareDisks(ctx, prepareReq(e.pv("vol-a"), 50, dev))
	wantCode(t, err, codes.FailedPrecondition, "other settings")

	rep, err := e.srv.GetNodeReport(ctx, &nodeagentv1.GetNodeReportRequest{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, bd := range rep.Devices {
		if bd.Path == dev {
			found = true
			if !bd.OwnedByAgent || bd.Filesystem != "xfs" || bd.Label != server.XFSLabel || bd.Eligible {
				t.Fatalf("report of %s: %v", dev, bd)
			}
		}
	}
	if !found {
		t.Fatalf("report lacks %s", dev)
	}
	if len(rep.Prepared) != 1 || !proto.Equal(rep.Prepared[0], d) {
		t.Fatalf("report prepared = %v, want %v", rep.Prepared, d)
	}
}

func TestRestartKeepsStateAndRestoresMounts(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	dev := newLoop(t, e.root, 512*mib)
	resp, err := e.srv.PrepareDisks(ctx, prepareReq(e.pv("vol"), 0, dev))
	if err != nil {
		t.Fatal(err)
	}
	d := resp.Disks[0]
	if err := os.WriteFile(filepath.Join(d.PvPath, "data"), []byte("kept"), 0o600); err != nil {
		t.Fatal(err)
	}

	// A reboot: every mount gone, the agent starts again from its state file.
	agenttest.UnmountUnder(t, e.root)
	if isMounted(t, d.PvPath) {
		t.Fatal("still mounted after the simulated reboot")
	}
	srv := e.newServer()
	if err := srv.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	if !isMounted(t, d.MountPath) || !isMounted(t, d.PvPath) {
		t.Fatal("mounts not restored")
	}
	if b, err := os.ReadFile(filepath.Join(d.PvPath, "data")); err != nil || string(b) != "kept" {
		t.Fatalf("data after restart: %q, %v", b, err)
	}
	again, err := srv.PrepareDisks(ctx, prepareReq(e.pv("vol"), 0, dev))
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(again.Disks[0], d) {
		t.Fatalf("after restart the repeat differs:\n%v\n%v", again.Disks[0], d)
	}

	// A restart without a reboot: mounts still there, Restore changes nothing.
	if err := e.newServer().Restore(ctx); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, m := range agenttest.MountPoints(t) {
		if m == d.PvPath {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%s mounted %d times after a second restore, want 1", d.PvPath, n)
	}
}

func TestSplitTwentyEighty(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	// 20 % must clear XFS's 300 MiB minimum.
	dev := newLoop(t, e.root, 2048*mib)
	resp, err := e.srv.PrepareDisks(ctx, prepareReq(e.pv("vlog"), 20, dev))
	if err != nil {
		t.Fatal(err)
	}
	d := resp.Disks[0]
	if d.XfsDevice != dev+"p1" || d.RawDevice != dev+"p2" || d.XfsPercent != 20 {
		t.Fatalf("unexpected split %v", d)
	}
	total := float64(2048 * mib)
	if f := float64(d.XfsSizeBytes) / total; f < 0.19 || f > 0.201 {
		t.Fatalf("XFS partition is %.3f of the device, want 0.20", f)
	}
	if f := float64(d.RawSizeBytes) / total; f < 0.79 || f > 0.81 {
		t.Fatalf("raw partition is %.3f of the device, want 0.80", f)
	}
	if pt := agenttest.Blkid(t, dev)["PTTYPE"]; pt != "gpt" {
		t.Fatalf("PTTYPE %q, want gpt", pt)
	}
	if sig := agenttest.Blkid(t, d.XfsDevice); sig["TYPE"] != "xfs" || sig["UUID"] != d.FilesystemUuid {
		t.Fatalf("blkid -p %s = %v", d.XfsDevice, sig)
	}
	if sig := agenttest.Blkid(t, d.RawDevice); sig["TYPE"] != "" {
		t.Fatalf("raw partition carries %v", sig)
	} else if want := strings.ToLower(sig["PART_ENTRY_UUID"]); want == "" || d.RawPartitionUuid != want {
		t.Fatalf("raw_partition_uuid %q, blkid -p %s says PART_ENTRY_UUID %q", d.RawPartitionUuid, d.RawDevice, want)
	}
	if !isMounted(t, d.PvPath) {
		t.Fatal("pv path not mounted")
	}
	again, err := e.srv.PrepareDisks(ctx, prepareReq(e.pv("vlog"), 20, dev))
	if err != nil || !proto.Equal(again, resp) {
		t.Fatalf("repeat: %v, %v", again, err)
	}
	rep, err := e.srv.GetNodeReport(ctx, &nodeagentv1.GetNodeReportRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, bd := range rep.Devices {
		if bd.Path == dev {
			if bd.PartitionTable != "gpt" || len(bd.Partitions) != 2 || bd.Partitions[0].Filesystem != "xfs" ||
				len(bd.Partitions[0].Mountpoints) == 0 || bd.Partitions[1].Filesystem != "" {
				t.Fatalf("report of %s: %v", dev, bd)
			}
		}
	}

	// Restart after a reboot restores the split device too.
	agenttest.UnmountUnder(t, e.root)
	if err := e.newServer().Restore(ctx); err != nil {
		t.Fatal(err)
	}
	if !isMounted(t, d.PvPath) {
		t.Fatal("split device not restored")
	}

	// A state written before the agent kept the raw partition's GUID: the next PrepareDisks,
	// or the next report, reads it back from the table and the state keeps it.
	for _, via := range []string{"PrepareDisks", "GetNodeReport"} {
		raw, err := os.ReadFile(e.opts.StateFile)
		if err != nil {
			t.Fatal(err)
		}
		stripped := regexp.MustCompile(`\s*"rawPartUUID": *"[^"]*",`).ReplaceAllString(string(raw), "")
		if stripped == string(raw) {
			t.Fatalf("the state file does not hold rawPartUUID %s:\n%s", d.RawPartitionUuid, raw)
		}
		if err := os.WriteFile(e.opts.StateFile, []byte(stripped), 0o600); err != nil {
			t.Fatal(err)
		}
		srv := e.newServer()
		var got string
		if via == "PrepareDisks" {
			again, err := srv.PrepareDisks(ctx, prepareReq(e.pv("vlog"), 20, dev))
			if err != nil {
				t.Fatal(err)
			}
			got = again.Disks[0].RawPartitionUuid
		} else {
			rep, err := srv.GetNodeReport(ctx, &nodeagentv1.GetNodeReportRequest{})
			if err != nil || len(rep.Prepared) != 1 {
				t.Fatalf("report: %v, %v", rep.GetPrepared(), err)
			}
			got = rep.Prepared[0].RawPartitionUuid
		}
		if got != d.RawPartitionUuid {
			t.Fatalf("%s from a state without the GUID: %q, want %q", via, got, d.RawPartitionUuid)
		}
		if raw, err := os.ReadFile(e.opts.StateFile); err != nil || !strings.Contains(string(raw), d.RawPartitionUuid) {
			t.Fatalf("after %s the state did not keep the GUID read back: %s, %v", via, raw, err)
		}
	}
}

func TestSplitBelowXFSMinimumIsRefused(t *testing.T) {
	e := newEnv(t)
	dev := newLoop(t, e.root, 512*mib)
	_, err := e.srv.PrepareDisks(context.Background(), prepareReq(e.pv("v"), 20, dev))
	wantCode(t, err, codes.FailedPrecondition, dev, "300 MiB")
	if sig := agenttest.Blkid(t, dev); len(sig) != 0 {
		t.Fatalf("refused device was written: %v", sig)
	}
}

func TestRelease(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	dev := newLoop(t, e.root, 512*mib)
	resp, err := e.srv.PrepareDisks(ctx, prepareReq(e.pv("vol"), 0, dev))
	if err != nil {
		t.Fatal(err)
	}
	d := resp.Disks[0]
	rel, err := e.srv.ReleaseDisks(ctx, &nodeagentv1.ReleaseDisksRequest{PvPath: e.pv("vol")})
	if err != nil {
		t.Fatal(err)
	}
	if len(rel.Released) != 1 || rel.Released[0].Device != dev {
		t.Fatalf("released %v", rel.Released)
	}
	if isMounted(t, d.PvPath) || isMounted(t, d.MountPath) {
		t.Fatal("still mounted after release")
	}
	// Without wipe the filesystem stays, and the agent, having forgotten it, treats it as
	// someone else's.
	if sig := agenttest.Blkid(t, dev); sig["TYPE"] != "xfs" {
		t.Fatalf("release without wipe changed the device: %v", sig)
	}
	rep, err := e.srv.GetNodeReport(ctx, &nodeagentv1.GetNodeReportRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Prepared) != 0 {
		t.Fatalf("still remembered: %v", rep.Prepared)
	}
	again, err := e.srv.ReleaseDisks(ctx, &nodeagentv1.ReleaseDisksRequest{Devices: []string{dev}})
	if err != nil || len(again.Released) != 0 {
		t.Fatalf("repeat release: %v, %v", again, err)
	}
	_, err = e.srv.PrepareDisks(ctx, prepareReq(e.pv("vol"), 0, dev))
	wantCode(t, err, codes.FailedPrecondition, dev, "xfs signature the agent did not create")
	// State survives a restart as released.
	if rep, err := e.newServer().GetNodeReport(ctx, &nodeagentv1.GetNodeReportRequest{}); err != nil || len(rep.Prepared) != 0 {
		t.Fatalf("after restart: %v, %v", rep.GetPrepared(), err)
	}
}

func TestReleaseWithWipe(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	dev := newLoop(t, e.root, 2048*mib)
	if _, err := e.srv.PrepareDisks(ctx, prepareReq(e.pv("vlog"), 20, dev)); err != nil {
		t.Fatal(err)
	}
	rel, err := e.srv.ReleaseDisks(ctx, &nodeagentv1.ReleaseDisksRequest{Devices: []string{dev}, Wipe: true})
	if err != nil || len(rel.Released) != 1 {
		t.Fatalf("release: %v, %v", rel, err)
	}
	if sig := agenttest.Blkid(t, dev); len(sig) != 0 {
		t.Fatalf("after wipe blkid -p %s = %v, want nothing", dev, sig)
	}
	if _, err := os.Stat(dev + "p1"); err == nil {
		t.Fatal("partition still known to the kernel after wipe")
	}
	// A wiped device is blank again and can be prepared anew.
	if _, err := e.srv.PrepareDisks(ctx, prepareReq(e.pv("again"), 0, dev)); err != nil {
		t.Fatal(err)
	}
}

func TestReleaseRefusesDeviceStillInUse(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	dev := newLoop(t, e.root, 512*mib)
	resp, err := e.srv.PrepareDisks(ctx, prepareReq(e.pv("vol"), 0, dev))
	if err != nil {
		t.Fatal(err)
	}
	// A pod's volume is a further bind mount of the PV path.
	podVol := filepath.Join(e.root, "pod-volume")
	if err := os.MkdirAll(podVol, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(resp.Disks[0].PvPath, podVol, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	_, err = e.srv.ReleaseDisks(ctx, &nodeagentv1.ReleaseDisksRequest{PvPath: e.pv("vol"), Wipe: true})
	wantCode(t, err, codes.FailedPrecondition, dev, "still in use")
	if !isMounted(t, resp.Disks[0].PvPath) {
		t.Fatal("mounts not put back after a refused release")
	}
	if sig := agenttest.Blkid(t, dev); sig["TYPE"] != "xfs" {
		t.Fatalf("refused release changed the device: %v", sig)
	}
	if err := unix.Unmount(podVol, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := e.srv.ReleaseDisks(ctx, &nodeagentv1.ReleaseDisksRequest{PvPath: e.pv("vol"), Wipe: true}); err != nil {
		t.Fatal(err)
	}
}

func TestRefusals(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	cases := []struct {
		name   string
		setup  func(t *testing.T, dev string)
		reason string
	}{
		{"foreign ext4", func(t *testing.T, dev string) { mustRun(t, "mkfs.ext4", "-q", "-F", dev) }, "ext4 signature the agent did not create"},
		{"foreign xfs", func(t *testing.T, dev string) { mustRun(t, "mkfs.xfs", "-q", "-f", "-L", "someone", dev) }, "xfs signature the agent did not create"},
		{"foreign xfs with the agent's label", func(t *testing.T, dev string) {
			mustRun(t, "mkfs.xfs", "-q", "-f", "-L", server.XFSLabel, dev)
		}, "xfs signature the agent did not create"},
		{"partitioned", func(t *testing.T, dev string) {
			cmd := command(t, "sfdisk", "--quiet", dev)
			cmd.Stdin = strings.NewReader("label: gpt\n,100MiB\n")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("sfdisk: %v: %s", err, out)
			}
		}, "partition table (gpt)"},
		{"mounted", func(t *testing.T, dev string) {
			mustRun(t, "mkfs.ext4", "-q", "-F", dev)
			dir := filepath.Join(e.root, "elsewhere-"+filepath.Base(dev))
			if err := os.MkdirAll(dir, 0o750); err != nil {
				t.Fatal(err)
			}
			if err := unix.Mount(dev, dir, "ext4", 0, ""); err != nil {
				t.Fatal(err)
			}
		}, "is mounted"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dev := newLoop(t, e.root, 512*mib)
			c.setup(t, dev)
			before := agenttest.Blkid(t, dev)
			_, err := e.srv.PrepareDisks(ctx, prepareReq(e.pv("v"), 0, dev))
			wantCode(t, err, codes.FailedPrecondition, "device "+dev, c.reason)
			if after := agenttest.Blkid(t, dev); !equalMaps(before, after) {
				t.Fatalf("refused device changed: %v -> %v", before, after)
			}
			if _, err := os.Stat(e.pv("v")); err == nil {
				t.Fatal("the refused request created the PV path")
			}
		})
	}

	t.Run("boot disk", func(t *testing.T) {
		boot, err := e.host.BootDisks()
		if err != nil || len(boot) == 0 {
			t.Fatalf("no boot disk found (%v): the test needs the root filesystem on a block device", err)
		}
		for name := range boot {
			dev := "/dev/" + name
			_, err := e.srv.PrepareDisks(ctx, prepareReq(e.pv("v"), 0, dev))
			wantCode(t, err, codes.FailedPrecondition, "device "+dev, "is the boot disk")
		}
	})

	t.Run("loop device without the test flag", func(t *testing.T) {
		strict := newEnv(t, func(o *server.Options) { o.AllowLoopDevices = false })
		dev := newLoop(t, strict.root, 512*mib)
		_, err := strict.srv.PrepareDisks(ctx, prepareReq(strict.pv("v"), 0, dev))
		wantCode(t, err, codes.FailedPrecondition, "device "+dev, "loop device")
	})

	t.Run("not a device", func(t *testing.T) {
		_, err := e.srv.PrepareDisks(ctx, prepareReq(e.pv("v"), 0, "/dev/null"))
		wantCode(t, err, codes.NotFound, "/dev/null")
	})
}

func TestFilterSelectionAndConcurrency(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	// An unusual size keeps the selector away from any other loop device on the machine.
	const size = 613 * mib
	a, b := newLoop(t, e.root, size), newLoop(t, e.root, size)
	sel := &nodeagentv1.DeviceSelector{MinSizeBytes: size, MaxSizeBytes: size, Count: 2}
	req := &nodeagentv1.PrepareDisksRequest{Selector: sel, PvPath: e.pv("pair"), Namespace: testNamespace}

	// The same request racing itself: one does the work, both get the same answer.
	var wg sync.WaitGroup
	resps := make([]*nodeagentv1.PrepareDisksResponse, 4)
	errs := make([]error, 4)
	for i := range resps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resps[i], errs[i] = e.srv.PrepareDisks(ctx, req)
		}()
	}
	wg.Wait()
	for i := range resps {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if !proto.Equal(resps[i], resps[0]) {
			t.Fatalf("concurrent results differ:\n%v\n%v", resps[i], resps[0])
		}
	}
	got := resps[0].Disks
	if len(got) != 2 {
		t.Fatalf("got %d disks", len(got))
	}
	devs := map[string]bool{got[0].Device: true, got[1].Device: true}
	if !devs[a] || !devs[b] {
		t.Fatalf("selected %v, want %s and %s", devs, a, b)
	}
	for _, d := range got {
		if d.PvPath != filepath.Join(e.pv("pair"), filepath.Base(d.Device)) || !isMounted(t, d.PvPath) {
			t.Fatalf("unexpected %v", d)
		}
	}
	// No eligible device is left for a third.
	_, err := e.srv.PrepareDisks(ctx, &nodeagentv1.PrepareDisksRequest{
		Selector: &nodeagentv1.DeviceSelector{MinSizeBytes: size, MaxSizeBytes: size, Count: 1}, PvPath: e.pv("third"), Namespace: testNamespace,
	})
	wantCode(t, err, codes.FailedPrecondition, "0 eligible devices")
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestDeviceLinks prepares and releases through a /dev link (as /dev/disk/by-id gives),
// made on a tmpfs over /dev/shm in the private namespace so the host's /dev is untouched.
func TestDeviceLinks(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	dev := newLoop(t, e.root, 512*mib)
	if err := unix.Mount("tmpfs", "/dev/shm", "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount("/dev/shm", unix.MNT_DETACH) })
	link := "/dev/shm/nvme-Samsung_SSD_980_S64DNF0R123456"
	if err := os.Symlink(dev, link); err != nil {
		t.Fatal(err)
	}
	first, err := e.srv.PrepareDisks(ctx, prepareReq(e.pv("vol"), 0, link))
	if err != nil {
		t.Fatal(err)
	}
	if first.Disks[0].Device != dev {
		t.Fatalf("recorded %s, want the kernel name %s", first.Disks[0].Device, dev)
	}
	for _, p := range []string{link, dev} {
		again, err := e.srv.PrepareDisks(ctx, prepareReq(e.pv("vol"), 0, p))
		if err != nil || !proto.Equal(again, first) {
			t.Fatalf("repeat through %s: %v, %v", p, again, err)
		}
	}
	rel, err := e.srv.ReleaseDisks(ctx, &nodeagentv1.ReleaseDisksRequest{Devices: []string{link}})
	if err != nil || len(rel.Released) != 1 {
		t.Fatalf("release through the link: %v, %v", rel, err)
	}
}
