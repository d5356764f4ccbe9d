// Package veltrixtest runs real bin/veltrix-sim processes (the VeltrixDB simulator that
// `make build` writes) on 127.0.0.1 free ports for integration tests: a cluster bootstrapped
// from --peers, members started later that --join it, stops that checkpoint (SIGTERM) or
// crash (SIGKILL), restarts on the same ports and data dirs (a pod replaced with its
// volume), and the simulator's knobs (move rate, index rebuild time, refused DELETE, crash
// mid-move). Processes are killed when the test ends and their log tails printed when it
// failed. A missing binary fails the test and says to run make build.
package veltrixtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/opsuite/suite/services/veltrix-operator/internal/veltrix"
	"github.com/opsuite/suite/shared/testenv"
)

// EnvBinary overrides where the simulator binary is looked for.
const EnvBinary = "VELTRIX_SIM_BIN"

// StartTimeout bounds how long a process may take to answer after it was started.
const StartTimeout = 20 * time.Second

// Options are the flags every process of a Cluster gets.
type Options struct {
	// Name prefixes node ids: "<Name>-<ordinal>", like the pods of a StatefulSet. Default "vx".
	Name string
	// Mode is --mode; default replicated.
	Mode string
	// ReplicationFactor is --replication-factor; default 2.
	ReplicationFactor int
	// PartitionCount is --sim-partition-count; 0 keeps the simulator's default.
	PartitionCount int
	// AdminToken is --admin-token; empty runs the admin API without one (loopback only).
	AdminToken string
	// MoveRate is --sim-move-rate in keys per second; 0 keeps the simulator's default (use
	// Paused to stop moves).
	MoveRate float64
	// Paused starts with moves stopped (--sim-move-rate=0): members stay leaving/joining.
	Paused bool
	// IndexRebuild is --sim-index-rebuild (search_ready=0 that long after reopening data);
	// 0 keeps the simulator's default.
	IndexRebuild time.Duration
	// RefuseDelete is --sim-refuse-delete: 409 or 500 answers every member DELETE with it.
	RefuseDelete int
	// CrashMidMove is --sim-crash-mid-move: the process exits after moving that many keys.
	CrashMidMove int
	// Extra flags appended to every process's command line.
	Extra []string
}

func (o Options) withDefaults() Options {
	if o.Name == "" {
		o.Name = "vx"
	}
	if o.Mode == "" {
		o.Mode = "replicated"
	}
	if o.ReplicationFactor == 0 {
		o.ReplicationFactor = 2
	}
	return o
}

// Cluster is a set of simulator processes that form one VeltrixDB cluster.
type Cluster struct {
	Opts Options
	// Bootstrap are the first members, listed in every process's --peers.
	Bootstrap []*Server

	t   testing.TB
	bin string
	// mapCountFile holds a vm.max_map_count the native index accepts, whatever the host has.
	mapCountFile string

	mu      sync.Mutex
	servers []*Server // by ordinal; nil where none was started
}

// Server is one simulator process.
type Server struct {
	// ID is its node id, "<name>-<ordinal>"; Ordinal the number.
	ID      string
	Ordinal int32
	// Addr is the text-protocol address; AdminAddr the HTTP (metrics/admin) address.
	Addr, AdminAddr string
	// Dir holds its data dir and its log; both survive Restart.
	Dir string
	// Extra flags for this process only (set before Restart to change them).
	Extra []string

	c *Cluster

	mu   sync.Mutex
	proc *process // the last process started, nil before the first
}

// process is one run of the binary.
type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once Wait returned
	err  error         // Wait's result, set before done is closed
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (s *Server) current() *process {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc
}

// Binary returns the path of bin/veltrix-sim and fails the test when it is missing.
func Binary(t testing.TB) string {
	t.Helper()
	path := os.Getenv(EnvBinary)
	if path == "" {
		root, err := testenv.RepoRoot()
		if err != nil {
			t.Fatalf("veltrixtest: %v", err)
		}
		path = filepath.Join(root, "bin", "veltrix-sim")
	}
	if st, err := os.Stat(path); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		t.Fatalf("veltrixtest: the simulator %s is missing or not executable (%v): run make build", path, err)
	}
	return path
}

// StartCluster starts n bootstrap members (ordinals 0..n-1), each with --peers naming all
// of them, --join naming the others and --advertise-addr its own address, and waits until
// every one answers and lists n active members.
func StartCluster(t testing.TB, n int, opts Options) *Cluster {
	t.Helper()
	c := &Cluster{Opts: opts.withDefaults(), t: t, bin: Binary(t)}
	c.mapCountFile = filepath.Join(t.TempDir(), "max_map_count")
	if err := os.WriteFile(c.mapCountFile, []byte("262144\n"), 0o644); err != nil {
		t.Fatalf("veltrixtest: %v", err)
	}
	for i := range n {
		c.Bootstrap = append(c.Bootstrap, c.newServer(int32(i)))
	}
	for _, s := range c.Bootstrap {
		s.start()
	}
	c.WaitMembers(n, nil)
	return c
}

func (c *Cluster) newServer(ordinal int32) *Server {
	t := c.t
	t.Helper()
	s := &Server{ID: fmt.Sprintf("%s-%d", c.Opts.Name, ordinal), Ordinal: ordinal, Dir: t.TempDir(), c: c,
		Addr: testenv.FreeAddr(t), AdminAddr: testenv.FreeAddr(t)}
	if err := os.MkdirAll(s.dataDir(), 0o755); err != nil {
		t.Fatalf("veltrixtest: %v", err)
	}
	c.mu.Lock()
	for int(ordinal) >= len(c.servers) {
		c.servers = append(c.servers, nil)
	}
	c.servers[ordinal] = s
	c.mu.Unlock()
	t.Cleanup(func() {
		s.Kill()
		if t.Failed() {
			t.Logf("%s (%s) log tail:\n%s", s.ID, s.Addr, logTail(s.logFile(), 3000))
		}
	})
	return s
}

// Join starts the member of the next ordinal: --peers the bootstrap members, --join their
// addresses, --advertise-addr its own, and extra flags for it alone (kept for restarts). It
// waits until the process answers, not until it is an active member.
func (c *Cluster) Join(extra ...string) *Server {
	c.t.Helper()
	c.mu.Lock()
	ordinal := int32(len(c.servers))
	c.mu.Unlock()
	s := c.newServer(ordinal)
	s.Extra = extra
	s.start()
	return s
}

// Server returns the process of an ordinal (nil when none was started).
func (c *Cluster) Server(ordinal int32) *Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	if int(ordinal) >= len(c.servers) {
		return nil
	}
	return c.servers[ordinal]
}

// Servers returns every process started, by ordinal.
func (c *Cluster) Servers() []*Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*Server
	for _, s := range c.servers {
		if s != nil {
			out = append(out, s)
		}
	}
	return out
}

// PodName is the node id of an ordinal, as planner.Input.PodName wants it.
func (c *Cluster) PodName(ordinal int32) string { return fmt.Sprintf("%s-%d", c.Opts.Name, ordinal) }

// MemberAddr is the text address an ordinal's process advertises ("" when not started).
func (c *Cluster) MemberAddr(ordinal int32) string {
	if s := c.Server(ordinal); s != nil {
		return s.Addr
	}
	return ""
}

// Client is an admin client with the cluster's token.
func (c *Cluster) Client() *veltrix.Client {
	return veltrix.New(veltrix.Options{Token: c.Opts.AdminToken, Timeout: 5 * time.Second})
}

// RunningAdminAddrs are the admin addresses of running processes, lowest ordinal first.
func (c *Cluster) RunningAdminAddrs() []string {
	var out []string
	for _, s := range c.Servers() {
		if s.Running() {
			out = append(out, s.AdminAddr)
		}
	}
	return out
}

// WaitMembers waits until a running member lists want members, all active, and, when ids
// is not nil, exactly those ids.
func (c *Cluster) WaitMembers(want int, ids []string) []veltrix.Member {
	c.t.Helper()
	var last []veltrix.Member
	testenv.Eventually(c.t, testenv.DefaultTimeout, fmt.Sprintf("%d active members", want), func() (bool, string) {
		addrs := c.RunningAdminAddrs()
		if len(addrs) == 0 {
			return false, "no process runs"
		}
		ms, err := c.Client().Members(context.Background(), addrs[0])
		if err != nil {
			return false, err.Error()
		}
		last = ms
		if len(ms) != want {
			return false, fmt.Sprint(ms)
		}
		for i, m := range ms {
			if m.State != veltrix.MemberActive || (ids != nil && !slices.Contains(ids, m.ID)) {
				return false, fmt.Sprintf("member %d: %+v", i, m)
			}
		}
		return true, ""
	})
	return last
}

func (s *Server) dataDir() string { return filepath.Join(s.Dir, "data") }
func (s *Server) logFile() string { return filepath.Join(s.Dir, "veltrix-sim.log") }

func (s *Server) args() []string {
	o := s.c.Opts
	var peers, join []string
	for _, b := range s.c.Bootstrap {
		peers = append(peers, b.ID+"@"+b.Addr)
		if b != s {
			join = append(join, b.Addr)
		}
	}
	args := []string{
		"--addr", s.Addr, "--metrics-addr", s.AdminAddr, "--node-id", s.ID,
		"--mode", o.Mode, "--data-dirs", s.dataDir(), "--advertise-addr", s.Addr,
		"--replication-factor", strconv.Itoa(o.ReplicationFactor),
		"--sim-max-map-count-file", s.c.mapCountFile,
	}
	if o.Mode != "standalone" {
		args = append(args, "--peers", strings.Join(peers, ","))
		if len(join) > 0 {
			args = append(args, "--join", strings.Join(join, ","))
		}
	}
	if o.AdminToken != "" {
		args = append(args, "--admin-token", o.AdminToken)
	}
	if o.PartitionCount > 0 {
		args = append(args, "--sim-partition-count", strconv.Itoa(o.PartitionCount))
	}
	switch {
	case o.Paused:
		args = append(args, "--sim-move-rate", "0")
	case o.MoveRate > 0:
		args = append(args, "--sim-move-rate", strconv.FormatFloat(o.MoveRate, 'f', -1, 64))
	}
	if o.IndexRebuild > 0 {
		args = append(args, "--sim-index-rebuild", o.IndexRebuild.String())
	}
	if o.RefuseDelete != 0 {
		args = append(args, "--sim-refuse-delete", strconv.Itoa(o.RefuseDelete))
	}
	if o.CrashMidMove > 0 {
		args = append(args, "--sim-crash-mid-move", strconv.Itoa(o.CrashMidMove))
	}
	args = append(args, o.Extra...)
	return append(args, s.Extra...)
}

// start starts the process and waits until it answers PING and /readyz.
func (s *Server) start() {
	t := s.c.t
	t.Helper()
	logf, err := os.OpenFile(s.logFile(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatalf("veltrixtest: %v", err)
	}
	defer func() { _ = logf.Close() }() // the child has its own descriptor
	cmd := exec.Command(s.c.bin, s.args()...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Only what the simulator needs: an inherited VELTRIX_* would change its behaviour.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	if err := cmd.Start(); err != nil {
		t.Fatalf("veltrixtest: starting %s: %v", s.c.bin, err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	s.mu.Lock()
	s.proc = p
	s.mu.Unlock()
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	testenv.Eventually(t, StartTimeout, s.ID+" answering on "+s.Addr, func() (bool, string) {
		if p.exited() {
			// Another process answering on its port must not pass for it.
			t.Fatalf("veltrixtest: %s exited at start (%v); log:\n%s", s.ID, p.err, logTail(s.logFile(), 3000))
		}
		if err := s.ping(); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
}

func (s *Server) ping() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	conn, err := veltrix.Dial(ctx, s.Addr, time.Second)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	if err := conn.Ping(ctx); err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.AdminAddr+"/readyz", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/readyz: %s", resp.Status)
	}
	return nil
}

// Running reports whether the process is up.
func (s *Server) Running() bool {
	p := s.current()
	return p != nil && !p.exited()
}

// ExitErr is how the last process ended (nil while running or after a clean exit).
func (s *Server) ExitErr() error {
	if p := s.current(); p != nil && p.exited() {
		return p.err
	}
	return nil
}

// Stop sends SIGTERM (a clean shutdown that writes a checkpoint, as the kubelet's) and
// waits for the exit; the test fails when the process does not exit cleanly.
func (s *Server) Stop() {
	s.c.t.Helper()
	if err := s.signal(syscall.SIGTERM, 30*time.Second); err != nil {
		s.c.t.Errorf("veltrixtest: stopping %s: %v", s.ID, err)
	}
}

// Kill sends SIGKILL (a crash) and waits for the exit; how the process ended does not
// matter, only that it did.
func (s *Server) Kill() {
	s.c.t.Helper()
	var ee *exec.ExitError
	if err := s.signal(syscall.SIGKILL, 10*time.Second); err != nil && !errors.As(err, &ee) {
		s.c.t.Errorf("veltrixtest: killing %s: %v", s.ID, err)
	}
}

// Restart stops the process cleanly and starts it again on the same ports and data dir.
func (s *Server) Restart() {
	s.c.t.Helper()
	s.Stop()
	s.start()
}

// Start starts a stopped process again on its ports and data dir.
func (s *Server) Start() {
	s.c.t.Helper()
	if s.Running() {
		s.c.t.Fatalf("veltrixtest: %s is already running", s.ID)
	}
	s.start()
}

// StartFresh starts a stopped process again on its ports with an empty data dir, as a
// member's pod made anew on another node's blank disk: it keeps its id and --join.
func (s *Server) StartFresh() {
	s.c.t.Helper()
	if s.Running() {
		s.c.t.Fatalf("veltrixtest: %s is already running", s.ID)
	}
	if err := os.RemoveAll(s.dataDir()); err != nil {
		s.c.t.Fatalf("veltrixtest: %v", err)
	}
	if err := os.MkdirAll(s.dataDir(), 0o755); err != nil {
		s.c.t.Fatalf("veltrixtest: %v", err)
	}
	s.start()
}

// signal sends sig and waits up to timeout for the exit; it returns how the process ended.
func (s *Server) signal(sig syscall.Signal, timeout time.Duration) error {
	p := s.current()
	if p == nil {
		return nil
	}
	if p.exited() {
		return p.err // already gone: report how
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("pid %d did not exit within %s of %v", p.cmd.Process.Pid, timeout, sig)
	}
	return p.err
}

// Faults are the simulator's run-time knobs (POST /admin/sim/faults).
type Faults struct {
	// RefuseDelete answers member DELETEs with 409 or 500; 0 accepts them.
	RefuseDelete int `json:"refuse_delete"`
	// MoveRate is keys per second moved on membership changes; 0 holds moves.
	MoveRate float64 `json:"move_rate"`
}

// SetFaults changes the process's run-time knobs.
func (s *Server) SetFaults(f Faults) {
	s.c.t.Helper()
	body, err := json.Marshal(f)
	if err != nil {
		s.c.t.Fatalf("veltrixtest: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+s.AdminAddr+"/admin/sim/faults", bytes.NewReader(body))
	if err != nil {
		s.c.t.Fatalf("veltrixtest: %v", err)
	}
	if tok := s.c.Opts.AdminToken; tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.c.t.Fatalf("veltrixtest: setting faults on %s: %v", s.ID, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		s.c.t.Fatalf("veltrixtest: setting faults %s on %s: %s %s", body, s.ID, resp.Status, msg)
	}
}

// SetFaults changes the run-time knobs of every running process.
func (c *Cluster) SetFaults(f Faults) {
	c.t.Helper()
	for _, s := range c.Servers() {
		if s.Running() {
			s.SetFaults(f)
		}
	}
}

// Conn dials the process's text protocol; closed when the test ends.
func (s *Server) Conn() *veltrix.Conn {
	s.c.t.Helper()
	conn, err := veltrix.Dial(context.Background(), s.Addr, 5*time.Second)
	if err != nil {
		s.c.t.Fatalf("veltrixtest: %v", err)
	}
	s.c.t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// Log returns everything the process (every run of it) logged.
func (s *Server) Log() string {
	b, err := os.ReadFile(s.logFile())
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// logTail returns the last n bytes of a file, or why it could not be read.
func logTail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer func() { _ = f.Close() }()
	if st, err := f.Stat(); err == nil && st.Size() > n {
		_, _ = f.Seek(st.Size()-n, io.SeekStart)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return err.Error()
	}
	return string(b)
}
