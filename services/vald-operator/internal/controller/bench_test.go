package controller

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	valdv1 "github.com/opsuite/suite/api/vald/v1"
	"github.com/opsuite/suite/services/vald-operator/internal/resources"
	"github.com/opsuite/suite/shared/reconciler"
	"github.com/opsuite/suite/shared/testenv"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// benchRelease is a realistic release: two clusters, both pools, a volume, an ingress.
func benchRelease(ns string, i int) *valdv1.ValdOperatorRelease {
	name := fmt.Sprintf("vor-%04d", i)
	return &valdv1.ValdOperatorRelease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: valdv1.ValdOperatorReleaseSpec{
			Infrastructure: []valdv1.Infrastructure{{
				Role: "green", Active: ptr.To(true),
				Clusters: []valdv1.Cluster{{Name: name + "-a", ID: "a"}, {Name: name + "-b", ID: "b"}},
				NodePools: valdv1.NodePools{
					General: &valdv1.NodePool{Replicas: 3, MachineResource: valdv1.MachineResource{CPU: "4", Memory: "16Gi"}},
					Agent:   &valdv1.NodePool{Replicas: 6, MachineResource: valdv1.MachineResource{CPU: "8", Memory: "32Gi"}},
				},
			}},
			VectorEngine: valdv1.VectorEngine{Name: "vald", Vald: valdv1.Vald{
				Defaults: valdv1.Defaults{LogLevel: "warn"},
				Agent: valdv1.Agent{
					NGT:              valdv1.NGT{Dimension: 768, DistanceType: "l2", ObjectType: "float", CreationEdgeSize: 20, SearchEdgeSize: 10},
					PersistentVolume: &valdv1.PersistentVolume{Enabled: true},
				},
				Indexer:    valdv1.Indexer{Manager: true, Concurrency: 2, IndexDuration: "1h", SaveDuration: "1h"},
				Gateway:    valdv1.Gateway{IndexReplica: 3, Ingress: &valdv1.Ingress{Enabled: true, Host: "vald.example.com"}},
				Discoverer: valdv1.Discoverer{Kind: "DaemonSet"},
			}},
		},
	}
}

// parallel runs f(0..n-1) on workers goroutines and returns the first error.
func parallel(n, workers int, f func(i int) error) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		next  = make(chan int)
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}

func memoryMiB() (rss, heap float64) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	heap = float64(ms.HeapInuse) / (1 << 20)
	status, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			kb, _ := strconv.ParseFloat(strings.Fields(line)[1], 64)
			rss = kb / 1024
		}
	}
	return rss, heap
}

// BenchmarkConverge creates VALD_BENCH_N releases of two clusters each at once and measures
// the time until all are Completed, next to the time the API server takes to create the
// same ValdReleases directly (the floor); then the writes of a full resync once converged
// (target 0) and the memory of the process that runs the controller. Run once:
//
//	VALD_BENCH_N=1000 go test ./internal/controller -run '^$' -bench Converge -benchtime 1x
//
// VALD_BENCH_WORKERS sets the concurrency of both the controller and the floor;
// VALD_BENCH_QPS the client rate limit of both (0 turns it off).
func BenchmarkConverge(b *testing.B) {
	n := envInt("VALD_BENCH_N", 100)
	workers := envInt("VALD_BENCH_WORKERS", 8)
	qps, _ := strconv.Atoi(os.Getenv("VALD_BENCH_QPS"))
	cfg := *env.Config
	cfg.QPS, cfg.Burst = -1, 0 // unlimited unless VALD_BENCH_QPS is set
	if qps > 0 {
		cfg.QPS, cfg.Burst = float32(qps), qps*2
	}
	direct, err := client.New(&cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	opts := DefaultOptions()
	opts.MaxConcurrentReconciles = workers
	opts.RequeueAfter = 5 * time.Second
	opts.RequireDeployed = false // no Vald Helm Operator: measures the operator's own writes

	for range b.N {
		// The floor: the same ValdReleases, created directly.
		floorNS := newNamespace(b)
		var vrs []*valdv1.ValdRelease
		for i := range n {
			vor := benchRelease(floorNS, i)
			vor.UID = types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", i))
			built, err := resources.DesiredValdReleases(resources.Input{Release: vor}, opts.Build)
			if err != nil {
				b.Fatal(err)
			}
			vrs = append(vrs, built...)
		}
		began := time.Now()
		if err := parallel(len(vrs), workers, func(i int) error { return direct.Create(ctx, vrs[i]) }); err != nil {
			b.Fatal(err)
		}
		floor := time.Since(began)

		// The controller, in this process, with its own manager.
		ns := newNamespace(b)
		writes := &testenv.WriteCounter{}
		o := opts
		o.wrapClient = writes.Wrap
		mgr, err := ctrl.NewManager(&cfg, ctrl.Options{
			Scheme:  env.Scheme,
			Metrics: metricsserver.Options{BindAddress: "0"},
			Cache:   cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}},
			// Every iteration registers the controller again in this process.
			Controller: config.Controller{SkipNameValidation: ptr.To(true)},
		})
		if err != nil {
			b.Fatal(err)
		}
		r, err := SetupWithManager(mgr, o)
		if err != nil {
			b.Fatal(err)
		}
		mctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- mgr.Start(mctx) }()
		mgr.GetCache().WaitForCacheSync(mctx)
		rssBefore, _ := memoryMiB()

		began = time.Now()
		if err := parallel(n, workers, func(i int) error { return direct.Create(ctx, benchRelease(ns, i)) }); err != nil {
			b.Fatal(err)
		}
		created := time.Since(began)
		for {
			// Count from the manager's cache: polling the API server for 1,000 releases
			// would load it more than the controller does.
			list := &valdv1.ValdOperatorReleaseList{}
			if err := mgr.GetCache().List(ctx, list, client.InNamespace(ns)); err != nil {
				b.Fatal(err)
			}
			completed := 0
			for _, v := range list.Items {
				if v.Status.State == "Ready" && v.Status.Phase == valdv1.ConditionCompleted {
					completed++
				}
			}
			if completed == n {
				break
			}
			if time.Since(began) > 30*time.Minute {
				b.Fatalf("%d of %d releases Completed after 30 minutes", completed, n)
			}
			time.Sleep(100 * time.Millisecond)
		}
		converged := time.Since(began)
		convergeWrites := writes.Count()

		// Quiesce, then a full resync: every release reconciled once more.
		for last := int64(-1); last != writes.Count(); {
			last = writes.Count()
			time.Sleep(2 * time.Second)
		}
		before := writes.Count()
		resyncBegan := time.Now()
		if err := parallel(n, workers, func(i int) error {
			_, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: fmt.Sprintf("vor-%04d", i)}})
			return err
		}); err != nil {
			b.Fatal(err)
		}
		resync := time.Since(resyncBegan)
		resyncWrites := writes.Count() - before
		rss, heap := memoryMiB()

		cancel()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		b.Logf("reconcile passes: done %.0f, requeued %.0f, failed %.0f, error %.0f",
			r.pass.Metrics().Count(reconciler.OutcomeDone), r.pass.Metrics().Count(reconciler.OutcomeRequeued),
			r.pass.Metrics().Count(reconciler.OutcomeFailed), r.pass.Metrics().Count(reconciler.OutcomeError))
		b.ReportMetric(float64(n), "releases")
		b.ReportMetric(floor.Seconds(), "floor-s")
		b.ReportMetric(created.Seconds(), "create-vor-s")
		b.ReportMetric(converged.Seconds(), "converge-s")
		b.ReportMetric(float64(convergeWrites)/float64(n), "writes/release")
		b.ReportMetric(float64(resyncWrites), "resync-writes")
		b.ReportMetric(resync.Seconds()*1000, "resync-ms")
		b.ReportMetric(rss, "rss-MiB")
		b.ReportMetric(rss-rssBefore, "rss-growth-MiB")
		b.ReportMetric(heap, "heap-MiB")
		b.Logf("%d releases (%d ValdReleases), %d workers, client QPS %v: floor %s, controller %s (vor creation %s), %.1f writes per release, %d writes on a converged resync of %s, RSS %.0f MiB (+%.0f), heap %.0f MiB",
			n, 2*n, workers, cfg.QPS, floor.Round(time.Millisecond), converged.Round(time.Millisecond), created.Round(time.Millisecond),
			float64(convergeWrites)/float64(n), resyncWrites, resync.Round(time.Millisecond), rss, rss-rssBefore, heap)
	}
}
