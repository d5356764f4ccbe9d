package executor_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/opsuite/suite/services/memgraph-operator/internal/executor"
	"github.com/opsuite/suite/services/memgraph-operator/internal/memgraph"
	"github.com/opsuite/suite/services/memgraph-operator/internal/memgraph/memgraphtest"
)

func asUser(c executor.Credentials) memgraph.Dialer {
	return memgraph.NewDialer(memgraph.Options{Username: c.Username, Password: c.Password, Timeout: 3 * time.Second})
}

// authCluster bootstraps 3 coordinators and 2 data instances started with
// MEMGRAPH_USER=admin/MEMGRAPH_PASSWORD=s3cret (as spec.auth sets them on the pods) and
// returns it with the MAIN's process.
func authCluster(t *testing.T, ctx context.Context) (*memgraphtest.Cluster, *memgraphtest.Process, *memgraphtest.Process) {
	t.Helper()
	cl := memgraphtest.NewCluster(t)
	cl.ExtraEnv = []string{"MEMGRAPH_USER=admin", "MEMGRAPH_PASSWORD=s3cret"}
	for id := 1; id <= 3; id++ {
		cl.StartCoordinator(id)
	}
	cl.StartData("d_0")
	cl.StartData("d_1")
	want := cl.Desired(nil, nil)
	// Coordinators store no users: a pass converges whatever it logs in with.
	anon := memgraph.NewDialer(memgraph.Options{Timeout: 3 * time.Second})
	outs := passUntilAs(t, ctx, anon, want, func(o executor.Outcome) bool { return o.Converged })
	assertMembership(t, last(outs), []string{"coordinator_1", "coordinator_2", "coordinator_3"}, []string{"d_0", "d_1"})
	main, replica := cl.Data["d_0"], cl.Data["d_1"]
	if last(outs).Main != "d_0" {
		main, replica = replica, main
	}
	if _, err := anon.Dial(ctx, main.Bolt); !memgraph.IsUnauthenticated(err) {
		t.Fatalf("the MAIN took an anonymous login: %v", err)
	}
	return cl, main, replica
}

// TestBootstrapWithAuth: data instances started with MEMGRAPH_USER refuse an anonymous
// login, coordinators take any (Memgraph's coordinators store no users), so registration
// converges to one MAIN whatever the operator logs in with.
func TestBootstrapWithAuth(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cl, _, _ := authCluster(t, ctx)
	assertOneMainAtATime(t, cl)
}

// logsIn says whether c logs in at addr; a failure other than a refused login fails the test.
func logsIn(t *testing.T, ctx context.Context, addr string, c executor.Credentials) bool {
	t.Helper()
	s, err := asUser(c).Dial(ctx, addr)
	if err == nil {
		_ = s.Close(ctx)
		return true
	}
	if !memgraph.IsUnauthenticated(err) {
		t.Fatalf("login %s at %s: %v", c.Username, addr, err)
	}
	return false
}

// TestCredentialRotation: against simulator processes, a new password in the Secret is
// applied with SET PASSWORD through the last-good credentials, reaches the replica, and
// survives a restart of the MAIN with the old environment; a user rename creates, grants
// and then drops; a second call changes nothing; a change already made (operator killed
// before recording it) is recognised; with both credentials wrong nothing runs.
func TestCredentialRotation(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cl, main, replica := authCluster(t, ctx)
	orig := executor.Credentials{Username: "admin", Password: "s3cret"}

	// Password rotation (the password carries quote and backslash).
	pw := executor.Credentials{Username: "admin", Password: `n3w'p\w`}
	out := executor.SyncCredentials(ctx, asUser, main.Bolt, pw, orig)
	if out.State != executor.CredentialsRotated || out.Working != pw || !slices.Equal(out.Executed, []string{"SET PASSWORD FOR `admin`"}) {
		t.Fatalf("rotation: %+v", out)
	}
	for _, p := range []*memgraphtest.Process{main, replica} {
		if !logsIn(t, ctx, p.Bolt, pw) || logsIn(t, ctx, p.Bolt, orig) {
			t.Fatalf("%s: the new password does not log in, or the old one still does", p.Name)
		}
	}
	if out := executor.SyncCredentials(ctx, asUser, main.Bolt, pw, pw); out.State != executor.CredentialsCurrent || len(out.Executed) != 0 {
		t.Fatalf("steady state: %+v", out)
	}
	// The pod restarts with the old MEMGRAPH_PASSWORD: its store keeps the new one.
	cl.Restart(main)
	if !logsIn(t, ctx, main.Bolt, pw) {
		t.Fatal("the MAIN lost the new password on restart")
	}

	// Rename admin -> ops.
	ops := executor.Credentials{Username: "ops", Password: "0ps-pass"}
	out = executor.SyncCredentials(ctx, asUser, main.Bolt, ops, pw)
	wantCmds := []string{"CREATE USER IF NOT EXISTS `ops`", "SET PASSWORD FOR `ops`", "GRANT ALL PRIVILEGES TO `ops`", "DROP USER `admin`"}
	if out.State != executor.CredentialsRotated || out.Working != ops || !slices.Equal(out.Executed, wantCmds) || out.KeptUser != "" {
		t.Fatalf("rename: %+v", out)
	}
	for _, p := range []*memgraphtest.Process{main, replica} {
		if !logsIn(t, ctx, p.Bolt, ops) || logsIn(t, ctx, p.Bolt, pw) {
			t.Fatalf("%s: ops does not log in, or admin still does", p.Name)
		}
	}

	// Killed after the change, before recording it: the wanted credentials already work.
	again := executor.Credentials{Username: "ops", Password: "third"}
	s, err := asUser(ops).Dial(ctx, main.Bolt)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Exec(ctx, "SET PASSWORD FOR ops TO 'third'"); err != nil {
		t.Fatal(err)
	}
	_ = s.Close(ctx)
	if out := executor.SyncCredentials(ctx, asUser, main.Bolt, again, ops); out.State != executor.CredentialsCurrent || out.Working != again || len(out.Executed) != 0 {
		t.Fatalf("a change made before the record: %+v", out)
	}

	// Both wrong: nothing runs, the state says so.
	out = executor.SyncCredentials(ctx, asUser, main.Bolt, executor.Credentials{Username: "ops", Password: "nope"}, ops)
	if out.State != executor.CredentialsRejected || len(out.Executed) != 0 || !out.Working.Zero() || !memgraph.IsUnauthenticated(out.Err) {
		t.Fatalf("both wrong: %+v", out)
	}
	// The MAIN gone: unreachable, not rejected.
	cl.Stop(main)
	if out := executor.SyncCredentials(ctx, asUser, main.Bolt, again, ops); out.State != executor.CredentialsUnreachable {
		t.Fatalf("MAIN down: %+v", out)
	}
}

func TestQuoting(t *testing.T) {
	if got := executor.QuoteName("a`b"); got != "`a``b`" {
		t.Errorf("QuoteName %s", got)
	}
	if got := executor.QuoteString(`it's \ok`); got != `'it\'s \\ok'` {
		t.Errorf("QuoteString %s", got)
	}
}
