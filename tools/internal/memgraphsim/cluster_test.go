package memgraphsim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opsuite/suite/shared/testenv"
	"github.com/opsuite/suite/tools/internal/bolt"
)

// simProc is one simulator process run in-process.
type simProc struct {
	opts Options
	srv  *Server
}

// testCluster is 3 coordinators and 2 data instances on loopback, with fast timings.
type testCluster struct {
	t      *testing.T
	ilog   string
	coords []*simProc
	data   []*simProc
}

func fastOptions(dir string) Options {
	return Options{BoltAddress: "127.0.0.1", DataDirectory: dir, LogLevel: "WARNING", DataRecovery: true, RestoreReplication: true,
		InstanceDownTimeout: 1500 * time.Millisecond, HealthCheckInterval: 200 * time.Millisecond,
		RaftHeartbeat: 300 * time.Millisecond, RaftElection: 300 * time.Millisecond, ReplicationTimeout: time.Second, Licensed: true,
		WALEnabled: true, WALFileSize: DefaultWALFileSizeKiB * 1024}
}

func newTestCluster(t *testing.T, coordinators, data int) *testCluster {
	t.Helper()
	root := t.TempDir()
	tc := &testCluster{t: t, ilog: filepath.Join(root, "invariants.jsonl")}
	for i := 1; i <= coordinators; i++ {
		o := fastOptions(filepath.Join(root, fmt.Sprintf("coord%d", i)))
		o.CoordinatorID, o.CoordinatorPort, o.ManagementPort, o.BoltPort = i, testenv.FreePortBelowEphemeral(t), testenv.FreePortBelowEphemeral(t), testenv.FreePortBelowEphemeral(t)
		o.InvariantLog = tc.ilog
		tc.coords = append(tc.coords, &simProc{opts: o})
	}
	for i := range data {
		o := fastOptions(filepath.Join(root, fmt.Sprintf("data%d", i)))
		o.ManagementPort, o.BoltPort = testenv.FreePortBelowEphemeral(t), testenv.FreePortBelowEphemeral(t)
		o.InvariantLog = tc.ilog
		tc.data = append(tc.data, &simProc{opts: o})
	}
	for _, p := range append(append([]*simProc{}, tc.coords...), tc.data...) {
		tc.start(p)
	}
	t.Cleanup(func() {
		for _, p := range append(append([]*simProc{}, tc.coords...), tc.data...) {
			tc.stop(p)
		}
	})
	return tc
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func (tc *testCluster) start(p *simProc) {
	tc.t.Helper()
	srv, err := Start(context.Background(), p.opts, quiet)
	if err != nil {
		tc.t.Fatal(err)
	}
	p.srv = srv
}

func (tc *testCluster) stop(p *simProc) {
	if p.srv != nil {
		_ = p.srv.Close()
		p.srv = nil
	}
}

// conn is a Bolt connection's query side, without the wire.
func (p *simProc) conn() bolt.Conn {
	if p.srv.coord != nil {
		return &coordConn{c: p.srv.coord}
	}
	return &dataConn{d: p.srv.data}
}

func run(t *testing.T, p *simProc, query string) (*bolt.Result, error) {
	t.Helper()
	return p.conn().Run(context.Background(), bolt.Query{Text: query, Mode: "w"})
}

func mustRun(t *testing.T, p *simProc, query string) *bolt.Result {
	t.Helper()
	r, err := run(t, p, query)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return r
}

// mustRunRetrying runs a coordinator write, retried for up to 30 s while the answer is a
// transient one (transientAnswers: a Raft log write that failed, as when a freshly added
// peer is still catching up, or an election under way, as when a loaded host delays the
// heartbeats of a group that just grew); a real client retries it the same way. After a
// transient answer, a doneAnswers one says the earlier attempt took effect.
func mustRunRetrying(t *testing.T, p *simProc, query string) *bolt.Result {
	t.Helper()
	has := func(err error, answers []string) bool {
		return slices.ContainsFunc(answers, func(s string) bool { return strings.Contains(err.Error(), s) })
	}
	deadline := time.Now().Add(30 * time.Second)
	for retried := false; ; retried = true {
		r, err := run(t, p, query)
		if err == nil || (retried && has(err, doneAnswers)) {
			return r
		}
		if !has(err, transientAnswers) || time.Now().After(deadline) {
			t.Fatalf("%s: %v", query, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func wantFailure(t *testing.T, err error, message string) {
	t.Helper()
	var f *bolt.Failure
	if !errors.As(err, &f) || f.Code != bolt.CodeMemgraphError || f.Message != message {
		t.Fatalf("error %v, want FAILURE %q", err, message)
	}
}

func (p *simProc) addr(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

func (tc *testCluster) addCoordinatorQuery(p *simProc) string {
	return fmt.Sprintf(`ADD COORDINATOR %d WITH CONFIG {"bolt_server": %q, "coordinator_server": %q, "management_server": %q}`,
		p.opts.CoordinatorID, p.addr(p.opts.BoltPort), p.addr(p.opts.CoordinatorPort), p.addr(p.opts.ManagementPort))
}

func registerQuery(name string, p *simProc, replicationPort int) string {
	return fmt.Sprintf(`REGISTER INSTANCE %s WITH CONFIG {"bolt_server": %q, "management_server": %q, "replication_server": %q}`,
		name, p.addr(p.opts.BoltPort), p.addr(p.opts.ManagementPort), p.addr(replicationPort))
}

// leader is the coordinator that is the ready leader now, or nil.
func (tc *testCluster) leader() *simProc {
	for _, p := range tc.coords {
		if p.srv != nil && p.srv.coord.ready() {
			return p
		}
	}
	return nil
}

func (tc *testCluster) waitLeader() *simProc {
	tc.t.Helper()
	var l *simProc
	testenv.EventuallyTrue(tc.t, 10*time.Second, "a coordinator leader", func() bool { l = tc.leader(); return l != nil })
	return l
}

// bootstrap forms the Raft group and registers the data instances as instance_<i>, with
// instance_0 MAIN, as the operator would.
func (tc *testCluster) bootstrap() {
	tc.t.Helper()
	l := tc.waitLeader()
	if l != tc.coords[0] {
		tc.t.Fatalf("leader is coordinator %d, want 1 (the only one that bootstraps)", l.opts.CoordinatorID)
	}
	for _, p := range tc.coords {
		mustRunRetrying(tc.t, l, tc.addCoordinatorQuery(p))
	}
	for i, p := range tc.data {
		mustRunRetrying(tc.t, l, registerQuery(fmt.Sprintf("instance_%d", i), p, testenv.FreePortBelowEphemeral(tc.t)))
	}
	mustRunRetrying(tc.t, l, "SET INSTANCE instance_0 TO MAIN")
}

// rows indexes SHOW INSTANCES by name.
func showInstances(t *testing.T, p *simProc) map[string][]any {
	t.Helper()
	r := mustRun(t, p, "SHOW INSTANCES")
	if strings.Join(r.Fields, ",") != "name,bolt_server,coordinator_server,management_server,health,role,last_succ_resp_ms" {
		t.Fatalf("SHOW INSTANCES fields %q", r.Fields)
	}
	out := map[string][]any{}
	for _, row := range r.Records {
		out[row[0].(string)] = row
	}
	return out
}

func count(t *testing.T, p *simProc, label string) int64 {
	t.Helper()
	return mustRun(t, p, "MATCH (n:"+label+") RETURN count(n)").Records[0][0].(int64)
}

func TestClusterBootstrapReplicationAndRefusals(t *testing.T) {
	tc := newTestCluster(t, 3, 2)
	// Coordinators 2 and 3 start without a cluster: no leader until coordinator 1 adds them.
	for _, p := range tc.coords[1:] {
		rows := showInstances(t, p)
		if len(rows) != 1 || rows[fmt.Sprintf("coordinator_%d", p.opts.CoordinatorID)][5] != RoleFollower {
			t.Fatalf("fresh coordinator %d shows %v, want only itself as follower", p.opts.CoordinatorID, rows)
		}
	}
	tc.bootstrap()
	leader := tc.coords[0]

	rows := showInstances(t, leader)
	if len(rows) != 5 {
		t.Fatalf("SHOW INSTANCES has %d rows, want 5: %v", len(rows), rows)
	}
	for name, want := range map[string][2]string{"coordinator_1": {"up", "leader"}, "instance_0": {"up", "main"}, "instance_1": {"up", "replica"}} {
		if rows[name][4] != want[0] || rows[name][5] != want[1] {
			t.Errorf("%s: health/role %v/%v, want %v", name, rows[name][4], rows[name][5], want)
		}
	}
	if rows["coordinator_1"][6] != int64(0) || rows["instance_0"][2] != "" || rows["coordinator_2"][1] != tc.coords[1].addr(tc.coords[1].opts.BoltPort) {
		t.Errorf("unexpected rows %v", rows)
	}
	testenv.EventuallyTrue(t, 5*time.Second, "followers up in SHOW INSTANCES", func() bool {
		r := showInstances(t, leader)
		return r["coordinator_2"][4] == "up" && r["coordinator_3"][4] == "up"
	})

	main, replica := tc.data[0], tc.data[1]
	r := mustRun(t, main, `CREATE (:Person {name: "ann"}), (:Person {name: "bob"}), (:City {name: "Oslo"})`)
	if r.Stats["nodes-created"] != int64(3) {
		t.Fatalf("stats %v", r.Stats)
	}
	// SYNC: the replica has the write once CREATE returned.
	if n := count(t, replica, "Person"); n != 2 {
		t.Fatalf("replica counts %d Person nodes, want 2", n)
	}
	if role := mustRun(t, replica, "SHOW REPLICATION ROLE").Records[0][0]; role != RoleReplica {
		t.Fatalf("replica role %v", role)
	}
	// SHOW STORAGE INFO on each: Memgraph's two columns, the replicated vertex count.
	for _, inst := range []*simProc{main, replica} {
		info := mustRun(t, inst, "SHOW STORAGE INFO")
		got := map[any]any{}
		for _, r := range info.Records {
			got[r[0]] = r[1]
		}
		if !slices.Equal(info.Fields, []string{"storage info", "value"}) || got["vertex_count"] != int64(3) || got["storage_mode"] != "IN_MEMORY_TRANSACTIONAL" {
			t.Errorf("SHOW STORAGE INFO: fields %v, rows %v", info.Fields, got)
		}
	}
	_, err := run(t, replica, `CREATE (:Person {name: "eve"})`)
	wantFailure(t, err, ErrWriteOnReplica)

	lag := mustRun(t, leader, "SHOW REPLICATION LAG")
	if len(lag.Records) != 2 || lag.Records[1][0] != "instance_1" {
		t.Fatalf("lag %v", lag.Records)
	}
	info := lag.Records[1][1].(map[string]any)["memgraph"].(map[string]any)
	if info["num_committed_txns"] != int64(1) || info["num_txns_behind_main"] != int64(0) {
		t.Fatalf("lag of instance_1 %v", info)
	}

	// Property types survive the (JSON) replication stream: an integer is read back as one
	// on the replica, not as a number Bolt cannot pack.
	mustRun(t, main, `CREATE (:Typed {i: 7, f: 1.5})`)
	typed := mustRun(t, replica, "MATCH (n:Typed) RETURN n")
	if len(typed.Records) != 1 {
		t.Fatalf("replica: %d Typed nodes, want 1", len(typed.Records))
	}
	if n, ok := typed.Records[0][0].(bolt.Node); !ok || n.Props["i"] != int64(7) || n.Props["f"] != 1.5 {
		t.Fatalf("replica reads %#v, want a node with i int64(7) and f 1.5", typed.Records[0][0])
	}

	_, err = run(t, leader, "SET INSTANCE instance_1 TO MAIN")
	wantFailure(t, err, ErrMainExists)
	_, err = run(t, leader, "SET INSTANCE nobody TO MAIN")
	wantFailure(t, err, ErrNoSuchInstance)
	_, err = run(t, leader, "REMOVE COORDINATOR 1")
	wantFailure(t, err, "Request for removing coordinator 1 failed because the current leader cannot be removed!")
	_, err = run(t, leader, "UNREGISTER INSTANCE instance_0")
	wantFailure(t, err, ErrUnregisterAliveMain)
	_, err = run(t, leader, "DEMOTE INSTANCE instance_1")
	wantFailure(t, err, "Instance instance_1 is already a replica!")
	_, err = run(t, leader, tc.addCoordinatorQuery(tc.coords[1]))
	wantFailure(t, err, ErrDuplicateCoordinator)
	_, err = run(t, leader, registerQuery("instance_0", tc.data[0], testenv.FreePortBelowEphemeral(t)))
	wantFailure(t, err, ErrDuplicateInstance)
	// A follower forwards mutations; the leader's refusal comes back as Memgraph words it.
	_, err = run(t, tc.coords[2], registerQuery("instance_0", tc.data[0], testenv.FreePortBelowEphemeral(t)))
	wantFailure(t, err, ErrForwardFailed)
	_, err = leader.conn().Run(context.Background(), bolt.Query{Text: "SHOW INSTANCES", InTx: true})
	wantFailure(t, err, ErrCoordinatorInTx)
	_, err = run(t, leader, "MATCH (n) RETURN count(n)")
	wantFailure(t, err, ErrCoordinatorOnly)
	_, err = run(t, leader, "SHOW STORAGE INFO")
	wantFailure(t, err, ErrNoStorage)
	_, err = run(t, main, "SHOW INSTANCES")
	wantFailure(t, err, "Only coordinator can run SHOW INSTANCES.")

	// A follower answers SHOW INSTANCES through the leader.
	if fr := showInstances(t, tc.coords[1]); fr["instance_0"][5] != RoleMain || fr["instance_0"][4] != "up" {
		t.Fatalf("follower's SHOW INSTANCES %v", fr)
	}
	// A follower routes from its own state, which catches up with the leader's commits.
	testenv.EventuallyTrue(t, 5*time.Second, "the follower's routing table", func() bool {
		rt, err := tc.coords[1].conn().Route("")
		return err == nil && len(rt.Routers) == 3 && len(rt.Writers) == 1 && rt.Writers[0] == main.addr(main.opts.BoltPort) &&
			len(rt.Readers) == 1 && rt.TTL == 300
	})

	// DEMOTE leaves the cluster MAIN-less (no failover); SET MAIN then works.
	mustRun(t, leader, "DEMOTE INSTANCE instance_0")
	_, err = run(t, main, `CREATE (:Person)`)
	wantFailure(t, err, ErrWriteOnReplica)
	mustRunRetrying(t, leader, "SET INSTANCE instance_1 TO MAIN")
	mustRun(t, replica, `CREATE (:Person {name: "cid"})`)
	if n := count(t, main, "Person"); n != 3 {
		t.Fatalf("old MAIN, now replica, counts %d Person nodes, want 3", n)
	}

	events := tc.oneMainAtMost()
	if w := MainlessWindows(events, time.Now()); len(w) != 1 {
		t.Fatalf("MAIN-less windows %v, want exactly the one DEMOTE opened", w)
	}
}

// kill stops a process without the clean-shutdown line in the invariant log, as SIGKILL
// would.
func (tc *testCluster) kill(p *simProc) {
	p.srv.ilog.silence()
	tc.stop(p)
}

func TestFailoverToReplicaAndOldMainRejoins(t *testing.T) {
	tc := newTestCluster(t, 3, 2)
	tc.bootstrap()
	leader, oldMain, replica := tc.coords[0], tc.data[0], tc.data[1]
	mustRun(t, oldMain, `CREATE (:Person {name: "ann"}), (:Person {name: "bob"})`)

	killed := time.Now()
	tc.kill(oldMain)
	testenv.EventuallyTrue(t, 10*time.Second, "failover to instance_1", func() bool {
		r := showInstances(t, leader)
		return r["instance_1"][5] == RoleMain && r["instance_1"][4] == "up" && r["instance_0"][4] == "down" && r["instance_0"][5] == "unknown"
	})
	t.Logf("failover took %s (down timeout %s)", time.Since(killed).Round(time.Millisecond), oldMain.opts.InstanceDownTimeout)
	// The old MAIN is now an unreachable SYNC replica: the write commits on the new MAIN
	// and the client hears that a replica did not confirm it, as from Memgraph.
	testenv.EventuallyTrue(t, 5*time.Second, "the new MAIN accepting writes", func() bool {
		_, err := run(t, replica, `CREATE (:Person {name: "cid"})`)
		var f *bolt.Failure
		if errors.As(err, &f) && f.Message == ErrSyncReplica {
			return true
		}
		// Raft names the new MAIN a moment before the promotion reaches it (SHOW
		// INSTANCES reads Raft, as Memgraph's does): until then it is still a replica.
		if err != nil && !strings.Contains(err.Error(), ErrWriteOnReplica) {
			t.Fatalf("write on the new MAIN: %v", err)
		}
		return false
	})
	if n := count(t, replica, "Person"); n != 3 {
		t.Fatalf("new MAIN counts %d Person nodes, want 3", n)
	}

	// The old MAIN restores its role from disk but refuses writes until the coordinators
	// decide; they make it a replica of the new MAIN, which sends it what it missed.
	tc.start(oldMain)
	if _, err := run(t, oldMain, `CREATE (:Person {name: "lost"})`); err == nil {
		t.Fatal("the restarted old MAIN accepted a write before the coordinators confirmed it")
	}
	testenv.EventuallyTrue(t, 10*time.Second, "the old MAIN back as a caught-up replica", func() bool {
		r := showInstances(t, leader)
		return r["instance_0"][5] == RoleReplica && r["instance_0"][4] == "up" && count(t, oldMain, "Person") == 3
	})

	events := tc.oneMainAtMost()
	windows := MainlessWindows(events, time.Now())
	if len(windows) != 1 {
		t.Fatalf("MAIN-less windows %v, want the failover's only", windows)
	}
	t.Logf("MAIN-less window during failover: %s", windows[0].Duration().Round(time.Millisecond))
}

func TestCoordinatorLeaderLossYieldAndRemove(t *testing.T) {
	tc := newTestCluster(t, 3, 1)
	tc.bootstrap()
	first := tc.coords[0]

	tc.kill(first)
	next := tc.waitLeader()
	if rows := showInstances(t, next); rows["instance_0"][5] != RoleMain || rows[first.coordName()][4] != "down" {
		t.Fatalf("new leader's SHOW INSTANCES %v", rows)
	}
	// Raft state survives a restart: coordinator 1 rejoins as a follower with the cluster's state.
	tc.start(first)
	testenv.EventuallyTrue(t, 10*time.Second, "coordinator 1 back with the registered instance", func() bool {
		st := first.srv.coord.fsm.state()
		_, ok := st.instance("instance_0")
		return ok && st.Main == "instance_0"
	})

	// YIELD makes the leader step down and another election happen (the transfer's
	// target normally wins; under load the old leader may win the new term again). The
	// leader is found again first: coordinator 1 rejoining may have started an election,
	// and a coordinator that lost the lead while the command was on its way refuses it
	// (it knows no leader to forward it to): then it goes to the new leader.
	var term uint64
	for attempt := 1; ; attempt++ {
		next = tc.waitLeader()
		term = next.srv.coord.raft.CurrentTerm()
		_, err := run(t, next, "YIELD LEADERSHIP")
		if err == nil {
			break
		}
		if attempt == 5 || !strings.Contains(err.Error(), "is not a leader") {
			t.Fatalf("YIELD LEADERSHIP (attempt %d): %v", attempt, err)
		}
		t.Logf("YIELD LEADERSHIP on %s (attempt %d): %v; again", next.coordName(), attempt, err)
	}
	if next.srv.coord.isLeader() && next.srv.coord.raft.CurrentTerm() == term {
		t.Fatal("the leader is still leading in the same term after YIELD LEADERSHIP")
	}
	testenv.EventuallyTrue(t, 10*time.Second, "a leader of a later term", func() bool {
		l := tc.leader()
		return l != nil && l.srv.coord.raft.CurrentTerm() > term
	})
	l := tc.waitLeader()
	var follower *simProc
	for _, p := range tc.coords {
		if p != l {
			follower = p
			break
		}
	}
	mustRun(t, l, fmt.Sprintf("REMOVE COORDINATOR %d", follower.opts.CoordinatorID))
	if rows := showInstances(t, l); len(rows) != 3 {
		t.Fatalf("after REMOVE COORDINATOR, SHOW INSTANCES has %d rows, want 2 coordinators and 1 instance: %v", len(rows), rows)
	}

	// Two voters left; killing the leader leaves the other without quorum: it names no
	// leader, answers SHOW INSTANCES from its own state and cannot run mutations.
	var last *simProc
	for _, p := range tc.coords {
		if p != l && p != follower {
			last = p
		}
	}
	tc.kill(l)
	testenv.EventuallyTrue(t, 10*time.Second, "the last coordinator to see no leader", func() bool {
		_, id := last.srv.coord.raft.LeaderWithID()
		return id == ""
	})
	rows := showInstances(t, last)
	if len(rows) != 3 || rows["instance_0"][4] != "unknown" || rows["instance_0"][5] != RoleMain || rows[last.coordName()][5] != RoleFollower {
		t.Fatalf("SHOW INSTANCES without quorum %v", rows)
	}
	if _, err := run(t, last, "UNREGISTER INSTANCE instance_0"); err == nil || !strings.Contains(err.Error(), "knows no leader") {
		t.Fatalf("mutation without a leader: %v", err)
	}
	events := tc.events()
	leaders := 0
	for _, e := range events {
		if e.Role == RoleLeader {
			leaders++
		}
	}
	if leaders < 3 {
		t.Fatalf("invariant log has %d leader changes, want at least 3 (bootstrap, after the kill, after YIELD)", leaders)
	}
}

func (p *simProc) coordName() string { return "coordinator_" + strconv.Itoa(p.opts.CoordinatorID) }

// A leader elected while the MAIN misses its health checks (a slow or loaded host) must
// not replace that MAIN before the down timeout: until then it is up and writable, and a
// promotion would leave two MAINs taking writes. The new leader's health view starts
// with no answer from anyone; an entry it has not heard from is not a MAIN "back without
// the current epoch" that a replica is ahead of.
func TestNewLeaderKeepsMainItHasNotHeardFrom(t *testing.T) {
	tc := newTestCluster(t, 3, 2)
	tc.bootstrap()
	main, replica := tc.data[0], tc.data[1]
	mustRun(t, main, `CREATE (:Person {name: "ann"}), (:Person {name: "bob"})`)
	testenv.EventuallyTrue(t, 5*time.Second, "the replica to hold the write", func() bool { return count(t, replica, "Person") == 2 })

	// The MAIN stops answering its management port (health checks fail) but keeps
	// serving Bolt; the leader goes, and its successor starts a fresh health view.
	tc.kill(tc.coords[0])
	main.srv.data.mgmt.Close()
	next := tc.waitLeader()
	next.srv.coord.hmu.Lock()
	ready := next.srv.coord.readySince // its health view counts everyone up from here
	next.srv.coord.hmu.Unlock()
	// A few health-check passes, well inside the down timeout.
	time.Sleep(main.opts.InstanceDownTimeout / 2)
	// Still the MAIN its replica follows: the SYNC replica confirms the write (unless
	// the test ran so late that the down timeout really passed).
	if _, err := run(t, main, `CREATE (:Person {name: "cid"})`); err != nil && time.Since(ready) < main.opts.InstanceDownTimeout {
		t.Errorf("write on the MAIN the new leader has not heard from yet: %v", err)
	}
	ln, err := net.Listen("tcp", main.opts.Addr(main.opts.ManagementPort))
	if err != nil {
		t.Fatal(err)
	}
	main.srv.data.mgmt = serveRPC(ln, main.srv.data.handleManagement)
	back := time.Since(ready)
	// Answering again a health-check interval inside the down timeout, the MAIN was
	// never down: it must still be the MAIN, and no one else ever was.
	if back < main.opts.InstanceDownTimeout-main.opts.HealthCheckInterval {
		testenv.EventuallyTrue(t, 5*time.Second, "the new leader to see instance_0 as the up MAIN", func() bool {
			r := showInstances(t, next)
			return r["instance_0"][4] == "up" && r["instance_0"][5] == RoleMain
		})
		neverMain(t, tc.events(), "instance_1")
	}
	t.Logf("management port back %s after the new leader was ready (down timeout %s)", back.Round(time.Millisecond), main.opts.InstanceDownTimeout)
	tc.oneMainAtMost()
}

// A MAIN that comes back before the down timeout but without its data (an emptied data
// directory) must not be promoted again: its replicas would copy the empty graph.
func TestMainBackEmptyLosesToUpToDateReplica(t *testing.T) {
	tc := newTestCluster(t, 1, 2)
	tc.bootstrap()
	leader, oldMain := tc.coords[0], tc.data[0]
	mustRun(t, oldMain, `CREATE (:Person {name: "ann"}), (:Person {name: "bob"})`)
	tc.kill(oldMain)
	oldMain.opts.DataRecovery = false
	tc.start(oldMain)
	testenv.EventuallyTrue(t, 10*time.Second, "instance_1 to be MAIN", func() bool {
		r := showInstances(t, leader)
		return r["instance_1"][5] == RoleMain && r["instance_0"][5] == RoleReplica
	})
	testenv.EventuallyTrue(t, 5*time.Second, "the emptied instance to get the graph back", func() bool { return count(t, oldMain, "Person") == 2 })
	if n := count(t, tc.data[1], "Person"); n != 2 {
		t.Fatalf("new MAIN counts %d Person nodes, want 2", n)
	}
	tc.oneMainAtMost()
}

func TestStrictSyncRefusesWhatAReplicaCannotConfirm(t *testing.T) {
	tc := newTestCluster(t, 1, 3)
	l := tc.waitLeader()
	mustRunRetrying(t, l, tc.addCoordinatorQuery(tc.coords[0]))
	for i, p := range tc.data[:2] {
		mustRun(t, l, strings.Replace(registerQuery(fmt.Sprintf("instance_%d", i), p, testenv.FreePortBelowEphemeral(t)), " WITH CONFIG", " AS STRICT_SYNC WITH CONFIG", 1))
	}
	_, err := run(t, l, registerQuery("instance_2", tc.data[2], testenv.FreePortBelowEphemeral(t)))
	if err == nil || !strings.Contains(err.Error(), ErrStrictSyncAndSync) {
		t.Fatalf("registering a SYNC replica beside STRICT_SYNC ones: %v", err)
	}
	mustRunRetrying(t, l, "SET INSTANCE instance_0 TO MAIN")
	main := tc.data[0]
	mustRun(t, main, `CREATE (:Person)`)
	if n := count(t, tc.data[1], "Person"); n != 1 {
		t.Fatalf("STRICT_SYNC replica counts %d, want 1", n)
	}
	tc.kill(tc.data[1])
	_, err = run(t, main, `CREATE (:Person)`)
	wantFailure(t, err, ErrStrictSyncReplica)
	if n := count(t, main, "Person"); n != 1 {
		t.Fatalf("MAIN counts %d Person nodes after a refused STRICT_SYNC write, want 1", n)
	}
	r := mustRun(t, main, "SHOW REPLICAS")
	if len(r.Records) != 1 || r.Records[0][0] != "instance_1" || r.Records[0][2] != "strict_sync" {
		t.Fatalf("SHOW REPLICAS %v", r.Records)
	}
}

func (tc *testCluster) events() []Event {
	tc.t.Helper()
	events, err := ReadInvariantLog(tc.ilog)
	if err != nil {
		tc.t.Fatal(err)
	}
	return events
}

// oneMainAtMost asserts the invariant log never shows two writable MAINs at once and
// that some MAIN existed.
func (tc *testCluster) oneMainAtMost() []Event {
	tc.t.Helper()
	events := tc.events()
	if m := MaxMains(events); m != 1 {
		tc.t.Fatalf("invariant log shows at most %d writable MAINs at once, want exactly 1", m)
	}
	return events
}

// A replica registered again under another replication port moves its listener there.
func TestReRegisterMovesReplicationPort(t *testing.T) {
	tc := newTestCluster(t, 1, 2)
	tc.bootstrap()
	l, main, replica := tc.coords[0], tc.data[0], tc.data[1]
	mustRun(t, l, "UNREGISTER INSTANCE instance_1")
	mustRunRetrying(t, l, registerQuery("instance_1", replica, testenv.FreePortBelowEphemeral(t)))
	mustRun(t, main, `CREATE (:Person)`)
	if n := count(t, replica, "Person"); n != 1 {
		t.Fatalf("replica on its new replication port counts %d, want 1", n)
	}
}

// Explicit transactions on a data instance: writes are seen inside, replicated at COMMIT,
// dropped by ROLLBACK; replication queries are refused inside.
func TestExplicitTransactionsOnDataInstance(t *testing.T) {
	tc := newTestCluster(t, 1, 2)
	tc.bootstrap()
	main, replica := tc.data[0], tc.data[1]
	ctx := context.Background()
	c := main.conn()
	if err := c.Begin("w", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Run(ctx, bolt.Query{Text: `CREATE (:Person), (:Person)`, InTx: true}); err != nil {
		t.Fatal(err)
	}
	r, err := c.Run(ctx, bolt.Query{Text: `MATCH (n:Person) RETURN count(n)`, InTx: true})
	if err != nil || r.Records[0][0] != int64(2) {
		t.Fatalf("count inside the transaction: %v %v", r, err)
	}
	if n := count(t, replica, "Person"); n != 0 {
		t.Fatalf("replica sees %d uncommitted nodes", n)
	}
	_, err = c.Run(ctx, bolt.Query{Text: `SHOW REPLICATION ROLE`, InTx: true})
	wantFailure(t, err, ErrReplicationInTx)
	if _, err := c.Commit(); err != nil {
		t.Fatal(err)
	}
	if n := count(t, replica, "Person"); n != 2 {
		t.Fatalf("replica counts %d after COMMIT, want 2", n)
	}
	if err := c.Begin("w", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Run(ctx, bolt.Query{Text: `CREATE (:Person)`, InTx: true}); err != nil {
		t.Fatal(err)
	}
	if err := c.Rollback(); err != nil {
		t.Fatal(err)
	}
	if n := count(t, main, "Person"); n != 2 {
		t.Fatalf("MAIN counts %d after ROLLBACK, want 2", n)
	}
}

// Every coordinator restarting at once (a cluster brought back) keeps the Raft state: a
// leader is elected among the restarted voters and knows the registration and the MAIN.
func TestAllCoordinatorsRestart(t *testing.T) {
	tc := newTestCluster(t, 3, 2)
	tc.bootstrap()
	for _, p := range tc.coords {
		tc.stop(p)
	}
	for _, p := range tc.coords {
		tc.start(p)
	}
	l := tc.waitLeader()
	testenv.EventuallyTrue(t, 10*time.Second, "the restarted leader's view", func() bool {
		r := showInstances(t, l)
		return len(r) == 5 && r["instance_0"][5] == RoleMain && r["instance_0"][4] == "up" && r["instance_1"][5] == RoleReplica
	})
	mustRun(t, tc.data[0], `CREATE (:Person)`)
	if n := count(t, tc.data[1], "Person"); n != 1 {
		t.Fatalf("replica counts %d, want 1", n)
	}
	tc.oneMainAtMost()
}
