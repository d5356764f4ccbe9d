package server_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	nodeagentv1 "github.com/opsuite/suite/proto/nodeagent/v1"
	"github.com/opsuite/suite/services/node-agent/internal/server"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
)

const maxMapCount = "/proc/sys/vm/max_map_count"

// fakeMaxMapCount bind-mounts a regular file over /proc/sys/vm/max_map_count in the test's
// private mount namespace: the agent reads and writes the real path, the host's value (which
// is global to the kernel) is never touched.
func fakeMaxMapCount(t *testing.T, value string) string {
	t.Helper()
	hostBefore := readHostMaxMapCount(t)
	file := filepath.Join(t.TempDir(), "max_map_count")
	if err := os.WriteFile(file, []byte(value+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(file, maxMapCount, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind-mounting over %s: %v", maxMapCount, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(maxMapCount, 0); err != nil {
			t.Errorf("unmounting %s: %v", maxMapCount, err)
		}
		if after := readHostMaxMapCount(t); after != hostBefore {
			t.Errorf("the host's vm.max_map_count changed: %s -> %s", hostBefore, after)
		}
	})
	return file
}

// readHostMaxMapCount reads the kernel's value; called only while no bind mount covers it.
func readHostMaxMapCount(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(maxMapCount)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func TestEnsureSysctl(t *testing.T) {
	ctx := context.Background()
	req := &nodeagentv1.EnsureSysctlRequest{Name: "vm.max_map_count"}

	t.Run("not allowed to raise", func(t *testing.T) {
		file := fakeMaxMapCount(t, "65530")
		e := newEnv(t)
		_, err := e.srv.EnsureSysctl(ctx, req)
		wantCode(t, err, codes.FailedPrecondition, "vm.max_map_count is 65530, below the minimum 262144", "--allow-raise-sysctl")
		if v := readFile(t, file); v != "65530" {
			t.Fatalf("value changed to %s", v)
		}
		resp, err := e.srv.EnsureSysctl(ctx, &nodeagentv1.EnsureSysctlRequest{Name: "vm.max_map_count", ReportOnly: true})
		if err != nil || resp.Status.Met || resp.Status.Value != 65530 || resp.Raised {
			t.Fatalf("report only: %v, %v", resp, err)
		}
		rep, err := e.srv.GetNodeReport(ctx, &nodeagentv1.GetNodeReportRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Sysctls) != 1 || rep.Sysctls[0].Value != 65530 || rep.Sysctls[0].Minimum != 262144 || rep.Sysctls[0].Met {
			t.Fatalf("report sysctls %v", rep.Sysctls)
		}
	})

	t.Run("raised when allowed", func(t *testing.T) {
		file := fakeMaxMapCount(t, "65530")
		e := newEnv(t, func(o *server.Options) { o.AllowRaiseSysctl = true })
		resp, err := e.srv.EnsureSysctl(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if !resp.Raised || resp.PreviousValue != 65530 || resp.Status.Value != 262144 || !resp.Status.Met {
			t.Fatalf("unexpected %v", resp)
		}
		if v := readFile(t, file); v != "262144" {
			t.Fatalf("file holds %s", v)
		}
		again, err := e.srv.EnsureSysctl(ctx, req)
		if err != nil || again.Raised || !again.Status.Met {
			t.Fatalf("repeat: %v, %v", again, err)
		}
	})

	t.Run("never lowered", func(t *testing.T) {
		file := fakeMaxMapCount(t, "1048576")
		e := newEnv(t, func(o *server.Options) { o.AllowRaiseSysctl = true })
		resp, err := e.srv.EnsureSysctl(ctx, req)
		if err != nil || resp.Raised || resp.Status.Value != 1048576 || !resp.Status.Met {
			t.Fatalf("%v, %v", resp, err)
		}
		if v := readFile(t, file); v != "1048576" {
			t.Fatalf("value changed to %s", v)
		}
	})

	t.Run("explicit minimum", func(t *testing.T) {
		fakeMaxMapCount(t, "262144")
		e := newEnv(t, func(o *server.Options) { o.AllowRaiseSysctl = true })
		resp, err := e.srv.EnsureSysctl(ctx, &nodeagentv1.EnsureSysctlRequest{Name: "vm.max_map_count", Minimum: 300000})
		if err != nil || !resp.Raised || resp.Status.Value != 300000 {
			t.Fatalf("%v, %v", resp, err)
		}
	})

	t.Run("namespaced sysctls are refused", func(t *testing.T) {
		// The agent's own pod has its own network and IPC namespaces: reading would report, and
		// writing would raise, only the agent's value, never the workload's.
		e := newEnv(t, func(o *server.Options) { o.AllowRaiseSysctl = true })
		before := readFile(t, "/proc/sys/net/core/somaxconn")
		for _, name := range []string{"net.core.somaxconn", "net.ipv4.tcp_keepalive_time", "kernel.shmmax", "kernel.msgmnb", "kernel.sem", "fs.mqueue.msg_max"} {
			for _, reportOnly := range []bool{false, true} {
				_, err := e.srv.EnsureSysctl(ctx, &nodeagentv1.EnsureSysctlRequest{Name: name, Minimum: 1 << 20, ReportOnly: reportOnly})
				wantCode(t, err, codes.InvalidArgument, name, "namespaced", "set it in the pod's securityContext.sysctls")
			}
		}
		if after := readFile(t, "/proc/sys/net/core/somaxconn"); after != before {
			t.Fatalf("net.core.somaxconn changed: %s -> %s", before, after)
		}
	})

	t.Run("unknown sysctl", func(t *testing.T) {
		e := newEnv(t, func(o *server.Options) { o.AllowRaiseSysctl = true })
		_, err := e.srv.EnsureSysctl(ctx, &nodeagentv1.EnsureSysctlRequest{Name: "kernel.panic", Minimum: 1})
		wantCode(t, err, codes.InvalidArgument, "kernel.panic")
		_, err = e.srv.EnsureSysctl(ctx, &nodeagentv1.EnsureSysctlRequest{Name: "vm/../../etc/passwd", Minimum: 1})
		wantCode(t, err, codes.InvalidArgument)
	})
}
