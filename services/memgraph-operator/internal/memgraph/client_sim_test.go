package memgraph_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/neo4j/neo4j-go-driver/v5/neo4j"
	"github.com/opsuite/suite/services/memgraph-operator/internal/memgraph"
	"github.com/opsuite/suite/services/memgraph-operator/internal/memgraph/memgraphtest"
)

// TestClientAgainstSimulator drives the real driver against simulator processes: admin
// commands autocommit, rows parsed, refusals classified with Memgraph's message kept,
// an unreachable address told apart.
func TestClientAgainstSimulator(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := memgraphtest.NewCluster(t)
	coord := cl.StartCoordinator(1)
	// A name only valid quoted (a cluster whose name starts with a digit): the builders
	// backtick it, and SHOW INSTANCES gives it back as registered.
	const name = "1demo_data_0"
	data := cl.StartData(name)
	dialer := memgraph.NewDialer(memgraph.Options{Timeout: 3 * time.Second})

	c, err := dialer.Dial(ctx, coord.Bolt)
	if err != nil {
		t.Fatalf("dial coordinator: %v", err)
	}
	defer func() { _ = c.Close(ctx) }()
	if c.Addr() != coord.Bolt {
		t.Errorf("Addr() = %q", c.Addr())
	}
	rows := waitFor(t, ctx, func() ([]memgraph.Instance, bool) {
		rows, err := c.ShowInstances(ctx)
		if err != nil {
			t.Fatalf("SHOW INSTANCES: %v", err)
		}
		_, ok := memgraph.LeaderOf(rows)
		return rows, ok
	})
	if len(rows) != 1 || rows[0].Name != "coordinator_1" || rows[0].Role != memgraph.RoleLeader {
		t.Fatalf("fresh coordinator_1 shows %+v, want itself as leader", rows)
	}

	steps := []string{
		memgraph.AddCoordinator(1, coord.Bolt, coord.Coord, coord.Mgmt),
		memgraph.RegisterInstance(name, "", data.Bolt, data.Mgmt, data.Repl),
		memgraph.SetInstanceToMain(name),
	}
	for _, q := range steps {
		if err := c.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	rows, err = c.ShowInstances(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := memgraph.MainOf(rows); !ok || m.Name != name || m.BoltServer != data.Bolt || !m.Up() {
		t.Fatalf("after SET MAIN: %+v", rows)
	}
	if rows[0].BoltServer != coord.Bolt || rows[0].CoordinatorServer != coord.Coord {
		t.Errorf("coordinator row %+v does not show the added config", rows[0])
	}

	// Refusals keep Memgraph's message and are classified.
	for q, want := range map[string]memgraph.Refusal{
		memgraph.SetInstanceToMain(name):                                memgraph.RefusalMainExists,
		memgraph.DemoteInstance("nope"):                                 memgraph.RefusalNoSuchInstance,
		memgraph.UnregisterInstance(name):                               memgraph.RefusalAliveMain,
		memgraph.RemoveCoordinator(1):                                   memgraph.RefusalLeaderRemoval,
		memgraph.RegisterInstance(name, "", "a:1", "b:2", "c:3"):        memgraph.RefusalInstanceExists,
		memgraph.AddCoordinator(1, coord.Bolt, coord.Coord, coord.Mgmt): memgraph.RefusalCoordinatorExists,
		"CREATE (:X)": memgraph.RefusalCoordinatorOnly,
	} {
		err := c.Exec(ctx, q)
		var e *memgraph.Error
		if !errors.As(err, &e) || e.Kind != memgraph.KindRefused || e.Message == "" {
			t.Errorf("%s: got %v, want a refusal", q, err)
			continue
		}
		if got := e.Refusal(); got != want {
			t.Errorf("%s: refusal %v (%q), want %v", q, got, e.Message, want)
		}
	}

	// The data instance: writes through the MAIN, rows back, its role.
	d, err := dialer.Dial(ctx, data.Bolt)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = d.Close(ctx) }()
	if err := d.Exec(ctx, `CREATE (:Probe {k: "v"}), (:Probe {k: "w"})`); err != nil {
		t.Fatalf("CREATE on the MAIN: %v", err)
	}
	got, err := d.Query(ctx, "MATCH (n:Probe) RETURN count(n) AS c")
	if err != nil || len(got) != 1 || got[0]["c"] != int64(2) {
		t.Fatalf("count: %v %v", got, err)
	}
	if role, err := d.ReplicationRole(ctx); err != nil || role != memgraph.RoleMain {
		t.Errorf("SHOW REPLICATION ROLE = %q, %v", role, err)
	}
	if err := d.Exec(ctx, memgraph.ShowInstancesQuery); memgraph.RefusalOf(err) != memgraph.RefusalNotCoordinator {
		t.Errorf("SHOW INSTANCES on a data instance: %v", err)
	}
	lag, err := c.ReplicationLag(ctx)
	if err != nil || len(lag) == 0 || lag[0].Instance != name {
		t.Errorf("SHOW REPLICATION LAG = %+v, %v", lag, err)
	}

	// An address nobody listens on is unreachable, not refused.
	cl.Stop(data)
	_, err = dialer.Dial(ctx, data.Bolt)
	if !memgraph.IsUnreachable(err) {
		t.Errorf("dial of a stopped instance: %v, want unreachable", err)
	}
}

func waitFor[T any](t *testing.T, ctx context.Context, f func() (T, bool)) T {
	t.Helper()
	for {
		v, ok := f()
		if ok {
			return v
		}
		select {
		case <-ctx.Done():
			t.Fatalf("timed out; last %+v", v)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// TestClientAuth: with MEMGRAPH_USER/MEMGRAPH_PASSWORD set, a dial without (or with
// wrong) credentials is Unauthenticated, never Unreachable; the right ones work.
func TestClientAuth(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := memgraphtest.NewCluster(t)
	cl.ExtraEnv = []string{"MEMGRAPH_USER=admin", "MEMGRAPH_PASSWORD=s3cret"}
	data := cl.StartData("d_0")
	for _, o := range []memgraph.Options{{}, {Username: "admin", Password: "wrong"}} {
		_, err := memgraph.NewDialer(o).Dial(ctx, data.Bolt)
		if !memgraph.IsUnauthenticated(err) {
			t.Errorf("dial as %q: %v, want unauthenticated", o.Username, err)
		}
	}
	s, err := memgraph.NewDialer(memgraph.Options{Username: "admin", Password: "s3cret"}).Dial(ctx, data.Bolt)
	if err != nil {
		t.Fatalf("dial with the right credentials: %v", err)
	}
	defer func() { _ = s.Close(ctx) }()
	if _, err := s.Query(ctx, "MATCH (n) RETURN count(n) AS c"); err != nil {
		t.Errorf("query as admin: %v", err)
	}
}

// TestDriverRoutingAgainstSimulator: the unmodified driver's routing (neo4j://) against a
// coordinator: ROUTE names the MAIN for writes and the replica for reads, and each query
// is answered where the routing table says.
func TestDriverRoutingAgainstSimulator(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := memgraphtest.NewCluster(t)
	coord := cl.StartCoordinator(1)
	main, replica := cl.StartData("d_0"), cl.StartData("d_1")
	c, err := memgraph.NewDialer(memgraph.Options{Timeout: 3 * time.Second}).Dial(ctx, coord.Bolt)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close(ctx) }()
	waitFor(t, ctx, func() ([]memgraph.Instance, bool) {
		rows, err := c.ShowInstances(ctx)
		if err != nil {
			t.Fatalf("SHOW INSTANCES: %v", err)
		}
		_, ok := memgraph.LeaderOf(rows)
		return rows, ok
	})
	for _, q := range []string{
		memgraph.AddCoordinator(1, coord.Bolt, coord.Coord, coord.Mgmt),
		memgraph.RegisterInstance("d_0", "", main.Bolt, main.Mgmt, main.Repl),
		memgraph.RegisterInstance("d_1", "", replica.Bolt, replica.Mgmt, replica.Repl),
		memgraph.SetInstanceToMain("d_0"),
	} {
		if err := c.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}

	driver, err := neo4j.NewDriverWithContext("neo4j://"+coord.Bolt, neo4j.NoAuth())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = driver.Close(ctx) }()
	run := func(mode neo4j.AccessMode, query string) (int64, string) {
		t.Helper()
		s := driver.NewSession(ctx, neo4j.SessionConfig{AccessMode: mode})
		defer func() { _ = s.Close(ctx) }()
		res, err := s.Run(ctx, query, nil)
		if err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		var n int64
		if res.Next(ctx) {
			n, _ = res.Record().Values[0].(int64)
		}
		sum, err := res.Consume(ctx)
		if err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		return n, sum.Server().Address()
	}
	if _, at := run(neo4j.AccessModeWrite, "CREATE (:Routed {n: 1})"); at != main.Bolt {
		t.Errorf("the write was routed to %s, want the MAIN %s", at, main.Bolt)
	}
	var n int64
	var at string
	for range 50 { // SYNC: the replica has it once the write returned; allow a retry
		if n, at = run(neo4j.AccessModeRead, "MATCH (n:Routed) RETURN count(n)"); n == 1 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n != 1 || at != replica.Bolt {
		t.Errorf("the read counted %d at %s, want 1 at the replica %s", n, at, replica.Bolt)
	}
}
