// Package memgraphtest starts Memgraph HA simulator processes (bin/memgraph-sim, built by
// `make build`) on 127.0.0.1 for tests: coordinators and data instances with free ports, a
// shared invariant log, and the planner.Desired that registers them. A test that needs the
// simulator fails (never skips) when the binary is missing.
package memgraphtest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/opsuite/suite/services/memgraph-operator/internal/memgraph"
	"github.com/opsuite/suite/services/memgraph-operator/internal/planner"
	"github.com/opsuite/suite/shared/testenv"
)

// SimBinary is bin/memgraph-sim of the repository holding the working directory.
func SimBinary(t testing.TB) string {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(root, "bin", "memgraph-sim")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s is missing: run make build (or cd tools && go build -o ../bin/memgraph-sim ./cmd/memgraph-sim)", bin)
	}
	return bin
}

// Env is the environment every simulator process gets: a license (HA refuses to start
// without one) and Raft timings short enough for tests.
var Env = []string{
	"MEMGRAPH_ENTERPRISE_LICENSE=test-license",
	"MEMGRAPH_ORGANIZATION_NAME=test-organization",
	"MEMGRAPH_SIM_RAFT_HEARTBEAT=500ms",
	"MEMGRAPH_SIM_RAFT_ELECTION=500ms",
	"MEMGRAPH_SIM_REPLICATION_TIMEOUT=2s",
}

// Cluster is a set of simulator processes of one test.
type Cluster struct {
	t   testing.TB
	bin string
	dir string
	// InvariantLog is the JSONL file every process appends its role changes to.
	InvariantLog string
	// DownTimeoutSec is --instance-down-timeout-sec for coordinators (default 2).
	DownTimeoutSec int
	// ExtraEnv is added to Env for processes started from now on (e.g. MEMGRAPH_USER).
	ExtraEnv []string
	// ExtraArgs are added to the flags of processes started from now on (e.g.
	// BoltTLSArgs).
	ExtraArgs []string
	// Ports, when it holds a process's name, are the ports that process listens on, in
	// place of free ones picked as it starts: a test that maps addresses for the
	// simulator (MEMGRAPH_SIM_ADDRESS_MAP in ExtraEnv) must know every process's ports
	// before the first one starts. ReservePorts picks them.
	Ports map[string]Ports

	mu           sync.Mutex
	Coordinators map[int]*Process
	Data         map[string]*Process
	dataOrder    []string
}

// NewCluster prepares a cluster; processes are stopped when the test ends.
func NewCluster(t testing.TB) *Cluster {
	t.Helper()
	c := &Cluster{t: t, bin: SimBinary(t), dir: t.TempDir(), DownTimeoutSec: 2,
		Coordinators: map[int]*Process{}, Data: map[string]*Process{}}
	c.InvariantLog = filepath.Join(c.dir, "invariants.jsonl")
	t.Cleanup(c.stopAll)
	return c
}

// Ports are a process's listening ports: Bolt, management, and Peer, the coordinator
// (Raft) port of a coordinator or the replication port of a data instance.
type Ports struct{ Bolt, Mgmt, Peer int }

// ReservePorts picks n sets of distinct free ports below the kernel's ephemeral range
// (32768 up), for Cluster.Ports: they stay unbound until their process starts, maybe
// minutes later, and an ephemeral port could meanwhile become the source port of one of
// the many connections a test makes.
func ReservePorts(t testing.TB, n int) []Ports {
	t.Helper()
	out := make([]Ports, n)
	for i := range out {
		out[i] = Ports{Bolt: testenv.FreePortBelowEphemeral(t), Mgmt: testenv.FreePortBelowEphemeral(t), Peer: testenv.FreePortBelowEphemeral(t)}
	}
	return out
}

// portsFor are the ports of the process named name: Cluster.Ports' or free ones.
func (c *Cluster) portsFor(name string) Ports {
	c.t.Helper()
	if p, ok := c.Ports[name]; ok {
		return p
	}
	return Ports{Bolt: testenv.FreePort(c.t), Mgmt: testenv.FreePort(c.t), Peer: testenv.FreePort(c.t)}
}

// Process is one simulator process.
type Process struct {
	Name    string
	ID      int // coordinator id, 0 for a data instance
	Bolt    string
	Mgmt    string
	Coord   string // coordinator server (coordinators)
	Repl    string // replication server (data instances)
	DataDir string
	LogFile string
	args    []string
	cmd     *exec.Cmd
	done    chan struct{}
}

// Running says whether the process is alive.
func (p *Process) Running() bool {
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// StartCoordinator starts coordinator id.
func (c *Cluster) StartCoordinator(id int) *Process {
	c.t.Helper()
	name := memgraph.CoordinatorName(id)
	ports := c.portsFor(name)
	p := &Process{Name: name, ID: id,
		Bolt: hostPort(ports.Bolt), Mgmt: hostPort(ports.Mgmt), Coord: hostPort(ports.Peer),
		DataDir: filepath.Join(c.dir, fmt.Sprintf("coordinator-%d", id))}
	p.args = []string{"--bolt-address=127.0.0.1", "--bolt-port=" + strconv.Itoa(ports.Bolt),
		"--management-port=" + strconv.Itoa(ports.Mgmt), "--coordinator-port=" + strconv.Itoa(ports.Peer),
		"--coordinator-id=" + strconv.Itoa(id), "--coordinator-hostname=127.0.0.1",
		"--instance-down-timeout-sec=" + strconv.Itoa(c.DownTimeoutSec),
		"--experimental-enabled=high-availability", "--data-directory=" + p.DataDir,
		"--sim-invariant-log=" + c.InvariantLog, "--also-log-to-stderr", "--log-level=INFO"}
	c.mu.Lock()
	c.Coordinators[id] = p
	c.mu.Unlock()
	c.start(p)
	return p
}

// DataDirOf is the data directory the data instance name has, or will have once started
// (a test restores into it first).
func (c *Cluster) DataDirOf(name string) string { return filepath.Join(c.dir, name) }

// StartData starts a data instance (HA-managed: it has a management port).
func (c *Cluster) StartData(name string) *Process {
	c.t.Helper()
	ports := c.portsFor(name)
	p := &Process{Name: name, Bolt: hostPort(ports.Bolt), Mgmt: hostPort(ports.Mgmt), Repl: hostPort(ports.Peer),
		DataDir: c.DataDirOf(name)}
	p.args = []string{"--bolt-address=127.0.0.1", "--bolt-port=" + strconv.Itoa(ports.Bolt),
		"--management-port=" + strconv.Itoa(ports.Mgmt), "--data-directory=" + p.DataDir,
		"--sim-invariant-log=" + c.InvariantLog, "--also-log-to-stderr", "--log-level=INFO"}
	c.mu.Lock()
	c.Data[name] = p
	c.dataOrder = append(c.dataOrder, name)
	c.mu.Unlock()
	c.start(p)
	return p
}

func (c *Cluster) start(p *Process) {
	c.t.Helper()
	if err := os.MkdirAll(p.DataDir, 0o755); err != nil {
		c.t.Fatal(err)
	}
	p.LogFile = filepath.Join(c.dir, p.Name+".log")
	logf, err := os.OpenFile(p.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	if p.cmd == nil {
		// First start: later restarts keep the flags the process was started with.
		p.args = append(p.args, c.ExtraArgs...)
	}
	cmd := exec.Command(c.bin, p.args...)
	cmd.Env = append(append(os.Environ(), Env...), c.ExtraEnv...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		c.t.Fatalf("start %s: %v", p.Name, err)
	}
	p.cmd, p.done = cmd, make(chan struct{})
	go func() {
		_ = cmd.Wait()
		_ = logf.Close()
		close(p.done)
	}()
	if err := waitListening(p.Bolt, p.done, 15*time.Second); err != nil {
		c.t.Fatalf("%s: %v; log %s:\n%s", p.Name, err, p.LogFile, tailFile(p.LogFile, 2000))
	}
}

// Stop ends the process with SIGTERM (a clean shutdown), SIGKILL after 10 s.
func (c *Cluster) Stop(p *Process) { c.signal(p, syscall.SIGTERM) }

// Kill ends the process with SIGKILL (a crash).
func (c *Cluster) Kill(p *Process) { c.signal(p, syscall.SIGKILL) }

func (c *Cluster) signal(p *Process, sig syscall.Signal) {
	if !p.Running() {
		return
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// Restart starts a stopped process again with the same ports and data directory.
func (c *Cluster) Restart(p *Process) {
	c.t.Helper()
	c.Stop(p)
	c.start(p)
}

func (c *Cluster) stopAll() {
	c.mu.Lock()
	var all []*Process
	for _, p := range c.Coordinators {
		all = append(all, p)
	}
	for _, p := range c.Data {
		all = append(all, p)
	}
	c.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range all {
		wg.Add(1)
		go func() { defer wg.Done(); c.Stop(p) }()
	}
	wg.Wait()
	if c.t.Failed() {
		for _, p := range all {
			c.t.Logf("--- %s log (tail):\n%s", p.Name, tailFile(p.LogFile, 3000))
		}
	}
}

// Desired registers every started process; the coordinators with ids in retiringC and
// the data instances named in retiringD are retiring.
func (c *Cluster) Desired(retiringC []int, retiringD []string) planner.Desired {
	c.mu.Lock()
	defer c.mu.Unlock()
	var w planner.Desired
	ids := make([]int, 0, len(c.Coordinators))
	for id := range c.Coordinators {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	for _, id := range ids {
		p := c.Coordinators[id]
		w.Coordinators = append(w.Coordinators, planner.Coordinator{ID: id, Name: p.Name,
			BoltServer: p.Bolt, CoordinatorServer: p.Coord, ManagementServer: p.Mgmt})
	}
	for _, n := range c.dataOrder {
		p := c.Data[n]
		w.Data = append(w.Data, planner.DataInstance{Name: n, BoltServer: p.Bolt,
			ManagementServer: p.Mgmt, ReplicationServer: p.Repl})
	}
	w.RetiringCoordinators = retiringC
	w.RetiringData = retiringD
	return w
}

// Event is one line of the simulator's invariant log.
type Event struct {
	TS       time.Time `json:"ts"`
	Instance string    `json:"instance"`
	Role     string    `json:"role"`
	Writable bool      `json:"writable"`
}

// Events reads the invariant log in time order.
func (c *Cluster) Events() []Event {
	c.t.Helper()
	f, err := os.Open(c.InvariantLog)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		c.t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var out []Event
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			c.t.Fatalf("invariant log: %v", err)
		}
		out = append(out, e)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].TS.Before(out[j].TS) })
	return out
}

// Window is a stretch of the log with no writable MAIN.
type Window struct{ From, To time.Time }

// WritableMains replays the log: the most data instances that were writable MAINs at
// once, and the stretches without one after the first MAIN appeared.
func WritableMains(events []Event) (most int, mainless []Window) {
	mains := map[string]bool{}
	var since time.Time
	seen := false
	for _, e := range events {
		switch e.Role {
		case "main":
			mains[e.Instance] = e.Writable
		case "replica", "down":
			delete(mains, e.Instance)
		}
		n := 0
		for _, w := range mains {
			if w {
				n++
			}
		}
		most = max(most, n)
		switch {
		case n > 0 && !since.IsZero():
			mainless = append(mainless, Window{From: since, To: e.TS})
			since = time.Time{}
		case n > 0:
			seen = true
		case seen && since.IsZero():
			since = e.TS
		}
	}
	return most, mainless
}

func hostPort(p int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)) }

func waitListening(addr string, done <-chan struct{}, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		conn, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			_ = conn.Close()
			return nil
		}
		select {
		case <-done:
			return errors.New("exited before listening")
		case <-ctx.Done():
			return fmt.Errorf("not listening on %s after %v", addr, timeout)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
