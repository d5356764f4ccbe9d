package executor

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opsuite/suite/services/valkey-operator/internal/planner"
	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
	"github.com/opsuite/suite/services/valkey-operator/internal/valkeytest"
)

// BenchmarkRebalance3To4 measures slot rebalancing from 3 to 4 primaries on real server
// processes (valkeytest.Bins) holding VALKEY_BENCH_KEYS keys (default 20000, so CI runs it
// in seconds): once through the planner and this executor, once with the server's own
// `valkey-cli --cluster rebalance` (redis-cli with VALKEY_SERVER=redis-server) on a
// fresh cluster loaded with the same keys, both moving keys VALKEY_BENCH_PIPELINE (default
// 100) per MIGRATE. It reports keys moved per second for each. The figure for the issue:
//
//	VALKEY_BENCH_KEYS=1000000 go test -run '^$' -bench BenchmarkRebalance3To4 -benchtime 1x -timeout 30m ./internal/executor/
func BenchmarkRebalance3To4(b *testing.B) {
	cli := valkeytest.Bins(b).CLI
	keys := envInt(b, "VALKEY_BENCH_KEYS", 20000)
	pipeline := envInt(b, "VALKEY_BENCH_PIPELINE", 100)
	ctx := context.Background()
	var ours, theirs float64
	for range b.N {
		b.StopTimer()
		e, servers, addrs := loadedCluster(ctx, b, keys)
		e.KeyBatch = pipeline
		big := planner.Desired{Shards: 4, Members: members(servers), MoveBatch: 1024}
		// Joining the 4th member is not timed (the cli's run starts with it met too).
		joinUntilMoving(ctx, b, e, big, addrs)
		b.StartTimer()
		start := time.Now()
		passes := convergeTimed(ctx, b, e, big, addrs)
		took := time.Since(start)
		b.StopTimer()
		moved := dbsize(ctx, b, cli, addrs[3])
		ours = float64(moved) / took.Seconds()
		b.Logf("executor: %d of %d keys moved to the 4th primary in %s over %d passes: %.0f keys/s", moved, keys, took.Round(time.Millisecond), passes, ours)

		e.Close()
		for _, s := range servers {
			s.stop(b)
		}

		e2, servers2, addrs2 := loadedCluster(ctx, b, keys)
		// The cli rebalances onto a member already in the cluster: meet it first.
		if _, err := e2.Run(ctx, []planner.Step{{Op: planner.Meet, On: addrs2[0], Addr: addrs2[3], BusPort: servers2[3].member.BusPort}}); err != nil {
			b.Fatal(err)
		}
		awaitKnown(ctx, b, e2, addrs2, 4)
		b.StartTimer()
		start = time.Now()
		out, err := exec.CommandContext(ctx, cli, "--cluster", "rebalance", addrs2[0], "--cluster-use-empty-masters",
			"--cluster-pipeline", strconv.Itoa(pipeline), "--cluster-yes").CombinedOutput()
		took = time.Since(start)
		b.StopTimer()
		if err != nil {
			b.Fatalf("%s --cluster rebalance: %v\n%s", cli, err, tail(string(out), 2000))
		}
		moved = dbsize(ctx, b, cli, addrs2[3])
		theirs = float64(moved) / took.Seconds()
		b.Logf("%s --cluster rebalance: %d of %d keys moved in %s: %.0f keys/s", filepath.Base(cli), moved, keys, took.Round(time.Millisecond), theirs)
		if moved == 0 {
			b.Fatalf("%s moved nothing:\n%s", cli, tail(string(out), 2000))
		}
		e2.Close()
		for _, s := range servers2 {
			s.stop(b)
		}
	}
	b.ReportMetric(ours, "keys/s")
	b.ReportMetric(theirs, "cli-keys/s")
}

func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		b.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}

func members(servers []*server) []planner.Member {
	var out []planner.Member
	for _, s := range servers {
		out = append(out, s.member)
	}
	return out
}

// loadedCluster starts four servers, forms three primaries out of the first three and
// loads keys into them; the fourth stays empty and unmet.
func loadedCluster(ctx context.Context, b *testing.B, keys int) (*Executor, []*server, []string) {
	b.Helper()
	servers := startServers(b, 4)
	addrs := make([]string, len(servers))
	for i, s := range servers {
		addrs[i] = s.member.Addr
	}
	e := New(func(addr string) (valkey.Conn, error) { return valkey.Dial(addr, valkey.Options{}) })
	small := planner.Desired{Shards: 3, Members: members(servers[:3])}
	convergeTimed(ctx, b, e, small, addrs[:3])
	kv, err := valkey.DialCluster(addrs[:3], valkey.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer kv.Close()
	const chunk = 5000
	value := strings.Repeat("v", 64)
	for lo := 0; lo < keys; lo += chunk {
		var ks, vs []string
		for i := lo; i < min(lo+chunk, keys); i++ {
			ks, vs = append(ks, "key:"+strconv.Itoa(i)), append(vs, value)
		}
		if err := kv.SetMany(ctx, ks, vs); err != nil {
			b.Fatal(err)
		}
	}
	return e, servers, addrs
}

// convergeTimed runs passes until the plan is converged and every member reports
// cluster_state ok, with no time limit but the benchmark's own; it returns the passes.
func convergeTimed(ctx context.Context, b *testing.B, e *Executor, d planner.Desired, observe []string) int {
	b.Helper()
	for pass := 1; ; pass++ {
		snap, failed := e.Observe(ctx, observe)
		if len(failed) > 0 {
			b.Fatalf("unreachable: %v", failed)
		}
		p := planner.Compute(d, snap)
		if p.Converged() {
			ok := true
			for _, v := range snap.Views {
				ok = ok && v.Info.OK()
			}
			if ok {
				return pass
			}
		}
		if _, err := e.Run(ctx, p.Steps); err != nil {
			b.Logf("pass %d: %v", pass, err)
		}
		if os.Getenv("VALKEY_BENCH_TRACE") != "" {
			fmt.Fprintf(os.Stderr, "pass %d: %d steps, wait %q\n", pass, len(p.Steps), p.Wait)
		}
		if len(p.Steps) == 0 {
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// joinUntilMoving runs passes until the next plan would migrate keys.
func joinUntilMoving(ctx context.Context, b *testing.B, e *Executor, d planner.Desired, observe []string) {
	b.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		snap, failed := e.Observe(ctx, observe)
		if len(failed) > 0 {
			b.Fatalf("unreachable: %v", failed)
		}
		p := planner.Compute(d, snap)
		for _, s := range p.Steps {
			if s.Op == planner.MigrateKeys {
				return
			}
		}
		if _, err := e.Run(ctx, p.Steps); err != nil {
			b.Logf("joining: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	b.Fatal("no slot move planned within 60s")
}

func awaitKnown(ctx context.Context, b *testing.B, e *Executor, addrs []string, n int) {
	b.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		snap, _ := e.Observe(ctx, addrs)
		ok := len(snap.Views) == len(addrs)
		for _, v := range snap.Views {
			ok = ok && v.Info.KnownNodes == n && v.Info.OK()
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("members do not all know %d nodes with cluster_state ok after 30s", n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// dbsize asks the cli for the member's key count (the admin Conn has no DBSIZE).
func dbsize(ctx context.Context, b *testing.B, cli, addr string) int {
	b.Helper()
	host, port, _ := strings.Cut(addr, ":")
	out, err := exec.CommandContext(ctx, cli, "-h", host, "-p", port, "DBSIZE").Output()
	if err != nil {
		b.Fatalf("%s DBSIZE on %s: %v", cli, addr, err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		b.Fatalf("%s DBSIZE on %s answered %q", cli, addr, out)
	}
	return n
}
