package server_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	nodeagentv1 "github.com/opsuite/suite/proto/nodeagent/v1"
	"github.com/opsuite/suite/services/node-agent/agenttest"
	"google.golang.org/grpc/codes"
)

// detach detaches a loop device, as a disk pulled out or a reboot does.
func detach(t *testing.T, dev string) {
	t.Helper()
	if out, err := exec.Command("losetup", "--detach", dev).CombinedOutput(); err != nil {
		t.Fatalf("detaching %s: %v: %s", dev, err, out)
	}
}

// attachAt attaches file to the loop device of the given name. Another process attaching a
// loop device at the same moment may take the name first; the test then fails saying so.
func attachAt(t *testing.T, dev, file string) {
	t.Helper()
	if out, err := exec.Command("losetup", "--partscan", dev, file).CombinedOutput(); err != nil {
		t.Fatalf("attaching %s to %s (taken meanwhile by another loop user?): %v: %s", file, dev, err, out)
	}
}

// swapAfterReboot is a reboot after which two loop devices come back under each other's names:
// the test's mounts are gone, a's file is attached as b and b's as a.
func swapAfterReboot(t *testing.T, e *testEnv, a, b string) {
	t.Helper()
	fileA, fileB := backingFile(t, a), backingFile(t, b)
	agenttest.UnmountUnder(t, e.root)
	detach(t, a)
	detach(t, b)
	attachAt(t, a, fileB)
	attachAt(t, b, fileA)
}

// mountedFile names the file behind whatever is mounted at target: the loop device's backing
// file, through the partition's disk for a split device.
func mountedFile(t *testing.T, e *testEnv, target string) string {
	t.Helper()
	m, ok, err := e.host.MountedAt(target)
	if err != nil || !ok {
		t.Fatalf("%s is not mounted (%v)", target, err)
	}
	sys, err := filepath.EvalSymlinks(filepath.Join("/sys/dev/block", m.MajMin))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(sys, "partition")); err == nil {
		sys = filepath.Dir(sys)
	}
	return backingFile(t, "/dev/"+filepath.Base(sys))
}

func readData(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "data"))
	if err != nil {
		t.Fatalf("reading %s: %v", dir, err)
	}
	return string(b)
}

// TestDevicesFoundByIdentityAfterNamesSwap: two prepared loop devices come back after a
// reboot under each other's names; the restarted agent finds each by what it wrote there.
func TestDevicesFoundByIdentityAfterNamesSwap(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	a, b := newLoop(t, e.root, 512*mib), newLoop(t, e.root, 2048*mib)
	fileA, fileB := backingFile(t, a), backingFile(t, b)
	if _, err := e.srv.PrepareDisks(ctx, prepareReq(e.pv("vol-a"), 0, a)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.srv.PrepareDisks(ctx, prepareReq(e.pv("vol-b"), 20, b)); err != nil {
		t.Fatal(err)
	}
	for pv, data := range map[string]string{e.pv("vol-a"): "A", e.pv("vol-b"): "B"} {
		if err := os.WriteFile(filepath.Join(pv, "data"), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	swapAfterReboot(t, e, a, b)

	srv := e.newServer()
	if err := srv.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	if got := mountedFile(t, e, e.pv("vol-a")); got != fileA {
		t.Fatalf("vol-a is backed by %s, want %s", got, fileA)
	}
	if got := mountedFile(t, e, e.pv("vol-b")); got != fileB {
		t.Fatalf("vol-b is backed by %s, want %s", got, fileB)
	}
	if readData(t, e.pv("vol-a")) != "A" || readData(t, e.pv("vol-b")) != "B" {
		t.Fatal("the PV paths show each other's data")
	}
	rep, err := srv.GetNodeReport(ctx, &nodeagentv1.GetNodeReportRequest{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{e.pv("vol-a"): b, e.pv("vol-b"): a}
	for _, p := range rep.Prepared {
		if p.State != "ready" || p.Device != want[p.PvPath] {
			t.Fatalf("report %v, want %s on %s and ready", p, p.PvPath, want[p.PvPath])
		}
		if p.PvPath == e.pv("vol-b") && !strings.EqualFold(p.DiskGuid, agenttest.Blkid(t, a)["PTUUID"]) {
			t.Fatalf("disk GUID %q reported, %q on the disk", p.DiskGuid, agenttest.Blkid(t, a)["PTUUID"])
		}
	}
	if len(rep.Prepared) != 2 {
		t.Fatalf("prepared %v", rep.Prepared)
	}
	// A repeat is a no-op under the new name, and a restart after it keeps the new names.
	again, err := srv.PrepareDisks(ctx, prepareReq(e.pv("vol-b"), 20, a))
	if err != nil || again.Disks[0].XfsDevice != a+"p1" {
		t.Fatalf("repeat under the new name: %v, %v", again, err)
	}
	state, err := os.ReadFile(e.opts.StateFile)
	if err != nil || !strings.Contains(string(state), `"version": 2`) {
		t.Fatalf("state %s, %v", state, err)
	}

	// Release with wipe writes to the device that carries vol-a, now named b, and nothing else.
	if _, err := e.newServer().ReleaseDisks(ctx, &nodeagentv1.ReleaseDisksRequest{PvPath: e.pv("vol-a"), Wipe: true}); err != nil {
		t.Fatal(err)
	}
	if sig := agenttest.Blkid(t, b); len(sig) != 0 {
		t.Fatalf("vol-a's device %s still carries %v", b, sig)
	}
	if sig := agenttest.Blkid(t, a); sig["PTTYPE"] != "gpt" || agenttest.Blkid(t, a+"p1")["TYPE"] != "xfs" {
		t.Fatalf("vol-b's device %s was touched: %v", a, sig)
	}
}

// TestBlankDeviceUnderAnOldNameIsNeverTouched: the prepared disk is gone and a blank one now
// has its name. Nothing restores onto it, prepares it for the old record, or wipes it.
func TestBlankDeviceUnderAnOldNameIsNeverTouched(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	dev := newLoop(t, e.root, 512*mib)
	prepared := backingFile(t, dev)
	if _, err := e.srv.PrepareDisks(ctx, prepareReq(e.pv("vol"), 0, dev)); err != nil {
		t.Fatal(err)
	}
	agenttest.UnmountUnder(t, e.root)
	detach(t, dev)
	preparedHash := fileHash(t, prepared)

	// A blank disk (no signature, but bytes of its own) takes the name.
	blank := filepath.Join(e.root, "blank.img")
	if err := os.WriteFile(blank, []byte(strings.Repeat("not a signature ", 1<<16)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(blank, 512*mib); err != nil {
		t.Fatal(err)
	}
	attachAt(t, dev, blank)
	blankHash := fileHash(t, blank)
	untouched := func(step string) {
		t.Helper()
		if fileHash(t, blank) != blankHash {
			t.Fatalf("%s wrote to the blank device now named %s", step, dev)
		}
		if isMounted(t, e.pv("vol")) {
			t.Fatalf("%s mounted something at the PV path", step)
		}
	}

	srv := e.newServer()
	err := srv.Restore(ctx)
	wantCode(t, err, codes.FailedPrecondition, "no device on this node carries the agent's filesystem")
	untouched("restore")

	rep, err := srv.GetNodeReport(ctx, &nodeagentv1.GetNodeReportRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Prepared) != 1 || rep.Prepared[0].State != "missing" {
		t.Fatalf("prepared %v, want the record missing", rep.Prepared)
	}
	for _, d := range rep.Devices {
		if d.Path == dev && (d.OwnedByAgent || !d.Eligible) {
			t.Fatalf("the blank device is reported %v", d)
		}
	}

	_, err = srv.PrepareDisks(ctx, prepareReq(e.pv("vol"), 0, dev))
	wantCode(t, err, codes.FailedPrecondition, "no device on this node carries the agent's filesystem")
	untouched("a repeated prepare")

	for _, req := range []*nodeagentv1.ReleaseDisksRequest{
		{PvPath: e.pv("vol"), Wipe: true},
		{Devices: []string{dev}, Wipe: true},
	} {
		_, err = srv.ReleaseDisks(ctx, req)
		wantCode(t, err, codes.FailedPrecondition, "no device on this node carries", "nothing was wiped", "release without wipe")
		untouched("a release with wipe")
	}
	rel, err := srv.ReleaseDisks(ctx, &nodeagentv1.ReleaseDisksRequest{PvPath: e.pv("vol")})
	if err != nil || len(rel.Released) != 1 {
		t.Fatalf("release without wipe: %v, %v", rel, err)
	}
	untouched("a release without wipe")
	if fileHash(t, prepared) != preparedHash {
		t.Fatal("the detached device's file was written")
	}
	// Forgotten, the blank device is free for a new claim.
	if _, err := srv.PrepareDisks(ctx, prepareReq(e.pv("new"), 0, dev)); err != nil {
		t.Fatal(err)
	}
}

// TestReleaseByNameMeansTheDeviceNowThere: after the names swapped and before anything
// re-resolved the records, releasing a device by name releases the record whose identity that
// device carries, not the record last seen under the name.
func TestReleaseByNameMeansTheDeviceNowThere(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	a, b := newLoop(t, e.root, 512*mib), newLoop(t, e.root, 512*mib)
	ra, err := e.srv.PrepareDisks(ctx, prepareReq(e.pv("vol-a"), 0, a))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.srv.PrepareDisks(ctx, prepareReq(e.pv("vol-b"), 0, b)); err != nil {
		t.Fatal(err)
	}
	swapAfterReboot(t, e, a, b)

	rel, err := e.newServer().ReleaseDisks(ctx, &nodeagentv1.ReleaseDisksRequest{Devices: []string{a}, Wipe: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(rel.Released) != 1 || rel.Released[0].PvPath != e.pv("vol-b") || rel.Released[0].Device != a {
		t.Fatalf("released %v, want only vol-b's record, on %s", rel.Released, a)
	}
	if sig := agenttest.Blkid(t, a); len(sig) != 0 {
		t.Fatalf("%s (vol-b's disk) not wiped: %v", a, sig)
	}
	if sig := agenttest.Blkid(t, b); sig["UUID"] != ra.Disks[0].FilesystemUuid {
		t.Fatalf("%s (vol-a's disk) was touched: %v, want UUID %s", b, sig, ra.Disks[0].FilesystemUuid)
	}
}
