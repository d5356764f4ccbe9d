package cluster_test

// Benchmarks of the cluster controller against the real kube-apiserver and real servers
// (valkeytest.Bins), the fleet (fleet_test.go) playing the node controller and the
// kubelet.
// `make bench` runs them at their defaults (a few minutes on a 2-core machine); these
// environment variables make them bigger:
//
//	VALKEY_BENCH_RSS_CLUSTERS    3x0 clusters formed in BenchmarkRSS20Clusters (default 20)
//	VALKEY_BENCH_STEADY_PASSES   annotation-triggered passes in BenchmarkSteadyWrites (default 5)
//	VALKEY_BENCH_STEADY_RESYNCS  15 s resync periods BenchmarkSteadyWrites also sits through (default 1)
//	VALKEY_BENCH_HEAP_PROFILE    file BenchmarkRSS20Clusters writes the live heap to, all clusters Ready
//
// Each op runs in a fresh namespace with its own manager restricted to it, so clusters of
// earlier ops (whose namespaces never go without kube-controller-manager) cost nothing.

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	clustercontroller "github.com/opsuite/suite/services/valkey-operator/internal/controller/cluster"
	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
	"github.com/opsuite/suite/shared/conditions"
	"github.com/opsuite/suite/shared/reconciler"
	"github.com/opsuite/suite/shared/testenv"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// benchEnvInt reads a size from the environment, def when unset.
func benchEnvInt(b *testing.B, name string, def int) int {
	b.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		b.Fatalf("%s=%q: want a non-negative integer", name, v)
	}
	return n
}

// benchController runs the cluster controller over ns only, named operator (its pass
// counter is reconciler.MetricsFor(operator)), and counts the writes it issues to the
// API server (the fleet writes through env.Client, not counted).
func benchController(b *testing.B, f *fleet, operator string) *testenv.WriteCounter {
	b.Helper()
	var writes testenv.WriteCounter
	countWrites := func(o *ctrl.Options) {
		o.NewClient = func(cfg *rest.Config, opts client.Options) (client.Client, error) {
			c, err := client.New(cfg, opts)
			if err != nil {
				return nil, err
			}
			return writes.Wrap(c), nil
		}
	}
	env.StartManager(b, func(mgr ctrl.Manager) error {
		return clustercontroller.Setup(mgr, clustercontroller.Config{
			Operator:        operator,
			Addr:            f.addr,
			BusPort:         f.busPort,
			Options:         func(context.Context, *valkeyv1.ValkeyCluster) (valkey.Options, error) { return valkey.Options{}, nil },
			Poll:            300 * time.Millisecond,
			FailoverTimeout: 30 * time.Second,
		})
	}, testenv.InNamespaces(f.ns), countWrites)
	return &writes
}

func newCluster(ns, name string, shards, replicas int32) *valkeyv1.ValkeyCluster {
	return &valkeyv1.ValkeyCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       valkeyv1.ValkeyClusterSpec{Shards: shards, Replicas: replicas},
	}
}

// retire deletes an op's cluster and stops its servers, so later ops run on a quiet
// machine (its manager, idle without the cluster, stops when the benchmark ends).
func (f *fleet) retire(ctx context.Context, name string) {
	f.t.Helper()
	if err := f.c.Delete(ctx, &valkeyv1.ValkeyCluster{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name}}); err != nil {
		f.t.Errorf("deleting %s: %v", name, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range f.servers {
		s.Stop()
	}
}

func benchForm(b *testing.B, shards, replicas int32) {
	ctx := context.Background()
	var total time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		ns := testenv.NewNamespace(b, env.Client, "vkc-bench-form")
		f := newFleet(b, env.Client, ns)
		benchController(b, f, "valkey-bench-form")
		b.StartTimer()
		began := time.Now()
		if err := env.Client.Create(ctx, newCluster(ns, "f", shards, replicas)); err != nil {
			b.Fatal(err)
		}
		// The fleet starts one server per ValkeyNode as it appears (the pods'
		// start is in the figure, as it is on a real cluster).
		got := waitReady(b, f, "f", 10*time.Minute)
		total += time.Since(began)
		b.StopTimer()
		if got.Status.Shards != shards || got.Status.ReadyShards != shards {
			b.Fatalf("Ready with shards %d ready %d, want %d", got.Status.Shards, got.Status.ReadyShards, shards)
		}
		if n := len(f.seeds()); n != int(shards*(1+replicas)) {
			b.Fatalf("%d servers, want %d", n, shards*(1+replicas))
		}
		f.retire(ctx, "f")
	}
	b.ReportMetric(total.Seconds()/float64(b.N), "s-to-ready")
}

// BenchmarkForm3x1 times a 3x1 cluster from its creation to Ready.
func BenchmarkForm3x1(b *testing.B) { benchForm(b, 3, 1) }

// BenchmarkForm10x2 times a 10x2 cluster (30 servers) from its creation to Ready.
func BenchmarkForm10x2(b *testing.B) { benchForm(b, 10, 2) }

// BenchmarkKilledPrimaryToReady is TestKilledPrimaryRecovers's scenario timed: a primary's
// server killed and its ValkeyNode reported down, the operator promoting its replica
// (ReplicasTakenOver), the server back empty at its old address, the cluster Ready again.
// s-kill-to-promoted is when the replica calls itself a primary owning slots.
func BenchmarkKilledPrimaryToReady(b *testing.B) {
	ctx := context.Background()
	var toPromoted, toReady time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		ns := testenv.NewNamespace(b, env.Client, "vkc-bench-kill")
		f := newFleet(b, env.Client, ns)
		benchController(b, f, "valkey-bench-kill")
		if err := env.Client.Create(ctx, newCluster(ns, "k", 3, 1)); err != nil {
			b.Fatal(err)
		}
		waitReady(b, f, "k", 3*time.Minute)
		victim, peer := "", ""
		for _, pair := range [][2]string{{"k-0-0", "k-0-1"}, {"k-0-1", "k-0-0"}, {"k-1-0", "k-1-1"}, {"k-1-1", "k-1-0"}} {
			if me, ok := myself(ctx, f, pair[0]); ok && me.Primary && me.SlotTotal() > 0 {
				victim, peer = pair[0], pair[1]
				break
			}
		}
		if victim == "" {
			b.Fatal("no primary among the first two shards")
		}
		b.StartTimer()
		killed := time.Now()
		f.down(ctx, victim)
		f.server(victim).Stop()
		// No fleet sync until the takeover: it would report the victim ready again.
		testenv.Eventually(b, 2*time.Minute, peer+" promoted", func() (bool, string) {
			me, ok := myself(ctx, f, peer)
			return ok && me.Primary && me.SlotTotal() > 0, fmt.Sprintf("%s: %+v", peer, me)
		})
		toPromoted += time.Since(killed)
		testenv.Eventually(b, time.Minute, "ReplicasTakenOver recorded", func() (bool, string) {
			got := eventReasons(b, f.c, ns, "k")
			return got[valkeyv1.EventReplicasTakenOver] > 0, describe(got)
		})
		f.server(victim).Wipe()
		waitReady(b, f, "k", 3*time.Minute)
		toReady += time.Since(killed)
		b.StopTimer()
		f.retire(ctx, "k")
	}
	b.ReportMetric(toPromoted.Seconds()/float64(b.N), "s-kill-to-promoted")
	b.ReportMetric(toReady.Seconds()/float64(b.N), "s-kill-to-ready")
}

// myself is a ValkeyNode's server's own entry in CLUSTER NODES.
func myself(ctx context.Context, f *fleet, name string) (valkey.Node, bool) {
	conn, err := valkey.Dial(f.server(name).Addr, valkey.Options{DialTimeout: time.Second})
	if err != nil {
		return valkey.Node{}, false
	}
	defer conn.Close()
	v, err := conn.ClusterNodes(ctx)
	if err != nil {
		return valkey.Node{}, false
	}
	return v.Myself()
}

// passes is how many reconcile passes the operator's controller has finished.
func passes(operator string) float64 {
	m := reconciler.MetricsFor(operator)
	var n float64
	for _, o := range []string{reconciler.OutcomeDone, reconciler.OutcomeRequeued, reconciler.OutcomeFailed, reconciler.OutcomeError} {
		n += m.Count(o)
	}
	return n
}

// eventTotal counts the events in ns, each repeat of a series included.
func eventTotal(b *testing.B, ns string) int {
	b.Helper()
	var list eventsv1.EventList
	if err := env.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		b.Fatalf("listing events: %v", err)
	}
	n := 0
	for _, e := range list.Items {
		n++
		if e.Series != nil && e.Series.Count > 1 {
			n += int(e.Series.Count) - 1
		}
	}
	return n
}

// BenchmarkSteadyWrites counts what a converged 3x1 cluster costs the API server per
// pass: the controller's writes (its client wrapped in a testenv.WriteCounter) and the
// events in the namespace, over passes triggered by touching an annotation (an annotation
// change reconciles) and over VALKEY_BENCH_STEADY_RESYNCS resync periods. Target 0; a
// write fails the benchmark.
func BenchmarkSteadyWrites(b *testing.B) {
	const operator = "valkey-bench-steady"
	touches := benchEnvInt(b, "VALKEY_BENCH_STEADY_PASSES", 5)
	resyncs := benchEnvInt(b, "VALKEY_BENCH_STEADY_RESYNCS", 1)
	ctx := context.Background()
	var writesTotal, eventsTotal, passesTotal float64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		ns := testenv.NewNamespace(b, env.Client, "vkc-bench-steady")
		f := newFleet(b, env.Client, ns)
		writes := benchController(b, f, operator)
		vc := newCluster(ns, "s", 3, 1)
		if err := env.Client.Create(ctx, vc); err != nil {
			b.Fatal(err)
		}
		waitReady(b, f, "s", 3*time.Minute)
		if writes.Count() == 0 {
			b.Fatal("the write counter saw none of the formation's writes: it does not wrap the controller's client")
		}
		// Let the recorder flush the formation's events and the last passes settle: the
		// count starts when nothing has moved for a while.
		var w0, e0, p0 float64
		testenv.Eventually(b, time.Minute, "quiet", func() (bool, string) {
			w, e, p := float64(writes.Count()), float64(eventTotal(b, ns)), passes(operator)
			time.Sleep(2 * time.Second)
			w0, e0, p0 = float64(writes.Count()), float64(eventTotal(b, ns)), passes(operator)
			return w == w0 && e == e0, fmt.Sprintf("writes %v -> %v, events %v -> %v, passes %v -> %v", w, w0, e, e0, p, p0)
		})
		b.StartTimer()
		for j := range touches {
			before := passes(operator)
			patch := fmt.Sprintf(`{"metadata":{"annotations":{"bench.valkey.io/touch":"%d"}}}`, j)
			if err := env.Client.Patch(ctx, vc, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
				b.Fatal(err)
			}
			testenv.Eventually(b, 30*time.Second, "a pass after the annotation", func() (bool, string) {
				return passes(operator) > before, ""
			})
		}
		time.Sleep(time.Duration(resyncs)*15*time.Second + time.Second)
		b.StopTimer()
		// The recorder writes asynchronously: give an event a moment to show.
		time.Sleep(time.Second)
		w, e, p := float64(writes.Count())-w0, float64(eventTotal(b, ns))-e0, passes(operator)-p0
		if p < float64(touches+resyncs) {
			b.Errorf("%v passes, want at least %d (%d touches, %d resyncs)", p, touches+resyncs, touches, resyncs)
		}
		if w != 0 || e != 0 {
			b.Errorf("a converged cluster issued %v writes and %v events over %v passes", w, e, p)
		}
		var cur valkeyv1.ValkeyCluster
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(vc), &cur); err != nil {
			b.Fatal(err)
		}
		if r := conditions.Get(cur.Status.Conditions, valkeyv1.ConditionReady); r == nil || r.Status != metav1.ConditionTrue {
			b.Errorf("cluster not Ready after the measured period: %+v", r)
		}
		writesTotal, eventsTotal, passesTotal = writesTotal+w, eventsTotal+e, passesTotal+p
		f.retire(ctx, "s")
	}
	b.ReportMetric(passesTotal/float64(b.N), "passes")
	b.ReportMetric(writesTotal/passesTotal, "writes/pass")
	b.ReportMetric(eventsTotal/passesTotal, "events/pass")
}

// BenchmarkRSS20Clusters forms VALKEY_BENCH_RSS_CLUSTERS (default 20) 3x0 clusters with
// one controller in this process and reports the process's RSS (VmRSS) and Go heap once
// all are Ready and after a GC, and the same before the first cluster (-idle). The figures
// include the test's own fleet (its clients and per-server bookkeeping), the testenv
// client and the test binary; the servers and the API server are other processes.
func BenchmarkRSS20Clusters(b *testing.B) {
	clusters := benchEnvInt(b, "VALKEY_BENCH_RSS_CLUSTERS", 20)
	ctx := context.Background()
	var rss, heap, rss0, heap0, form float64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		ns := testenv.NewNamespace(b, env.Client, "vkc-bench-rss")
		f := newFleet(b, env.Client, ns)
		benchController(b, f, "valkey-bench-rss")
		r, h := memory(b)
		rss0, heap0 = rss0+r, heap0+h
		b.StartTimer()
		began := time.Now()
		names := make([]string, clusters)
		for j := range names {
			names[j] = fmt.Sprintf("c%d", j)
			if err := env.Client.Create(ctx, newCluster(ns, names[j], 3, 0)); err != nil {
				b.Fatal(err)
			}
		}
		testenv.Eventually(b, 15*time.Minute, fmt.Sprintf("%d clusters Ready", clusters), func() (bool, string) {
			f.sync(ctx)
			var list valkeyv1.ValkeyClusterList
			if err := env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
				return false, err.Error()
			}
			var waiting []string
			for _, c := range list.Items {
				if r := conditions.Get(c.Status.Conditions, valkeyv1.ConditionReady); r == nil || r.Status != metav1.ConditionTrue || r.ObservedGeneration != c.Generation {
					waiting = append(waiting, fmt.Sprintf("%s: %s %s", c.Name, c.Status.Reason, c.Status.Message))
				}
			}
			return len(list.Items) == clusters && len(waiting) == 0, strings.Join(waiting, "\n")
		})
		form += time.Since(began).Seconds()
		b.StopTimer()
		r, h = memory(b)
		rss, heap = rss+r, heap+h
		if path := os.Getenv("VALKEY_BENCH_HEAP_PROFILE"); path != "" {
			writeHeapProfile(b, path)
		}
		for _, name := range names {
			f.retire(ctx, name)
		}
	}
	b.ReportMetric(float64(clusters), "clusters")
	b.ReportMetric(form/float64(b.N), "s-to-all-ready")
	b.ReportMetric(rss/float64(b.N), "MiB-RSS")
	b.ReportMetric(heap/float64(b.N), "MiB-heap")
	// The same with the controller started and no cluster yet: the test's own share.
	b.ReportMetric(rss0/float64(b.N), "MiB-RSS-idle")
	b.ReportMetric(heap0/float64(b.N), "MiB-heap-idle")
}

// writeHeapProfile writes the live heap (after memory's GC) to path, for go tool pprof.
func writeHeapProfile(b *testing.B, path string) {
	b.Helper()
	out, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer out.Close()
	if err := pprof.Lookup("heap").WriteTo(out, 0); err != nil {
		b.Fatal(err)
	}
}

// memory is the process's RSS and live Go heap in MiB, after a GC.
func memory(b *testing.B) (rss, heap float64) {
	b.Helper()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return float64(vmRSS(b)) / (1 << 20), float64(ms.HeapAlloc) / (1 << 20)
}

// vmRSS is this process's resident set size in bytes, from /proc/self/status.
func vmRSS(b *testing.B) int64 {
	b.Helper()
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				b.Fatalf("VmRSS line %q: %v", line, err)
			}
			return kb << 10
		}
	}
	b.Fatal("no VmRSS in /proc/self/status")
	return 0
}
