package server_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	nodeagentv1 "github.com/opsuite/suite/proto/nodeagent/v1"
	"google.golang.org/grpc/codes"
)

// writeState writes a state file as an agent interrupted mid-preparation leaves it.
func writeState(t *testing.T, e *testEnv, records ...map[string]any) {
	t.Helper()
	b, err := json.Marshal(map[string]any{"version": 1, "records": records})
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

func interrupted(e *testEnv, dev string) map[string]any {
	return map[string]any{
		"device": dev, "xfsDevice": dev, "fsUUID": interruptedUUID,
		"mountPath": filepath.Join(e.opts.AgentRoot, "mounts", interruptedUUID),
		"pvPath":    e.pv("vol"), "claim": e.pv("vol"), "phase": "preparing",
	}
}

func TestInterruptedPreparationIsFinished(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	dev := newLoop(t, e.root, 512*mib)
	writeState(t, e, interrupted(e, dev))
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
	if got := blkid(t, dev)["UUID"]; got != interruptedUUID {
		t.Fatalf("UUID %s, want the reserved %s", got, interruptedUUID)
	}
}

func TestInterruptedPreparationOnAChangedDeviceIsRefused(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	dev := newLoop(t, e.root, 512*mib)
	// After a reboot the name now belongs to a disk with someone's data.
	mustRun(t, "mkfs.ext4", "-q", "-F", dev)
	writeState(t, e, interrupted(e, dev))
	_, err := e.newServer().PrepareDisks(ctx, prepareReq(e.pv("vol"), 0, dev))
	wantCode(t, err, codes.FailedPrecondition, "device "+dev, "no longer carries what the agent wrote there")
	if got := blkid(t, dev)["TYPE"]; got != "ext4" {
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
	unmountUnder(t, e.root)
	mustRun(t, "mkfs.xfs", "-q", "-f", "-L", "someone", dev)
	srv := e.newServer()
	if err := srv.Restore(ctx); err == nil {
		t.Fatal("restore mounted a filesystem that is not the agent's")
	}
	if isMounted(t, resp.Disks[0].PvPath) {
		t.Fatal("the foreign filesystem was bind-mounted to the PV path")
	}
	if got := blkid(t, dev)["LABEL"]; got != "someone" {
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
	wantCode(t, err, codes.FailedPrecondition, "no longer carries the agent's filesystem")
	// Releasing forgets it without wiping what is now someone else's.
	if _, err := srv.ReleaseDisks(ctx, &nodeagentv1.ReleaseDisksRequest{Devices: []string{dev}}); err != nil {
		t.Fatal(err)
	}
	if got := blkid(t, dev)["LABEL"]; got != "someone" {
		t.Fatalf("release touched the device: label %q", got)
	}
}
