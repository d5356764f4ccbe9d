package executor_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opsuite/suite/services/memgraph-operator/internal/executor"
	"github.com/opsuite/suite/services/memgraph-operator/internal/memgraph"
	"github.com/opsuite/suite/services/memgraph-operator/internal/memgraph/memgraphtest"
	"github.com/opsuite/suite/services/memgraph-operator/internal/planner"
)

// replicaModes is the MAIN's SHOW REPLICAS as name -> mode.
func replicaModes(t *testing.T, ctx context.Context, cl *memgraphtest.Cluster, main string) map[string]string {
	t.Helper()
	s, err := dialer.Dial(ctx, cl.Data[main].Bolt)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close(ctx) }()
	reps, err := s.Replicas(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, r := range reps {
		out[r.Name] = r.Mode
	}
	return out
}

func withMode(w executor.Desired, mode string, except map[string]string) executor.Desired {
	w.Data = slices.Clone(w.Data)
	for i := range w.Data {
		w.Data[i].Mode = mode
		if m, ok := except[w.Data[i].Name]; ok {
			w.Data[i].Mode = m
		}
	}
	return w
}

// TestModesAndSettingsOverBolt: the executor, through neo4j-go-driver against the
// simulator, sets the coordinator settings that differ, then moves a running cluster from
// SYNC to STRICT_SYNC (which Memgraph refuses to mix, so through ASYNC and one handover of
// the MAIN, whose own mode nothing shows) and one replica to ASYNC; the cluster keeps one
// writable MAIN throughout and loses no write.
func TestModesAndSettingsOverBolt(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl, _ := bootstrap(t, ctx, 3, 3)
	want := cl.Desired(nil, nil)
	want.Settings = []planner.Setting{{Name: "instance_down_timeout_sec", Value: "3"}, {Name: "sync_failover_only", Value: "false"}}
	outs := converge(t, ctx, want)
	if q := executed(outs); !slices.Contains(q, `SET COORDINATOR SETTING "instance_down_timeout_sec" TO "3"`) ||
		!slices.Contains(q, `SET COORDINATOR SETTING "sync_failover_only" TO "false"`) || len(q) != 2 {
		t.Errorf("settings pass ran %q", q)
	}
	for id := range cl.Coordinators {
		s, err := dialer.Dial(ctx, cl.Coordinators[id].Bolt)
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.CoordinatorSettings(ctx)
		_ = s.Close(ctx)
		if err != nil || got["instance_down_timeout_sec"] != "3" || got["sync_failover_only"] != "false" {
			t.Errorf("coordinator_%d settings %v, %v", id, got, err)
		}
	}

	write := func(main string) {
		t.Helper()
		s, err := dialer.Dial(ctx, cl.Data[main].Bolt)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = s.Close(ctx) }()
		if _, err := s.Query(ctx, `CREATE (:Person)`); err != nil {
			t.Fatalf("write on MAIN %s: %v", main, err)
		}
	}
	written := 0
	main := last(outs).Main
	write(main)
	written++

	strict := withMode(want, memgraph.ModeStrictSync, nil)
	outs = converge(t, ctx, strict)
	main = last(outs).Main
	modes := replicaModes(t, ctx, cl, main)
	if len(modes) != 2 {
		t.Fatalf("MAIN %s lists replicas %v", main, modes)
	}
	for n, m := range modes {
		if m != memgraph.ModeStrictSync {
			t.Errorf("replica %s is %s after the switch, want STRICT_SYNC", n, m)
		}
	}
	q := executed(outs)
	if !slices.ContainsFunc(q, func(s string) bool { return strings.HasPrefix(s, "DEMOTE INSTANCE") }) {
		t.Errorf("no handover of the SYNC MAIN: %q", q)
	}
	t.Logf("SYNC to STRICT_SYNC: %d passes, %d commands", len(outs), len(q))
	write(main)
	written++

	// One replica ASYNC beside STRICT_SYNC ones: allowed, changed in place.
	var replica string
	for n := range modes {
		replica = n
		break
	}
	outs = converge(t, ctx, withMode(want, memgraph.ModeStrictSync, map[string]string{replica: memgraph.ModeAsync}))
	main = last(outs).Main
	if m := replicaModes(t, ctx, cl, main)[replica]; m != memgraph.ModeAsync && replica != main {
		t.Errorf("%s is %s, want ASYNC", replica, m)
	}
	write(main)
	written++

	for _, d := range want.Data {
		testenvCount(t, ctx, cl.Data[d.Name].Bolt, written)
	}
	if most, _ := memgraphtest.WritableMains(cl.Events()); most > 1 {
		t.Errorf("%d writable MAINs at one instant", most)
	}
}

// testenvCount waits until the instance at addr holds n Person nodes.
func testenvCount(t *testing.T, ctx context.Context, addr string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, err := dialer.Dial(ctx, addr)
		if err == nil {
			rows, qerr := s.Query(ctx, `MATCH (n:Person) RETURN count(n) AS c`)
			_ = s.Close(ctx)
			if qerr == nil && len(rows) == 1 && rows[0]["c"] == int64(n) {
				return
			}
			err = qerr
			if err == nil {
				t.Logf("%s holds %v", addr, rows)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not hold %d nodes: %v", addr, n, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
