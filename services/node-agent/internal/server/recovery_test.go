package server_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	nodeagentv1 "github.com/opsuite/suite/proto/nodeagent/v1"
	"github.com/opsuite/suite/services/node-agent/agenttest"
	"github.com/opsuite/suite/services/node-agent/internal/server"
	"google.golang.org/grpc/codes"
)

// writeState writes a state file as an agent interrupted mid-preparation leaves it.
func writeState(t *testing.T, e *testEnv, version int, records ...map[string]any) {
	t.Helper()
	b, err := json.Marshal(map[string]any{"version": version, "records": records})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(e.opts.StateFile), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(e.opts.StateFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

const interruptedUUID = "6b1e2c1a-4f55-4c1e-9a51-2f0d4f7d9a10"

// interrupted is a version 1 record of a preparation that stopped before it was ready.
func interrupted(e *testEnv, dev string) map[string]any {
	return map[string]any{
		"device": dev, "xfsDevice": dev, "fsUUID": interruptedUUID,
		"mountPath": filepath.Join(e.opts.AgentRoot, "mounts", interruptedUUID),
		"pvPath":    e.pv("vol"), "claim": e.pv("vol"), "phase": "preparing",
	}
}

// interruptedV2 is the same record as version 2 writes it: reserved on dev's media in this boot.
func interruptedV2(t *testing.T, e *testEnv, dev string) map[string]any {
	return map[string]any{
		"deviceHint": dev, "xfsDeviceHint": dev, "fsUUID": interruptedUUID,
		"bootID": readFile(t, "/proc/sys/kernel/random/boot_id"), "diskSeq": diskSeq(t, dev),
		"mountPath": filepath.Join(e.opts.AgentRoot, "mounts", interruptedUUID),
		"pvPath":    e.pv("vol"), "claim": e.pv("vol"), "phase": "preparing",
	}
}

func diskSeq(t *testing.T, dev string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(readFile(t, filepath.Join("/sys/block", filepath.Base(dev), "diskseq")), 10, 64)
	if err != nil || n == 0 {
		t.Fatalf("the kernel gives %s no disk sequence number (%v): Linux 5.15 or later is needed", dev, err)
	}
	return n
}

func TestInterruptedPreparationResumesOnItsOwnMedia(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	dev := newLoop(t, e.root, 512*mib)
	writeState(t, e, 2, interruptedV2(t, e, dev)) // stopped before writing anything
	srv := e.newServer()
	if err := srv.Restore(ctx); err != nil { // a preparing record is left for the retry
		t.Fatal(err)
	}
	resp, err := srv.PrepareDisks(ctx, prepareReq(e.pv("vol"), 0, dev))
	if err != nil {
		t.Fatal(err)
	}
	if d := resp.Disks[0]; d.State != "ready" || d.FilesystemUuid != interruptedUUID || !isMounted(t, d.PvPath) {
		t.Fatalf("unexpected %v", d)
	}
	if got := agenttest.Blkid(t, dev)["UUID"]; got != interruptedUUID {
		t.Fatalf("UUID %s, want the reserved %s", got, interruptedUUID)
	}
}

func TestInterruptedPreparationResumesWhereItsFilesystemIs(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	dev := newLoop(t, e.root, 512*mib)
	// Stopped after mkfs, before mounting: the device carries the UUID recorded beforehand.
	mustRun(t, "mkfs.xfs", "-q", "-f", "-L", server.XFSLabel, "-m", "uuid="+interruptedUUID, dev)
	writeState(t, e, 1, interrupted(e, dev)) // a version 1 file
	resp, err := e.newServer().PrepareDisks(ctx, prepareReq(e.pv("vol"), 0, dev))
	if err != nil {
		t.Fatal(err)
	}
	if d := resp.Disks[0]; d.State != "ready" || d.Device != dev || d.FilesystemUuid != interruptedUUID || !isMounted(t, d.PvPath) {
		t.Fatalf("unexpected %v", d)
	}
}

func TestInterruptedPreparationNeverResumesOnABlankDeviceWithItsName(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	dev := newLoop(t, e.root, 512*mib)
	before := fileHash(t, backingFile(t, dev))
	for name, rec := range map[string]map[string]any{
		// Version 1 recorded only the name: nothing identifies the blank disk now there.
		"v1": interrupted(e, dev),
		// Reserved on other media under the same name (a disk replaced, a loop re-attached).
		"v2 other media": func() map[string]any {
			r := interruptedV2(t, e, dev)
			r["diskSeq"] = diskSeq(t, dev) - 1
			return r
		}(),
		"v2 other boot": func() map[string]any {
			r := interruptedV2(t, e, dev)
			r["bootID"] = "00000000-0000-4000-8000-000000000000"
			return r
		}(),
	} {
		version := 2
		if name == "v1" {
			version = 1
		}
		writeState(t, e, version, rec)
		_, err := e.newServer().PrepareDisks(ctx, prepareReq(e.pv("vol"), 0, dev))
		wantCode(t, err, codes.FailedPrecondition, "no device on this node is the one reserved")
		if after := fileHash(t, backingFile(t, dev)); after != before {
			t.Fatalf("%s: the blank device was written", name)
		}
	}
}

func TestInterruptedPreparationOnAChangedDeviceIsRefused(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	dev := newLoop(t, e.root, 512*mib)
	// After a reboot the name now belongs to a disk with someone's data.
	mustRun(t, "mkfs.ext4", "-q", "-F", dev)
	writeState(t, e, 1, interrupted(e, dev))
	_, err := e.newServer().PrepareDisks(ctx, prepareReq(e.pv("vol"), 0, dev))
	wantCode(t, err, codes.FailedPrecondition, "device "+dev, "no longer carries what the agent wrote there")
	if got := agenttest.Blkid(t, dev)["TYPE"]; got != "ext4" {
		t.Fatalf("the other disk was touched: TYPE %q", got)
	}
}

func TestRestoreNeverReformatsAReplacedDevice(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	dev := newLoop(t, e.root, 512*mib)
	resp, err := e.srv.PrepareDisks(ctx, prepareReq(e.pv("vol"), 0, dev))
	if err != nil {
		t.Fatal(err)
	}
	// Reboot, and the device name now points at another filesystem.
	agenttest.UnmountUnder(t, e.root)
	mustRun(t, "mkfs.xfs", "-q", "-f", "-L", "someone", dev)
	srv := e.newServer()
	if err := srv.Restore(ctx); err == nil {
		t.Fatal("restore mounted a filesystem that is not the agent's")
	}
	if isMounted(t, resp.Disks[0].PvPath) {
		t.Fatal("the foreign filesystem was bind-mounted to the PV path")
	}
	if got := agenttest.Blkid(t, dev)["LABEL"]; got != "someone" {
		t.Fatalf("the device was reformatted: label %q", got)
	}
	rep, err := srv.GetNodeReport(ctx, &nodeagentv1.GetNodeReportRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Prepared) != 1 || rep.Prepared[0].State != "missing" {
		t.Fatalf("prepared %v, want the device reported missing", rep.Prepared)
	}
	_, err = srv.PrepareDisks(ctx, prepareReq(e.pv("vol"), 0, dev))
	wantCode(t, err, codes.FailedPrecondition, "no device on this node carries the agent's filesystem")
	// Releasing forgets it without wiping what is now someone else's.
	if _, err := srv.ReleaseDisks(ctx, &nodeagentv1.ReleaseDisksRequest{Devices: []string{dev}}); err != nil {
		t.Fatal(err)
	}
	if got := agenttest.Blkid(t, dev)["LABEL"]; got != "someone" {
		t.Fatalf("release touched the device: label %q", got)
	}
}
