package executor

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/opsuite/suite/services/valkey-operator/internal/planner"
	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
	"github.com/opsuite/suite/services/valkey-operator/internal/valkeytest"
	"github.com/opsuite/suite/shared/testenv"
)

type server struct {
	member planner.Member
	dir    string // data directory (nodes.conf)
	cmd    *exec.Cmd
	done   chan struct{} // closed once the process is reaped
}

// startServers starts n real server processes (valkeytest.Bins) in cluster mode on free
// loopback ports, spread over three simulated hosts, and stops them (checking they are
// gone) at cleanup.
func startServers(t testing.TB, n int) []*server {
	t.Helper()
	return startServersWith(t, n, serverConfig{})
}

// serverConfig is what a test adds to every server: extra arguments (users, TLS) and the
// options a client needs to reach it.
type serverConfig struct {
	args []string
	tls  bool // serve TLS only on the port (--port 0 --tls-port)
	dial valkey.Options
}

func startServersWith(t testing.TB, n int, cfg serverConfig) []*server {
	t.Helper()
	var out []*server
	for i := range n {
		// testenv never hands a port out twice in a process: two servers on one address
		// would make one member of two.
		port, bus := testenv.FreePort(t), testenv.FreePort(t)
		out = append(out, launch(t, planner.Member{Addr: fmt.Sprintf("127.0.0.1:%d", port), BusPort: bus,
			Host: fmt.Sprintf("sim-node-%d", i%3)}, cfg, t.TempDir()))
	}
	for _, s := range out {
		awaitServer(t, s, cfg)
	}
	return out
}

// restart starts a fresh, empty server (new node id) where s ran; s must be stopped.
func restart(t testing.TB, s *server, cfg serverConfig) *server {
	t.Helper()
	n := launch(t, s.member, cfg, t.TempDir())
	awaitServer(t, n, cfg)
	return n
}

// moveTo starts s again from its data directory (same node id) at member m's address,
// as a pod with a persistent volume coming back with a new IP; s must be stopped.
func moveTo(t testing.TB, s *server, m planner.Member, cfg serverConfig) *server {
	t.Helper()
	n := launch(t, m, cfg, s.dir)
	awaitServer(t, n, cfg)
	return n
}

// stop kills the server and waits until it is reaped.
func (s *server) stop(t testing.TB) {
	t.Helper()
	if err := testenv.KillGroup(s.cmd.Process.Pid, s.done, 10*time.Second); err != nil {
		t.Fatal(err)
	}
}

// launch starts one server (valkeytest.Bins) for member m with an empty data directory and
// stops it (checking it is gone and its port free) at cleanup.
func launch(t testing.TB, m planner.Member, cfg serverConfig, dir string) *server {
	t.Helper()
	bin := valkeytest.Bins(t)
	_, portText, _ := net.SplitHostPort(m.Addr)
	port, _ := strconv.Atoi(portText)
	portArgs := []string{"--port", portText}
	if cfg.tls {
		portArgs = []string{"--port", "0", "--tls-port", portText}
	}
	args := append(portArgs, "--cluster-enabled", "yes",
		"--cluster-port", strconv.Itoa(m.BusPort), "--bind", "127.0.0.1",
		"--cluster-config-file", filepath.Join(dir, "nodes.conf"), "--dir", dir,
		"--save", "", "--appendonly", "no", "--cluster-node-timeout", "2000",
		"--logfile", filepath.Join(dir, "server.log"))
	cmd := exec.Command(bin.Server, append(args, cfg.args...)...)
	testenv.OwnGroup(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin.Name, err)
	}
	s := &server{member: m, dir: dir, cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait() // killed at cleanup, so its exit status says nothing
		close(s.done)
	}()
	t.Cleanup(func() {
		if err := testenv.KillGroup(cmd.Process.Pid, s.done, 10*time.Second); err != nil {
			t.Errorf("%s: %v", bin.Name, err)
		}
		// A reaped pid that still answers signal 0 would be a leftover.
		if err := syscall.Kill(cmd.Process.Pid, 0); err == nil {
			t.Errorf("%s pid %d still exists after cleanup", bin.Name, cmd.Process.Pid)
		}
		if err := testenv.PortsFree(port, 1); err != nil {
			t.Errorf("after cleanup: %v", err)
		}
		if t.Failed() {
			if b, err := os.ReadFile(filepath.Join(dir, "server.log")); err == nil {
				t.Logf("%s log tail:\n%s", s.member.Addr, tail(string(b), 4000))
			}
		}
	})
	return s
}

func awaitServer(t testing.TB, s *server, cfg serverConfig) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, s.member.Addr+" accepting connections", func() (bool, string) {
		select {
		case <-s.done:
			// Another process answering on its port must not pass for it.
			t.Fatalf("server for %s exited at start: see its log", s.member.Addr)
		default:
		}
		o := cfg.dial
		o.DialTimeout = time.Second
		c, err := valkey.Dial(s.member.Addr, o)
		if err != nil {
			return false, err.Error()
		}
		defer c.Close()
		_, err = c.ClusterInfo(context.Background())
		return err == nil, fmt.Sprint(err)
	})
}

// dumpClusterOnFailure logs, when the test has failed, what every reachable member says of
// the cluster (CLUSTER INFO and CLUSTER NODES through the server's cli), so a cluster that
// stayed down can be told apart from a client that never caught up.
func dumpClusterOnFailure(t *testing.T, addrs []string) {
	t.Helper()
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		cli := valkeytest.Bins(t).CLI
		for _, addr := range addrs {
			host, port, _ := net.SplitHostPort(addr)
			for _, cmd := range []string{"INFO", "NODES"} {
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				out, err := exec.CommandContext(ctx, cli, "-h", host, "-p", port, "CLUSTER", cmd).CombinedOutput()
				cancel()
				t.Logf("%s CLUSTER %s (%v):\n%s", addr, cmd, err, out)
			}
		}
	})
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// TestFormsRealCluster forms 3 shards x 1 replica out of six server processes with
// planner passes alone, then serves keys through a cluster-mode client.
func TestFormsRealCluster(t *testing.T) {
	servers := startServers(t, 6)
	var members []planner.Member
	var addrs []string
	for _, s := range servers {
		members = append(members, s.member)
		addrs = append(addrs, s.member.Addr)
	}
	d := planner.Desired{Shards: 3, Replicas: 1, Members: members}
	e := New(func(addr string) (valkey.Conn, error) { return valkey.Dial(addr, valkey.Options{}) })
	defer e.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	convergeReal(ctx, t, e, d, addrs)

	snap, failed := e.Observe(ctx, addrs)
	if len(failed) > 0 {
		t.Fatalf("unreachable after convergence: %v", failed)
	}
	if !snap.Agree() {
		t.Fatal("members disagree on slot owners after convergence")
	}
	view := snap.Views[0]
	owners := view.Owners()
	for s, o := range owners {
		if o == "" {
			t.Fatalf("slot %d unassigned", s)
		}
	}
	hostOf := map[string]string{}
	for _, s := range servers {
		n, _ := view.ByAddr(s.member.Addr)
		hostOf[n.ID] = s.member.Host
	}
	var primaries int
	for _, p := range view.Primaries() {
		if p.SlotTotal() == 0 {
			continue
		}
		primaries++
		if p.SlotTotal() < valkey.SlotCount/3 || p.SlotTotal() > valkey.SlotCount/3+1 {
			t.Errorf("primary %s serves %d slots, want an even third", p.Addr, p.SlotTotal())
		}
		reps := view.ReplicasOf(p.ID)
		if len(reps) != 1 {
			t.Fatalf("primary %s has %d replicas, want 1", p.Addr, len(reps))
		}
		if hostOf[reps[0].ID] == hostOf[p.ID] {
			t.Errorf("replica %s shares simulated host %s with its primary", reps[0].Addr, hostOf[p.ID])
		}
	}
	if primaries != 3 {
		t.Fatalf("%d primaries serve slots, want 3", primaries)
	}
	for _, a := range addrs {
		c, _ := e.Conn(a)
		info, err := c.ClusterInfo(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info["cluster_slots_assigned"] != "16384" || info["cluster_known_nodes"] != "6" || info["cluster_size"] != "3" {
			t.Fatalf("%s: cluster info %v", a, info)
		}
	}
	c, _ := e.Conn(addrs[0])
	caps, err := c.Capabilities(ctx)
	if err != nil {
		t.Fatal(err)
	}
	checkCapabilities(t, caps)
	shards, err := c.ClusterShards(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(shards) != 3 || len(shards[0].Nodes) != 2 || shards[0].Nodes[0].Port == 0 || len(shards[0].Slots) == 0 {
		t.Fatalf("CLUSTER SHARDS = %+v", shards)
	}

	kv, err := valkey.DialCluster(addrs, valkey.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Close()
	for i := range 200 {
		if err := kv.Set(ctx, fmt.Sprintf("key-%d", i), strconv.Itoa(i)); err != nil {
			t.Fatalf("SET key-%d: %v", i, err)
		}
	}
	for i := range 200 {
		v, err := kv.Get(ctx, fmt.Sprintf("key-%d", i))
		if err != nil || v != strconv.Itoa(i) {
			t.Fatalf("GET key-%d = %q, %v", i, v, err)
		}
	}
	// A further pass over the formed cluster plans nothing: steady state writes nothing.
	snap, _ = e.Observe(ctx, addrs)
	if p := planner.Compute(d, snap); !p.Converged() {
		t.Fatalf("steady cluster still plans %v (wait %q)", p.Steps, p.Wait)
	}
}

// checkCapabilities compares what the operator detected over the wire with what the test
// knows of the binary it started (its --version): Redis 7.0 has none of the optional
// commands, Valkey 8.0 adds CLUSTER MYSHARDID and SETSLOT's TIMEOUT, Valkey 9.0 atomic
// slot migration.
func checkCapabilities(t *testing.T, caps valkey.Capabilities) {
	t.Helper()
	bin := valkeytest.Bins(t)
	major, _ := bin.Version(t)
	want := valkey.Capabilities{Server: "redis"}
	if bin.Valkey() {
		want = valkey.Capabilities{Server: "valkey", MyShardID: true, SetSlotTimeout: true, MigrateSlots: major >= 9}
	}
	want.Version = caps.Version
	if caps != want || !strings.HasPrefix(caps.Version, strconv.Itoa(major)+".") {
		t.Fatalf("capabilities of %s %d: %+v, want %+v", bin.Name, major, caps, want)
	}
}

// convergeReal runs observe-plan-execute passes over the servers at observe (members and
// removed nodes still running) until the plan is converged and every member reports
// cluster_state:ok. Its 5 minutes are for Valkey 8, which answers a SETSLOT only once the
// primary's replicas acknowledged it: a pass moving 1024 slots takes 20 to 30 s on a
// 2-core machine at load 30 (Redis 7.0: a few seconds).
func convergeReal(ctx context.Context, t testing.TB, e *Executor, d planner.Desired, observe []string) {
	t.Helper()
	passes, steps, began := 0, 0, time.Now()
	testenv.Eventually(t, 5*time.Minute, "cluster converged and cluster_state:ok everywhere", func() (bool, string) {
		passes++
		snap, failed := e.Observe(ctx, observe)
		if len(failed) > 0 {
			return false, fmt.Sprint("unreachable: ", failed)
		}
		p := planner.Compute(d, snap)
		if !p.Converged() {
			n, err := e.Run(ctx, p.Steps)
			steps += n
			return false, fmt.Sprintf("pass %d: %d/%d steps %v, wait %q, err %v", passes, n, len(p.Steps), p.Steps, p.Wait, err)
		}
		for _, m := range d.Members {
			c, err := e.Conn(m.Addr)
			if err != nil {
				return false, err.Error()
			}
			info, err := c.ClusterInfo(ctx)
			if err != nil {
				return false, err.Error()
			}
			if info["cluster_state"] != "ok" {
				return false, m.Addr + " cluster_state:" + info["cluster_state"]
			}
		}
		return true, ""
	})
	t.Logf("%dx%d converged after %d passes, %d steps, %s", d.Shards, d.Replicas, passes, steps, time.Since(began).Round(time.Millisecond))
}

// TestRebalancesRealCluster scales a real 3x1 cluster holding keys out to 4x1 (slots move
// with SETSLOT IMPORTING/MIGRATING, MIGRATE and SETSLOT NODE) and back in to 3x1 (the
// removed primary is drained, then forgotten), reading every key back after each step.
func TestRebalancesRealCluster(t *testing.T) {
	servers := startServers(t, 8)
	var all []planner.Member
	var addrs []string
	for _, s := range servers {
		all = append(all, s.member)
		addrs = append(addrs, s.member.Addr)
	}
	dumpClusterOnFailure(t, addrs)
	// The SETSLOT pipelines in flight at once over every member: a wave runs its members'
	// shares together.
	flight := &inFlight{}
	e := New(func(addr string) (valkey.Conn, error) {
		c, err := valkey.Dial(addr, valkey.Options{})
		if err != nil {
			return nil, err
		}
		return trackedConn{Conn: c, f: flight}, nil
	})
	e.KeyBatch = 50
	defer e.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()

	small := planner.Desired{Shards: 3, Replicas: 1, Members: all[:6], MoveBatch: 1024}
	convergeReal(ctx, t, e, small, addrs[:6])
	kv, err := valkey.DialCluster(addrs[:6], valkey.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Close()
	const keys = 3000
	for i := range keys {
		if err := kv.Set(ctx, fmt.Sprintf("k%d", i), strconv.Itoa(i)); err != nil {
			t.Fatalf("SET k%d: %v", i, err)
		}
	}
	// One slot near the top (the donors give their highest slots away) holds several
	// MIGRATE batches, so a move takes more than one pipelined round.
	hot := hotTag(15500)
	const hotKeys = 230
	for i := range hotKeys {
		if err := kv.Set(ctx, fmt.Sprintf("{%s}%d", hot, i), strconv.Itoa(i)); err != nil {
			t.Fatalf("SET {%s}%d: %v", hot, i, err)
		}
	}
	readAll := func(when string) {
		t.Helper()
		for i := range keys {
			v, err := kv.Get(ctx, fmt.Sprintf("k%d", i))
			if err != nil || v != strconv.Itoa(i) {
				t.Fatalf("%s: GET k%d = %q, %v", when, i, v, err)
			}
		}
		for i := range hotKeys {
			v, err := kv.Get(ctx, fmt.Sprintf("{%s}%d", hot, i))
			if err != nil || v != strconv.Itoa(i) {
				t.Fatalf("%s: GET {%s}%d = %q, %v", when, hot, i, v, err)
			}
		}
	}
	slotsPerPrimary := func(observe []string) []int {
		t.Helper()
		snap, failed := e.Observe(ctx, observe)
		if len(failed) > 0 {
			t.Fatalf("unreachable: %v", failed)
		}
		var out []int
		for _, p := range snap.Views[0].Primaries() {
			if n := p.SlotTotal(); n > 0 {
				out = append(out, n)
			}
		}
		return out
	}

	big := planner.Desired{Shards: 4, Replicas: 1, Members: all, MoveBatch: 1024}
	flight.reset()
	convergeReal(ctx, t, e, big, addrs)
	readAll("after scale-out to 4x1")
	// Each moved slot's SETSLOT NODE goes to the donor and to both other primaries in one
	// wave.
	if most := flight.most(); most < 3 {
		t.Errorf("at most %d members ran SETSLOT pipelines at once during the scale-out, want 3", most)
	}
	if got := slotsPerPrimary(addrs); len(got) != 4 || got[0] != 4096 || got[1] != 4096 || got[2] != 4096 || got[3] != 4096 {
		t.Fatalf("slots per primary after scale-out: %v, want 4 x 4096", got)
	}

	convergeReal(ctx, t, e, small, addrs)
	readAll("after scale-in to 3x1")
	got := slotsPerPrimary(addrs[:6])
	if len(got) != 3 {
		t.Fatalf("slots per primary after scale-in: %v, want 3 primaries", got)
	}
	for _, a := range addrs[:6] {
		c, _ := e.Conn(a)
		info, err := c.ClusterInfo(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info["cluster_known_nodes"] != "6" || info["cluster_slots_assigned"] != "16384" {
			t.Fatalf("%s after scale-in: %v", a, info)
		}
	}
}

// inFlight counts the calls running at once and remembers the most.
type inFlight struct {
	mu        sync.Mutex
	now, high int
}

func (f *inFlight) enter() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now++
	f.high = max(f.high, f.now)
}

func (f *inFlight) leave() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now--
}

func (f *inFlight) most() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.high
}

func (f *inFlight) reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.high = f.now
}

// trackedConn is a real connection whose SETSLOT pipelines inFlight counts.
type trackedConn struct {
	valkey.Conn
	f *inFlight
}

func (c trackedConn) SetSlots(ctx context.Context, cmds ...valkey.SetSlot) (int, error) {
	c.f.enter()
	defer c.f.leave()
	return c.Conn.SetSlots(ctx, cmds...)
}

// hotTag returns a hash tag whose slot is at least min.
func hotTag(min int) string {
	for i := 0; ; i++ {
		tag := "hot" + strconv.Itoa(i)
		if valkey.KeySlot("{"+tag+"}") >= min {
			return tag
		}
	}
}

// TestSetSlotsPipeline: a pipelined SETSLOT run reports how many leading commands
// succeeded and the first refusal.
func TestSetSlotsPipeline(t *testing.T) {
	servers := startServers(t, 1)
	c, err := valkey.Dial(servers[0].member.Addr, valkey.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	n, err := c.SetSlots(context.Background(),
		valkey.SetSlot{Slot: 1, State: valkey.SlotStable},
		valkey.SetSlot{Slot: 2, State: valkey.SlotImporting, NodeID: "0123456789012345678901234567890123456789"},
		valkey.SetSlot{Slot: 3, State: valkey.SlotStable})
	if n != 1 || err == nil {
		t.Fatalf("SetSlots = %d, %v; want 1 and the refusal of slot 2", n, err)
	}
	t.Logf("refused: %v", err)
	// Longer runs go in chunks; the count still runs from the start of the whole run.
	var long []valkey.SetSlot
	for slot := range 2*valkey.SetSlotChunk + 10 {
		long = append(long, valkey.SetSlot{Slot: slot, State: valkey.SlotStable})
	}
	bad := valkey.SetSlotChunk + 3
	long[bad] = valkey.SetSlot{Slot: bad, State: valkey.SlotImporting, NodeID: "0123456789012345678901234567890123456789"}
	if n, err := c.SetSlots(context.Background(), long...); n != bad || err == nil {
		t.Fatalf("SetSlots of %d = %d, %v; want %d and a refusal", len(long), n, err, bad)
	}
	if n, err := c.SetSlots(context.Background(), long[:bad]...); n != bad || err != nil {
		t.Fatalf("SetSlots of %d = %d, %v; want all", bad, n, err)
	}
	// The chunks go over lanes of their own connections; a refusal in a later chunk (on
	// another lane) does not hide the earlier one.
	later := 2*valkey.SetSlotChunk + 1
	long[later] = valkey.SetSlot{Slot: later, State: valkey.SlotImporting, NodeID: "0123456789012345678901234567890123456789"}
	if n, err := c.SetSlots(context.Background(), long...); n != bad || err == nil || !strings.Contains(err.Error(), fmt.Sprintf("SETSLOT %d ", bad)) {
		t.Fatalf("SetSlots of %d with refusals at %d and %d = %d, %v; want %d and its refusal", len(long), bad, later, n, err, bad)
	}
	var many []valkey.SetSlot
	for slot := range valkey.SetSlotLanes * valkey.SetSlotChunk {
		many = append(many, valkey.SetSlot{Slot: slot, State: valkey.SlotStable})
	}
	if n, err := c.SetSlots(context.Background(), many...); n != len(many) || err != nil {
		t.Fatalf("SetSlots of %d = %d, %v; want all", len(many), n, err)
	}
	if got := connectedClients(t, servers[0].member.Addr); got < valkey.SetSlotLanes {
		t.Errorf("%d clients connected after a run of %d chunks, want the %d lanes' connections at least", got, valkey.SetSlotLanes, valkey.SetSlotLanes)
	}
}

// connectedClients asks the server at addr for INFO clients' connected_clients, over a
// connection of its own (counted too).
func connectedClients(t *testing.T, addr string) int {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := nc.Write([]byte("INFO clients\r\n")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 8192)
	var reply strings.Builder
	for {
		if r := reply.String(); strings.Contains(r, "connected_clients:") && strings.Contains(r[strings.Index(r, "connected_clients:"):], "\r\n") {
			break
		}
		n, err := nc.Read(buf)
		if err != nil {
			t.Fatalf("INFO clients on %s: %v (read %q)", addr, err, reply.String())
		}
		reply.Write(buf[:n])
	}
	for _, line := range strings.Split(reply.String(), "\r\n") {
		if v, ok := strings.CutPrefix(line, "connected_clients:"); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("connected_clients %q: %v", v, err)
			}
			return n
		}
	}
	t.Fatalf("no connected_clients in %q", reply.String())
	return 0
}

// TestSetSlotNodeOnAReplicaIsMoot: a member that turned replica while a run of SETSLOT
// NODE was on its way (the source of a scale-in's last slot does: it gave its last slot
// away and follows the new owner) takes its slot map from its primary, so the server's
// refusal there is not a failed pass.
func TestSetSlotNodeOnAReplicaIsMoot(t *testing.T) {
	ctx := context.Background()
	servers := startServers(t, 2)
	addrs := []string{servers[0].member.Addr, servers[1].member.Addr}
	e := New(func(addr string) (valkey.Conn, error) { return valkey.Dial(addr, valkey.Options{}) })
	defer e.Close()
	convergeReal(ctx, t, e, planner.Desired{Shards: 1, Replicas: 1, Members: members(servers)}, addrs)
	snap, _ := e.Observe(ctx, addrs)
	var primary, replica string
	for _, v := range snap.Views {
		if me, ok := v.Myself(); ok && me.Replica {
			replica = v.Addr
		} else if ok {
			primary = me.ID
		}
	}
	if replica == "" || primary == "" {
		t.Fatalf("no primary and replica in %+v", snap.Views)
	}
	c, err := e.Conn(replica)
	if err != nil {
		t.Fatal(err)
	}
	run := []valkey.SetSlot{{Slot: 7, State: valkey.SlotNode, NodeID: primary}, {Slot: 8, State: valkey.SlotNode, NodeID: primary}}
	if n, err := c.SetSlots(ctx, run...); n != len(run) || err != nil {
		t.Fatalf("SetSlots NODE on the replica = %d, %v; want %d applied (moot there) and no error", n, err, len(run))
	}
	// Anything but NODE on a replica is still refused: it would be a plan gone wrong.
	if n, err := c.SetSlots(ctx, valkey.SetSlot{Slot: 7, State: valkey.SlotMigrating, NodeID: primary}); n != 0 || err == nil {
		t.Fatalf("SetSlots MIGRATING on the replica = %d, %v; want the refusal", n, err)
	}
}
