package memgraphsim

import (
	"bytes"
	"errors"
	"fmt"
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

	"github.com/opsuite/suite/shared/testenv"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
	buildDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// simBinary builds cmd/memgraph-sim once per test run.
func simBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		if buildDir, buildErr = os.MkdirTemp("", "memgraph-sim-"); buildErr != nil {
			return
		}
		binPath = filepath.Join(buildDir, "memgraph-sim")
		out, err := exec.Command("go", "build", "-o", binPath, "../../cmd/memgraph-sim").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// proc is one memgraph-sim process.
type proc struct {
	name   string
	args   []string
	env    []string
	cmd    *exec.Cmd
	stderr *bytes.Buffer
	exited chan error
	bolt   string
}

func startProc(t *testing.T, p *proc) {
	t.Helper()
	p.cmd = exec.Command(simBinary(t), p.args...)
	p.cmd.Env = append(os.Environ(), p.env...)
	p.stderr = &bytes.Buffer{}
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.exited = make(chan error, 1)
	go func() { p.exited <- p.cmd.Wait() }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		err := <-p.exited
		if t.Failed() {
			t.Logf("%s (%v) stderr:\n%s", p.name, err, p.stderr.String())
		}
	})
}

func haEnv(extra ...string) []string {
	return append([]string{"MEMGRAPH_ENTERPRISE_LICENSE=test-license", "MEMGRAPH_ORGANIZATION_NAME=test-org",
		"MEMGRAPH_SIM_RAFT_HEARTBEAT=300ms", "MEMGRAPH_SIM_RAFT_ELECTION=300ms", "MEMGRAPH_USER=admin", "MEMGRAPH_PASSWORD=secret"}, extra...)
}

func TestProcessRefusesHAWithoutLicense(t *testing.T) {
	cmd := exec.Command(simBinary(t), "--management-port="+strconv.Itoa(testenv.FreePortBelowEphemeral(t)), "--data-directory="+t.TempDir(), "--bolt-address=127.0.0.1")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), LicenseError) {
		t.Fatalf("exit %v, output %q; want exit 1 with %q", err, out, LicenseError)
	}
}

func dialRetry(t *testing.T, addr string) *boltClient {
	t.Helper()
	var c *boltClient
	testenv.EventuallyTrue(t, 10*time.Second, "Bolt on "+addr, func() bool {
		var err error
		c, err = dialBolt(t, addr, "admin", "secret")
		return err == nil
	})
	return c
}

func mustBolt(t *testing.T, c *boltClient, q string) [][]any {
	t.Helper()
	_, rows, err := c.run(q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return rows
}

// transientAnswers are coordinator refusals a client retries: a Raft write that failed
// or timed out (a peer just added still catching up), an election under way, a peer
// whose process has not opened its port yet.
var transientAnswers = []string{"Please retry the operation", "knows no leader to forward it to", "is unreachable!", ErrForwardFailed}

// doneAnswers, after a transient answer, say the earlier attempt took effect after all (a
// Raft write that timed out still commits).
var doneAnswers = []string{ErrDuplicateCoordinator, ErrDuplicateInstance, ErrMainExists}

// mustBoltRetrying is mustBolt for a coordinator write, retried for up to 30 s while the
// answer is a transient one, as the operator retries it (mustRunRetrying in-process).
func mustBoltRetrying(t *testing.T, c *boltClient, q string) {
	t.Helper()
	has := func(err error, answers []string) bool {
		return slices.ContainsFunc(answers, func(s string) bool { return strings.Contains(err.Error(), s) })
	}
	deadline := time.Now().Add(30 * time.Second)
	for retried := false; ; retried = true {
		_, _, err := c.run(q)
		if err == nil || (retried && has(err, doneAnswers)) {
			return
		}
		if !has(err, transientAnswers) || time.Now().After(deadline) {
			t.Fatalf("%s: %v", q, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestProcessCluster runs the built binary as 3 coordinators and 2 data instances and
// drives them over Bolt as the operator and a client would.
func TestProcessCluster(t *testing.T) {
	root := t.TempDir()
	ilog := filepath.Join(root, "invariants.jsonl")
	common := func(dir string, bolt int) []string {
		return []string{"--bolt-address=127.0.0.1", "--bolt-port=" + strconv.Itoa(bolt), "--data-directory=" + filepath.Join(root, dir),
			"--instance-down-timeout-sec=1", "--log-level=INFO", "--also-log-to-stderr", "--sim-invariant-log=" + ilog,
			"--storage-wal-enabled=true", "--experimental-enabled=high-availability", "--an-unknown-flag=1"}
	}
	var coords, data []*proc
	for id := 1; id <= 3; id++ {
		bolt, coord, mgmt := testenv.FreePortBelowEphemeral(t), testenv.FreePortBelowEphemeral(t), testenv.FreePortBelowEphemeral(t)
		p := &proc{name: fmt.Sprintf("coordinator_%d", id), env: haEnv(), bolt: fmt.Sprintf("127.0.0.1:%d", bolt),
			args: append(common(fmt.Sprintf("c%d", id), bolt), "--coordinator-id="+strconv.Itoa(id), "--coordinator-port="+strconv.Itoa(coord),
				"--coordinator-hostname=localhost", "--management-port="+strconv.Itoa(mgmt))}
		p.args = append(p.args, fmt.Sprintf(`%d|localhost:%d|127.0.0.1:%d`, id, coord, mgmt)) // stripped below
		coords = append(coords, p)
	}
	for i := range 2 {
		bolt, mgmt := testenv.FreePortBelowEphemeral(t), testenv.FreePortBelowEphemeral(t)
		p := &proc{name: fmt.Sprintf("instance_%d", i), env: haEnv(), bolt: fmt.Sprintf("127.0.0.1:%d", bolt),
			args: append(common(fmt.Sprintf("d%d", i), bolt), "--management-port="+strconv.Itoa(mgmt))}
		p.args = append(p.args, fmt.Sprintf("127.0.0.1:%d|127.0.0.1:%d", mgmt, testenv.FreePortBelowEphemeral(t)))
		data = append(data, p)
	}
	// The last argument of each proc is the registration data, not a flag.
	meta := map[*proc]string{}
	for _, p := range append(append([]*proc{}, coords...), data...) {
		meta[p] = p.args[len(p.args)-1]
		p.args = p.args[:len(p.args)-1]
		startProc(t, p)
	}

	c1 := dialRetry(t, coords[0].bolt)
	// Coordinators store no users: any login passes. Data instances hold MEMGRAPH_USER.
	if _, err := dialBolt(t, coords[0].bolt, "admin", "wrong"); err != nil {
		t.Fatalf("a coordinator refused a login: %v", err)
	}
	// Wait for the data instance's Bolt listener too: under load it opens after the
	// coordinator's, and a refused connection is not the refused login checked here.
	dialRetry(t, data[0].bolt)
	if _, err := dialBolt(t, data[0].bolt, "admin", "wrong"); err == nil || !strings.Contains(err.Error(), "Memgraph.ClientError.Security.Unauthenticated") {
		t.Fatalf("wrong password: %v, want Unauthenticated", err)
	}
	testenv.EventuallyTrue(t, 10*time.Second, "coordinator 1 to lead", func() bool {
		rows := mustBolt(t, c1, "SHOW INSTANCE")
		return rows[0][4] == RoleLeader
	})
	for _, p := range coords {
		parts := strings.Split(meta[p], "|")
		mustBoltRetrying(t, c1, fmt.Sprintf(`ADD COORDINATOR %s WITH CONFIG {"bolt_server": %q, "coordinator_server": %q, "management_server": %q}`,
			parts[0], p.bolt, parts[1], parts[2]))
	}
	for i, p := range data {
		// As the operator registers a data instance once its pod is ready: under load a
		// process opens its listeners late, and Memgraph refuses to register an instance it
		// cannot reach.
		dialRetry(t, p.bolt)
		parts := strings.Split(meta[p], "|")
		mustBoltRetrying(t, c1, fmt.Sprintf(`REGISTER INSTANCE instance_%d WITH CONFIG {"bolt_server": %q, "management_server": %q, "replication_server": %q}`,
			i, p.bolt, parts[0], parts[1]))
	}
	mustBoltRetrying(t, c1, "SET INSTANCE instance_0 TO MAIN")

	fields, rows, err := c1.run("SHOW INSTANCES")
	if err != nil || strings.Join(fields, ",") != strings.Join(showInstancesFields, ",") || len(rows) != 5 {
		t.Fatalf("SHOW INSTANCES: %v %v %v", fields, rows, err)
	}
	if rows[1][2] != coordsAddr(meta[coords[1]]) {
		t.Fatalf("coordinator_2's coordinator_server %v, want the registered name %s", rows[1][2], coordsAddr(meta[coords[1]]))
	}

	mainConn, replicaConn := dialRetry(t, data[0].bolt), dialRetry(t, data[1].bolt)
	mustBolt(t, mainConn, `CREATE (:Person {name: "ann", age: 42}), (:Person {name: "bob"})`)
	if n := mustBolt(t, replicaConn, "MATCH (n:Person) RETURN count(n)")[0][0]; n != int64(2) {
		t.Fatalf("replica counts %v Person nodes, want 2", n)
	}
	if _, _, err := replicaConn.run(`CREATE (:Person)`); err == nil || !strings.Contains(err.Error(), ErrWriteOnReplica) {
		t.Fatalf("write on replica: %v", err)
	}
	// Users change on the MAIN only, which replicates them to its replicas.
	if _, _, err := replicaConn.run(`SET PASSWORD FOR admin TO 'x'`); err == nil || !strings.Contains(err.Error(), "Query forbidden on the replica!") {
		t.Fatalf("SET PASSWORD on a replica: %v", err)
	}
	mustBolt(t, mainConn, `SET PASSWORD FOR admin TO 'n3w\'pw'`)
	if _, err := dialBolt(t, data[1].bolt, "admin", `n3w'pw`); err != nil {
		t.Fatalf("the replica refused the MAIN's new password: %v", err)
	}
	if _, err := dialBolt(t, data[1].bolt, "admin", "secret"); err == nil {
		t.Fatal("the replica still takes the old password")
	}
	// Admin queries are refused inside an explicit transaction.
	if err := c1.begin(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c1.run("SHOW INSTANCES"); err == nil || !strings.Contains(err.Error(), ErrCoordinatorInTx) {
		t.Fatalf("SHOW INSTANCES in a transaction: %v", err)
	}

	c2 := dialRetry(t, coords[1].bolt)
	testenv.EventuallyTrue(t, 5*time.Second, "the follower's routing table", func() bool {
		rt, err := c2.route()
		return err == nil && len(rt["ROUTE"]) == 3 && len(rt["WRITE"]) == 1 && rt["WRITE"][0] == data[0].bolt && len(rt["READ"]) == 1
	})
	if _, err := mainConn.route(); err == nil {
		t.Fatal("a data instance answered ROUTE")
	}

	// SIGKILL the MAIN: the coordinators fail over to instance_1.
	if err := data[0].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	testenv.EventuallyTrue(t, 15*time.Second, "failover to instance_1", func() bool {
		rows := mustBolt(t, c1, "SHOW INSTANCES")
		return rows[4][5] == RoleMain && rows[3][4] == "down"
	})
	t.Logf("failover %s after SIGKILL of the MAIN", time.Since(killed).Round(10*time.Millisecond))
	// Raft names the new MAIN a moment before the promotion reaches it.
	testenv.EventuallyTrue(t, 5*time.Second, "instance_1 promoted", func() bool {
		return mustBolt(t, replicaConn, "SHOW REPLICATION ROLE")[0][0] == RoleMain
	})
	wrote := time.Now()
	if _, _, err := replicaConn.run(`CREATE (:Person {name: "cid"})`); err == nil || !strings.Contains(err.Error(), ErrSyncReplica) {
		t.Fatalf("write with the old MAIN, now a SYNC replica, down: %v, want %q", err, ErrSyncReplica)
	}
	if n := mustBolt(t, replicaConn, "MATCH (n:Person) RETURN count(n)")[0][0]; n != int64(3) {
		t.Fatalf("new MAIN counts %v Person nodes, want 3 (an unconfirmed SYNC write still commits)", n)
	}
	t.Logf("write on the new MAIN took %s", time.Since(wrote).Round(10*time.Millisecond))

	// SIGTERM stops the others cleanly.
	termAt := time.Now()
	defer func() { t.Logf("SIGTERM to exit: %s", time.Since(termAt).Round(10*time.Millisecond)) }()
	for _, p := range append(append([]*proc{}, coords...), data[1]) {
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range append(append([]*proc{}, coords...), data[1]) {
		select {
		case err := <-p.exited:
			if err != nil {
				t.Errorf("%s exited with %v after SIGTERM", p.name, err)
			}
			p.exited <- err
		case <-time.After(10 * time.Second):
			t.Errorf("%s still running 10s after SIGTERM", p.name)
		}
	}
	events, err := ReadInvariantLog(ilog)
	if err != nil {
		t.Fatal(err)
	}
	if m := MaxMains(events); m != 1 {
		for _, e := range events {
			t.Logf("%s %+v", e.TS.Format("15:04:05.000000"), e)
		}
		t.Fatalf("invariant log shows %d writable MAINs at once, want 1", m)
	}
}

func coordsAddr(meta string) string { return strings.Split(meta, "|")[1] }
