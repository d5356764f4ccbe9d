package server_test

import (
	"bytes"
	"context"
	"io"
	"math/rand"
	"os"
	"strconv"
	"testing"

	nodeagentv1 "github.com/opsuite/suite/proto/nodeagent/v1"
	"github.com/opsuite/suite/services/node-agent/agenttest"
	"github.com/opsuite/suite/services/node-agent/internal/server"
	"google.golang.org/grpc/codes"
)

// fillRandom writes random bytes all over a device: data a wipe of signatures would leave.
func fillRandom(t *testing.T, dev string, size int64) {
	t.Helper()
	f, err := os.OpenFile(dev, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := io.CopyN(f, rand.New(rand.NewSource(1)), size); err != nil {
		t.Fatal(err)
	}
}

// allZero reads a whole device back.
func allZero(t *testing.T, dev string) bool {
	t.Helper()
	f, err := os.Open(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	zero := make([]byte, 1<<20)
	for {
		n, err := f.Read(buf)
		if n > 0 && !bytes.Equal(buf[:n], zero[:n]) {
			return false
		}
		if err == io.EOF {
			return true
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestWipeMethods is issue 19 item 8: ReleaseDisks can zero or discard the whole device, not
// only erase signatures, on real loop devices read back afterwards; a method without wipe is
// refused.
func TestWipeMethods(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	const size = 512 * mib
	for _, m := range []nodeagentv1.WipeMethod{nodeagentv1.WipeMethod_WIPE_METHOD_ZERO, nodeagentv1.WipeMethod_WIPE_METHOD_DISCARD} {
		t.Run(m.String(), func(t *testing.T) {
			dev := newLoop(t, e.root, size)
			fillRandom(t, dev, size)
			mustRun(t, "wipefs", "-a", "-q", dev) // random bytes may look like a signature
			pv := e.pv(m.String())
			if _, err := e.srv.PrepareDisks(ctx, prepareReq(pv, 0, dev)); err != nil {
				t.Fatal(err)
			}
			_, err := e.srv.ReleaseDisks(ctx, &nodeagentv1.ReleaseDisksRequest{PvPath: pv, WipeMethod: m})
			wantCode(t, err, codes.InvalidArgument, "wipe_method is set without wipe")
			rel, err := e.srv.ReleaseDisks(ctx, &nodeagentv1.ReleaseDisksRequest{PvPath: pv, Wipe: true, WipeMethod: m})
			if err != nil || len(rel.Released) != 1 {
				t.Fatalf("release: %v, %v", rel, err)
			}
			if !allZero(t, dev) {
				t.Fatalf("%s: the device does not read back as zeroes", m)
			}
			if sig := agenttest.Blkid(t, dev); len(sig) != 0 {
				t.Fatalf("signatures left: %v", sig)
			}
		})
	}
}

// TestSysctlMaximum: a raise above the agent's maximum for the sysctl is refused before
// anything is read or written.
func TestSysctlMaximum(t *testing.T) {
	file := fakeMaxMapCount(t, "65530") // the host's value is never at stake
	e := newEnv(t, func(o *server.Options) { o.AllowRaiseSysctl = true })
	max := server.SysctlMaximums["vm.max_map_count"]
	_, err := e.srv.EnsureSysctl(context.Background(), &nodeagentv1.EnsureSysctlRequest{Name: "vm.max_map_count", Minimum: max + 1})
	wantCode(t, err, codes.InvalidArgument, "above the agent's maximum")
	_, err = e.srv.EnsureSysctl(context.Background(), &nodeagentv1.EnsureSysctlRequest{Name: "vm.max_map_count", Minimum: 1 << 62, ReportOnly: true})
	wantCode(t, err, codes.InvalidArgument, "above the agent's maximum")
	if v := readFile(t, file); v != "65530" {
		t.Fatalf("value changed to %s", v)
	}
	resp, err := e.srv.EnsureSysctl(context.Background(), &nodeagentv1.EnsureSysctlRequest{Name: "vm.max_map_count", Minimum: max})
	if err != nil || !resp.Raised || readFile(t, file) != strconv.FormatInt(max, 10) {
		t.Fatalf("raising to the maximum: %v, %v", resp, err)
	}
}
