// Package valkeytest runs real server processes on loopback for tests: valkey-server (8.0,
// from Debian bookworm-backports) unless VALKEY_SERVER=redis-server picks Debian's Redis
// 7.0 for the compatibility run (Bins). Servers start in cluster mode, stop and restart on
// the same port and data directory (a pod replaced with its volume) or move to new ports (a
// pod rescheduled with its volume under a new IP), and are killed at the
// test's end with their log tail printed when the test failed.
package valkeytest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
	"github.com/opsuite/suite/shared/testenv"
)

// Server is one server process in cluster mode.
type Server struct {
	// Addr is host:port clients dial; BusPort the cluster bus port.
	Addr    string
	Port    int
	BusPort int
	// Dir holds nodes.conf, the data and server.log; it survives Restart.
	Dir string

	t     testing.TB
	bin   Binaries
	extra []string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// Start starts one cluster-mode server (Bins) on a free loopback port with extra
// arguments appended (e.g. "--aclfile", path), and waits until it answers.
func Start(t testing.TB, extra ...string) *Server {
	t.Helper()
	bin := Bins(t)
	// testenv never hands a port out twice in a process: two servers on one address would
	// make one member of two.
	s := &Server{Port: testenv.FreePort(t), BusPort: testenv.FreePort(t), Dir: t.TempDir(), t: t, bin: bin, extra: extra}
	s.Addr = fmt.Sprintf("127.0.0.1:%d", s.Port)
	t.Cleanup(func() {
		s.Stop()
		if err := testenv.PortsFree(s.Port, 1); err != nil {
			t.Errorf("after cleanup: %v", err)
		}
		if t.Failed() {
			if b, err := os.ReadFile(s.logFile()); err == nil {
				t.Logf("%s log tail:\n%s", s.Addr, tail(string(b), 1500))
			}
		}
	})
	s.start()
	return s
}

// StartPrepared is Start with prepare run on the empty data directory before the server
// starts, as a pod's init container runs before its server (a restore's RDB).
func StartPrepared(t testing.TB, prepare func(dir string) error, extra ...string) *Server {
	t.Helper()
	bin := Bins(t)
	s := &Server{Port: testenv.FreePort(t), BusPort: testenv.FreePort(t), Dir: t.TempDir(), t: t, bin: bin, extra: extra}
	s.Addr = fmt.Sprintf("127.0.0.1:%d", s.Port)
	if err := prepare(s.Dir); err != nil {
		t.Fatalf("preparing %s: %v", s.Dir, err)
	}
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			if b, err := os.ReadFile(s.logFile()); err == nil {
				t.Logf("%s log tail:\n%s", s.Addr, tail(string(b), 1500))
			}
		}
	})
	s.start()
	return s
}

// StartN starts n servers.
func StartN(t testing.TB, n int, extra ...string) []*Server {
	out := make([]*Server, n)
	for i := range out {
		out[i] = Start(t, extra...)
	}
	return out
}

func (s *Server) logFile() string { return filepath.Join(s.Dir, logName) }

const logName = "server.log"

func (s *Server) start() {
	s.t.Helper()
	args := append([]string{"--cluster-enabled", "yes", "--port", strconv.Itoa(s.Port),
		"--cluster-port", strconv.Itoa(s.BusPort), "--bind", "127.0.0.1",
		"--cluster-config-file", filepath.Join(s.Dir, "nodes.conf"), "--dir", s.Dir,
		"--save", "", "--appendonly", "no", "--cluster-node-timeout", "2000",
		// As the operator renders it (resources.RenderConfig).
		"--repl-diskless-sync-delay", "1",
		"--logfile", s.logFile()}, s.extra...)
	cmd := exec.Command(s.bin.Server, args...)
	testenv.OwnGroup(cmd)
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("starting %s: %v", s.bin.Name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait() // killed on Stop, so its exit status says nothing
		close(done)
	}()
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	testenv.Eventually(s.t, 10*time.Second, s.Addr+" accepting connections", func() (bool, string) {
		select {
		case <-done:
			// Another process answering on its port must not pass for it.
			s.t.Fatalf("%s for %s exited at start: see its log", s.bin.Name, s.Addr)
		default:
		}
		c, err := valkey.Dial(s.Addr, valkey.Options{DialTimeout: time.Second})
		if err != nil {
			return false, err.Error()
		}
		defer c.Close()
		_, err = c.ClusterInfo(context.Background())
		return err == nil, fmt.Sprint(err)
	})
}

// Stop kills the server (as a node crash would) and waits for it to exit.
func (s *Server) Stop() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	if err := testenv.KillGroup(cmd.Process.Pid, done, 10*time.Second); err != nil {
		s.t.Errorf("%s: %v", s.bin.Name, err)
	}
	// A reaped pid that still answers signal 0 would be a leftover.
	if err := syscall.Kill(cmd.Process.Pid, 0); err == nil {
		s.t.Errorf("%s pid %d still exists after stop", s.bin.Name, cmd.Process.Pid)
	}
}

// Restart stops the server and starts it again on the same port and directory: its
// nodes.conf keeps its node id, as a pod replaced with its volume does.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	s.start()
}

// Move kills the server and starts it again from the same directory on new ports: its
// nodes.conf keeps its node id and the peers' old addresses, as a pod with a persistent
// volume rescheduled under a new IP. Whatever the server did not save is gone.
func (s *Server) Move() {
	s.t.Helper()
	s.Stop()
	s.Port, s.BusPort = testenv.FreePort(s.t), testenv.FreePort(s.t)
	s.Addr = fmt.Sprintf("127.0.0.1:%d", s.Port)
	s.start()
}

// Wipe kills the server and starts it again on the same port with an empty directory: a
// new node id at the old address, as a pod without persistence replaced at its old IP.
func (s *Server) Wipe() {
	s.t.Helper()
	s.Stop()
	entries, err := os.ReadDir(s.Dir)
	if err != nil {
		s.t.Fatalf("wiping %s: %v", s.Dir, err)
	}
	for _, e := range entries {
		if e.Name() == logName {
			continue // kept: the log tail of a failed test covers both lives
		}
		if err := os.RemoveAll(filepath.Join(s.Dir, e.Name())); err != nil {
			s.t.Fatalf("wiping %s: %v", s.Dir, err)
		}
	}
	s.start()
}

// Pid is the server process's id (0 when stopped).
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Running reports whether the process is up.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return false
	}
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
