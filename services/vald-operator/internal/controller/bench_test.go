package controller

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
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

	valdv1 "github.com/opsuite/suite/api/vald/v1"
	"github.com/opsuite/suite/services/vald-operator/internal/resources"
	"github.com/opsuite/suite/shared/testenv"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
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

// benchCluster is where the benchmark runs: the test API server, or, with
// VALD_BENCH_KUBECONFIG, the cluster that kubeconfig names (the local cluster of `make up`,
// with its controller-manager, scheduler and simulated nodes), which must have the
// ValdOperatorRelease and ValdRelease CRDs and no vald-operator of its own running.
type benchCluster struct {
	cfg        *rest.Config
	kubeconfig string
	// external: not the test API server; the CPU shares then count the cluster's
	// control-plane processes wherever they run, not this process's children.
	external bool
}

func targetCluster(b *testing.B) benchCluster {
	path := os.Getenv("VALD_BENCH_KUBECONFIG")
	if path == "" {
		return benchCluster{cfg: env.Config, kubeconfig: env.Kubeconfig(b)}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		b.Fatalf("VALD_BENCH_KUBECONFIG: %v", err)
	}
	return benchCluster{cfg: cfg, kubeconfig: path, external: true}
}

// floorClients is the concurrency of the floor: the ValdReleases created directly by 16
// parallel clients, as the issue that set the target measured it.
const floorClients = 16

// BenchmarkConverge measures VALD_BENCH_N releases (default 300) of two clusters each; see
// converge. `make bench` runs it. Larger sizes need go test's -timeout raised:
//
//	VALD_BENCH_N=10000 go test ./internal/controller -run '^$' -bench 'Converge$' -benchtime 1x -timeout 3h
func BenchmarkConverge(b *testing.B) { converge(b, envInt("VALD_BENCH_N", 300)) }

// BenchmarkConverge1000 is the target's size: 1,000 releases, 2,000 ValdReleases (about a
// minute and a half on two cores). Run it alone:
//
//	go test ./internal/controller -run '^$' -bench Converge1000 -benchtime 1x
func BenchmarkConverge1000(b *testing.B) { converge(b, 1000) }

// converge runs the operator binary as its own process, with the chart's defaults (client
// QPS and burst, workers, requeue interval; REQUIRE_DEPLOYED=false since no Vald Helm
// Operator runs here), against the test API server, creates n releases with 16 parallel
// clients and measures the time until all are Completed. In the same run, the floor: the
// same 2n ValdReleases created directly by 16 parallel clients. Reported: both times and
// their ratio, the operator's writes per release as the API server counted them
// (apiserver_request_total: ValdRelease writes and release status writes), writes in the
// 3 s after convergence (target 0), the API server's CPU in the operator's run against
// that of the same writes made directly (apiserver-cpu-x-writes-floor: what the operator's
// watches and events add on the server, which the load of a shared machine moves less than
// the wall times), the CPU seconds of every process of each run against those of the
// writes made directly (cpu-x-writes-floor: this process, etcd, the API server and the
// operator, all on the same cores), and the operator process's RSS (VmRSS once converged, VmHWM its peak). VALD_BENCH_PROFILE=<dir> also saves CPU profiles of the operator and
// the API server taken during the convergence, and the operator's block and mutex
// profiles, for `go tool pprof`. VALD_BENCH_KUBECONFIG=<file> runs it all on the cluster
// that kubeconfig names instead (see benchCluster).
func converge(b *testing.B, n int) {
	bin := operatorBinary(b)
	target := targetCluster(b)
	cfg := *target.cfg
	cfg.QPS, cfg.Burst = -1, 0 // the benchmark's own clients are never the bottleneck
	direct, err := client.New(&cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		b.Fatal(err)
	}
	newNamespace := func(b *testing.B) string {
		ns := testenv.NewNamespace(b, direct, "vor-")
		if target.external {
			// Its objects are deleted as each phase ends; the namespace goes with the run.
			b.Cleanup(func() {
				_ = direct.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
			})
		}
		return ns
	}
	ctx := context.Background()
	profileDir := os.Getenv("VALD_BENCH_PROFILE")

	for range b.N {
		// The floor: the same ValdReleases, created directly; then removed so that the
		// operator, watching every namespace as the chart installs it, does not cache them.
		floorNS := newNamespace(b)
		var vrs []*valdv1.ValdRelease
		for i := range n {
			vor := benchRelease(floorNS, i)
			vor.UID = types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", i))
			built, err := resources.DesiredValdReleases(resources.Input{Release: vor}, resources.DefaultConfig())
			if err != nil {
				b.Fatal(err)
			}
			vrs = append(vrs, built...)
		}
		floorBefore := readAPIServer(b, target)
		began := time.Now()
		if err := parallel(len(vrs), floorClients, func(i int) error { return direct.Create(ctx, vrs[i]) }); err != nil {
			b.Fatal(err)
		}
		floor := time.Since(began)
		floorStats := readAPIServer(b, target).since(floorBefore)
		deleteAllIn(b, direct, floorNS, &valdv1.ValdReleaseList{})
		writesFloor, writesFloorStats, writesFloorCPU := allWritesFloor(b, target, direct, newNamespace, n)

		ns := newNamespace(b)
		watch := releaseWatcher(b, target, ns, n)
		op := startOperator(b, target, bin, ns)
		idleRSS, _ := procMemory(b, op.cmd.Process.Pid)
		before := readAPIServer(b, target)
		opCPU := cpuSeconds(b, op.cmd.Process.Pid)
		cpuBefore := readCPUShares(b, target)

		var profiles sync.WaitGroup
		if profileDir != "" {
			profiles.Add(2)
			go func() {
				defer profiles.Done()
				saveProfile(b, op.pprof+"/debug/pprof/profile?seconds=10", filepath.Join(profileDir, "operator-cpu.pprof"))
			}()
			go func() {
				defer profiles.Done()
				saveAPIServerProfile(b, target, filepath.Join(profileDir, "apiserver-cpu.pprof"))
			}()
		}
		began = time.Now()
		if err := parallel(n, floorClients, func(i int) error { return direct.Create(ctx, benchRelease(ns, i)) }); err != nil {
			b.Fatal(err)
		}
		created := time.Since(began)
		// Half a second a release, at least 30 minutes: far above a converging run's
		// pace (40 ms a release on two busy cores), so only a stuck run hits it.
		limit := max(30*time.Minute, time.Duration(n)*500*time.Millisecond)
		tick := time.NewTicker(time.Second)
	wait:
		for {
			select {
			case <-watch.all:
				break wait
			case err := <-op.done:
				b.Fatalf("the operator exited (%v) with %d of %d releases Completed; its log:\n%s", err, watch.count(), n, op.logTail())
			case <-tick.C:
				if time.Since(began) > limit {
					b.Fatalf("%d of %d releases Completed after %s; operator log:\n%s", watch.count(), n, limit, op.logTail())
				}
			}
		}
		tick.Stop()
		converged := time.Since(began)
		mem := procStatus(b, op.cmd.Process.Pid)
		rss, peak := mem["VmRSS:"], mem["VmHWM:"]
		opCPU = cpuSeconds(b, op.cmd.Process.Pid) - opCPU
		opRunCPU := readCPUShares(b, target).since(cpuBefore)
		opStats := readAPIServer(b, target).since(before)
		writes := opStats.operatorWrites()
		time.Sleep(3 * time.Second)
		idle := readAPIServer(b, target).since(before).operatorWrites() - writes
		profiles.Wait()
		if profileDir != "" {
			for _, p := range []string{"block", "mutex", "heap"} {
				saveProfile(b, op.pprof+"/debug/pprof/"+p, filepath.Join(profileDir, "operator-"+p+".pprof"))
			}
		}
		op.stop(b)
		if n, first := op.errors(); n > 0 {
			b.Logf("the operator logged %d errors; the first: %s", n, first)
		}
		// The next round's operator, or the next -count's, watches every namespace: what
		// this one converged would be in its cache and its initial list.
		deleteAllIn(b, direct, ns, &valdv1.ValdReleaseList{})
		deleteAllIn(b, direct, ns, &valdv1.ValdOperatorReleaseList{})

		ratio := converged.Seconds() / floor.Seconds()
		b.ReportMetric(float64(n), "releases")
		b.ReportMetric(floor.Seconds(), "floor-s")
		b.ReportMetric(writesFloor.Seconds(), "writes-floor-s")
		b.ReportMetric(converged.Seconds()/writesFloor.Seconds(), "x-writes-floor")
		b.ReportMetric(created.Seconds(), "create-vor-s")
		b.ReportMetric(converged.Seconds(), "converge-s")
		b.ReportMetric(ratio, "x-floor")
		b.ReportMetric(writes/float64(n), "writes/release")
		b.ReportMetric(idle, "idle-writes")
		b.ReportMetric(rss, "rss-MiB")
		b.ReportMetric(peak, "peak-rss-MiB")
		b.Logf("floor: %s", floorStats)
		b.Logf("operator (%.1f s CPU): %s", opCPU, opStats)
		b.ReportMetric(opCPU, "operator-cpu-s")
		b.ReportMetric(opStats.cpu/floorStats.cpu, "apiserver-cpu-x-floor")
		b.Logf("the same writes made directly: %s", writesFloorStats)
		b.ReportMetric(opStats.cpu/writesFloorStats.cpu, "apiserver-cpu-x-writes-floor")
		b.Logf("CPU seconds, operator's run: %s; the same writes made directly: %s", opRunCPU, writesFloorCPU)
		b.ReportMetric(opRunCPU.total()/writesFloorCPU.total(), "cpu-x-writes-floor")
		b.Logf("operator memory: %.0f MiB RSS when started; converged: RssAnon %.0f MiB, RssFile %.0f MiB", idleRSS, mem["RssAnon:"], mem["RssFile:"])
		b.Logf("%d releases (%d ValdReleases): floor %s (%d clients), operator %s = %.2fx the floor (vor creation %s), %.2fx the same writes made directly (%s), %.2f writes per release, %.0f writes in the 3 s after, operator RSS %.0f MiB (peak %.0f MiB)",
			n, len(vrs), floor.Round(time.Millisecond), floorClients, converged.Round(time.Millisecond), ratio, created.Round(time.Millisecond),
			converged.Seconds()/writesFloor.Seconds(), writesFloor.Round(time.Millisecond), writes/float64(n), idle, rss, peak)
	}
}

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

// completedStatus is a release's status once Completed, as the operator writes it (one
// merge patch on the status subresource).
var completedStatus = []byte(`{"status":{"phase":"Completed","progressText":"3/3","state":"Ready","observedGeneration":1,"progress":{"total":3,"completed":3},"conditions":[` +
	`{"type":"WaitingClusterCreate","status":"True","reason":"Succeeded","message":"Every cluster of the active infrastructure entries has an id and a name.","lastTransitionTime":"2026-01-01T00:00:00Z","observedGeneration":1},` +
	`{"type":"WaitingCreateVrs","status":"True","reason":"Succeeded","message":"Every ValdRelease exists with the current generation.","lastTransitionTime":"2026-01-01T00:00:00Z","observedGeneration":1},` +
	`{"type":"Completed","status":"True","reason":"Succeeded","message":"Every phase succeeded.","lastTransitionTime":"2026-01-01T00:00:00Z","observedGeneration":1}]}}`)

// allWritesFloor is the floor of every write convergence is made of, with no operator:
// 16 parallel clients each create a release, its two ValdReleases and its Completed
// status, release after release. The floor counts the ValdRelease creates alone;
// the ratio to this one is what the operator adds to the writes it cannot avoid. What it
// wrote is deleted before the operator starts. It returns the time and what the API server
// counted (its CPU, the writes) while they were made, the deletion left out.
func allWritesFloor(b *testing.B, target benchCluster, c client.Client, newNamespace func(*testing.B) string, n int) (time.Duration, apiserverStats, cpuShares) {
	ctx := context.Background()
	ns := newNamespace(b)
	before := readAPIServer(b, target)
	cpuBefore := readCPUShares(b, target)
	var profile sync.WaitGroup
	if dir := os.Getenv("VALD_BENCH_PROFILE"); dir != "" {
		// The API server's work for the same writes with no operator, to set against
		// apiserver-cpu.pprof (the operator's run) with `go tool pprof -diff_base`.
		profile.Go(func() { saveAPIServerProfile(b, target, filepath.Join(dir, "apiserver-cpu-writes-floor.pprof")) })
	}
	began := time.Now()
	err := parallel(n, floorClients, func(i int) error {
		vor := benchRelease(ns, i)
		if err := c.Create(ctx, vor); err != nil {
			return err
		}
		vrs, err := resources.DesiredValdReleases(resources.Input{Release: vor}, resources.DefaultConfig())
		if err != nil {
			return err
		}
		for _, vr := range vrs {
			if err := c.Create(ctx, vr); err != nil {
				return err
			}
		}
		return c.Status().Patch(ctx, vor, client.RawPatch(types.MergePatchType, completedStatus))
	})
	took := time.Since(began)
	cpu := readCPUShares(b, target).since(cpuBefore)
	stats := readAPIServer(b, target).since(before)
	profile.Wait()
	if err != nil {
		b.Fatal(err)
	}
	deleteAllIn(b, c, ns, &valdv1.ValdReleaseList{})
	deleteAllIn(b, c, ns, &valdv1.ValdOperatorReleaseList{})
	return took, stats, cpu
}

// cpuShares is the CPU seconds of the processes a run is made of, by command name: this
// test process (the benchmark's clients and its watch), and the etcd, kube-apiserver and
// operator processes it started. On a machine shared with other work the wall times swing
// with the load; the CPU they take moves much less, and what a run cannot get from the
// two cores is what sets its time once they are busy.
type cpuShares map[string]float64

// readCPUShares reads the CPU seconds of this process and its children; on an external
// cluster, of this process, the operator it started, and the cluster's control plane
// (clusterProcesses, wherever they run; this process's idle test API server left out).
func readCPUShares(b *testing.B, target benchCluster) cpuShares {
	self := os.Getpid()
	out := cpuShares{"benchmark": cpuSeconds(b, self)}
	dirs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		b.Fatal(err)
	}
	for _, dir := range dirs {
		raw, err := os.ReadFile(filepath.Join(dir, "stat"))
		if err != nil {
			continue // gone since the glob
		}
		open, end := bytes.IndexByte(raw, '('), bytes.LastIndexByte(raw, ')')
		if open < 0 || end < 0 || end+2 >= len(raw) {
			continue
		}
		f := strings.Fields(string(raw[end+2:]))
		if len(f) < 13 {
			continue
		}
		name := string(raw[open+1 : end])
		ppid, _ := strconv.Atoi(f[1])
		switch {
		case !target.external && ppid != self:
			continue
		case target.external && ppid == self && name != "vald-operator":
			continue
		case target.external && ppid != self && !clusterProcesses[name]:
			continue
		}
		utime, _ := strconv.ParseFloat(f[11], 64)
		stime, _ := strconv.ParseFloat(f[12], 64)
		out[name] += (utime + stime) / 100
	}
	return out
}

// clusterProcesses are the control plane of the local cluster, by command name (the
// kernel keeps 15 characters of it: kube-controller-manager is "kube-controller").
var clusterProcesses = map[string]bool{
	"etcd": true, "kube-apiserver": true, "kube-controller": true, "kube-scheduler": true,
	"kwok": true, "localcluster": true, // the simulated nodes and the process that runs pods
}

func (c cpuShares) since(before cpuShares) cpuShares {
	out := cpuShares{}
	for k, v := range c {
		if d := v - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

func (c cpuShares) total() float64 {
	var t float64
	for _, v := range c {
		t += v
	}
	return t
}

func (c cpuShares) String() string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.1f", k, c[k]))
	}
	return fmt.Sprintf("%.1f (%s)", c.total(), strings.Join(parts, ", "))
}

// deleteAllIn deletes every object of list's kind in ns, one request each from 16 parallel
// clients: one deletecollection of 20,000 ValdReleases outlasts the API server's request
// timeout.
func deleteAllIn(b *testing.B, c client.Client, ns string, list client.ObjectList) {
	ctx := context.Background()
	if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
		b.Fatal(err)
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		b.Fatal(err)
	}
	if err := parallel(len(items), floorClients, func(i int) error {
		obj, ok := items[i].(client.Object)
		if !ok {
			return fmt.Errorf("%T is not an object", items[i])
		}
		return client.IgnoreNotFound(c.Delete(ctx, obj))
	}); err != nil {
		b.Fatal(err)
	}
}

// operatorBinary builds the operator's command once per test process, as `make build` does.
func operatorBinary(b *testing.B) string {
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "vald-operator-bench-")
		if err != nil {
			buildErr = err
			return
		}
		builtBin = filepath.Join(dir, "vald-operator")
		// As `make build` builds the shipped binary.
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", builtBin, "github.com/opsuite/suite/services/vald-operator/cmd")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		b.Fatal(buildErr)
	}
	return builtBin
}

// operatorProcess is the operator binary running against the test API server.
type operatorProcess struct {
	cmd   *exec.Cmd
	log   *testenv.LogBuffer
	pprof string
	done  chan error
}

// startOperator runs the binary with the chart's arguments and defaults (leader election
// on, JSON logs at info, metrics served), its profiler on a free address, and waits until
// it is ready.
func startOperator(b *testing.B, target benchCluster, bin, leaseNS string) *operatorProcess {
	probe, metrics, pprof := testenv.FreeAddr(b), testenv.FreeAddr(b), testenv.FreeAddr(b)
	cmd := exec.Command(bin, "--kubeconfig="+target.kubeconfig, "--leader-elect=true", "--leader-election-namespace="+leaseNS,
		"--metrics-bind-address="+metrics, "--health-probe-bind-address="+probe, "--log-level=info", "--log-format=json")
	cmd.Env = append(os.Environ(), "REQUIRE_DEPLOYED=false", "PPROF_BIND_ADDRESS="+pprof)
	// The chart's Go runtime settings, as the container gets them.
	for env, value := range chartGoRuntime(b) {
		cmd.Env = append(cmd.Env, env+"="+value)
	}
	op := &operatorProcess{cmd: cmd, log: &testenv.LogBuffer{}, pprof: "http://" + pprof, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = op.log, op.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	go func() { op.done <- cmd.Wait() }()
	testenv.Eventually(b, time.Minute, "the operator to be ready", func() (bool, string) {
		select {
		case err := <-op.done:
			b.Fatalf("the operator exited: %v\n%s", err, op.logTail())
		default:
		}
		resp, err := http.Get("http://" + probe + "/readyz")
		if err != nil {
			return false, err.Error()
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
	return op
}

func (o *operatorProcess) logTail() string {
	s := o.log.String()
	if len(s) > 4000 {
		s = s[len(s)-4000:]
	}
	return s
}

// errors counts the error lines of the operator's log and returns the first.
func (o *operatorProcess) errors() (int, string) {
	n, first := 0, ""
	for _, line := range strings.Split(o.log.String(), "\n") {
		if strings.Contains(line, `"level":"error"`) {
			if n == 0 {
				first = line
			}
			n++
		}
	}
	return n, first
}

func (o *operatorProcess) stop(b *testing.B) {
	_ = o.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-o.done:
		if err != nil {
			b.Fatalf("the operator exited with %v\n%s", err, o.logTail())
		}
	case <-time.After(time.Minute):
		_ = o.cmd.Process.Kill()
		b.Fatalf("the operator did not stop within a minute of SIGTERM\n%s", o.logTail())
	}
}

// chartGoRuntime is the GOMEMLIMIT and GOGC the chart gives the container by default.
func chartGoRuntime(b *testing.B) map[string]string {
	root, err := testenv.RepoRoot()
	if err != nil {
		b.Fatal(err)
	}
	values, err := os.ReadFile(filepath.Join(root, "charts", "vald-operator", "values.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(values), "\n") {
		for key, env := range map[string]string{"goMemLimit:": "GOMEMLIMIT", "goGC:": "GOGC"} {
			if v, ok := strings.CutPrefix(line, key); ok {
				if v = strings.Trim(strings.TrimSpace(v), `"`); v != "" {
					out[env] = v
				}
			}
		}
	}
	return out
}

// completions counts the releases of a namespace seen Completed, from an informer's
// events: waiting for convergence costs one watch and a look at each event, where a
// poll of the cache looked at all n releases every time (at 10,000 releases, 20 polls a
// second took tens of CPU seconds from the cores the operator and the API server share).
type completions struct {
	mu   sync.Mutex
	seen map[string]bool
	n    int
	all  chan struct{} // closed once n are Completed
}

func (c *completions) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seen)
}

func (c *completions) observe(obj any) {
	v, ok := obj.(*valdv1.ValdOperatorRelease)
	if !ok || v.Status.State != "Ready" || v.Status.Phase != valdv1.ConditionCompleted {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen[v.Name] || len(c.seen) >= c.n {
		return
	}
	c.seen[v.Name] = true
	if len(c.seen) == c.n {
		close(c.all)
	}
}

// releaseWatcher is an informer of the releases in ns, counting those Completed until n
// are.
func releaseWatcher(b *testing.B, target benchCluster, ns string, n int) *completions {
	c, err := cache.New(target.cfg, cache.Options{Scheme: env.Scheme, DefaultNamespaces: map[string]cache.Config{ns: {}}})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	go func() { _ = c.Start(ctx) }()
	inf, err := c.GetInformer(ctx, &valdv1.ValdOperatorRelease{})
	if err != nil {
		b.Fatal(err)
	}
	done := &completions{seen: map[string]bool{}, n: n, all: make(chan struct{})}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { done.observe(obj) },
		UpdateFunc: func(_, obj any) { done.observe(obj) },
	}); err != nil {
		b.Fatal(err)
	}
	c.WaitForCacheSync(ctx)
	return done
}

// procMemory reads a process's VmRSS and VmHWM in MiB.
func procMemory(b *testing.B, pid int) (rss, peak float64) {
	m := procStatus(b, pid)
	return m["VmRSS:"], m["VmHWM:"]
}

// procStatus reads the memory lines (kB) of /proc/<pid>/status, in MiB.
func procStatus(b *testing.B, pid int) map[string]float64 {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	m := map[string]float64{}
	for _, line := range strings.Split(string(status), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		if len(f) == 3 && f[2] == "kB" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			m[f[0]] = kb / 1024
		}
	}
	return m
}

// apiserverStats is what the API server's /metrics say of the requests it served: counts
// by "resource[/subresource] VERB" (reads left out) and its own CPU seconds.
type apiserverStats struct {
	writes map[string]float64
	// reads are the lists and watches of the operator's kinds, and the watches the API
	// server ended because their client fell behind (each is a new list or watch).
	reads map[string]float64
	cpu   float64
}

// operatorWrites sums the writes the operator makes: every write on valdreleases and on
// valdoperatorreleases/status.
func (s apiserverStats) operatorWrites() float64 {
	var n float64
	for k, v := range s.writes {
		if strings.HasPrefix(k, "valdreleases ") || strings.HasPrefix(k, "valdoperatorreleases/status ") {
			n += v
		}
	}
	return n
}

// since is s minus an earlier reading.
func (s apiserverStats) since(before apiserverStats) apiserverStats {
	out := apiserverStats{writes: map[string]float64{}, reads: map[string]float64{}, cpu: s.cpu - before.cpu}
	for k, v := range s.writes {
		if d := v - before.writes[k]; d > 0 {
			out.writes[k] = d
		}
	}
	for k, v := range s.reads {
		if d := v - before.reads[k]; d > 0 {
			out.reads[k] = d
		}
	}
	return out
}

func (s apiserverStats) String() string {
	list := func(m map[string]float64) string {
		keys := slices.Sorted(maps.Keys(m))
		parts := make([]string, 0, len(keys))
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s %.0f", k, m[k]))
		}
		return strings.Join(parts, ", ")
	}
	return fmt.Sprintf("API server CPU %.1f s; writes: %s; reads: %s", s.cpu, list(s.writes), list(s.reads))
}

// readAPIServer reads the API server's request counters and CPU time.
func readAPIServer(b *testing.B, target benchCluster) apiserverStats {
	raw, err := kubernetes.NewForConfigOrDie(target.cfg).RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	st := apiserverStats{writes: map[string]float64{}, reads: map[string]float64{}}
	label := func(line, name string) string {
		_, v, ok := strings.Cut(line, name+`="`)
		if !ok {
			return ""
		}
		v, _, _ = strings.Cut(v, `"`)
		return v
	}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		value := func() float64 {
			v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			if err != nil {
				b.Fatalf("apiserver metric %q: %v", line, err)
			}
			return v
		}
		switch {
		case strings.HasPrefix(line, "process_cpu_seconds_total "):
			st.cpu = value()
		case strings.HasPrefix(line, "apiserver_terminated_watchers_total{"):
			st.reads["terminated watches of "+label(line, "resource")] += value()
		case strings.HasPrefix(line, "apiserver_request_total{"):
			verb := label(line, "verb")
			res := label(line, "resource")
			if verb == "LIST" || verb == "WATCH" {
				if res == "valdreleases" || res == "valdoperatorreleases" {
					st.reads[res+" "+verb] += value()
				}
				continue
			}
			if verb == "GET" {
				continue
			}
			if sub := label(line, "subresource"); sub != "" {
				res += "/" + sub
			}
			st.writes[res+" "+verb] += value()
		}
	}
	return st
}

// cpuSeconds is a process's user and system CPU time.
func cpuSeconds(b *testing.B, pid int) float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// Fields after the command name (which may hold spaces): utime and stime are the 12th
	// and 13th, in clock ticks (100 per second on Linux).
	f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+2:]))
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100
}

// saveProfile fetches a pprof profile over HTTP into path.
func saveProfile(b *testing.B, url, path string) {
	resp, err := http.Get(url)
	if err != nil {
		b.Errorf("profile %s: %v", url, err)
		return
	}
	defer func() { _ = resp.Body.Close() }()
	writeProfile(b, resp.Body, path)
}

// saveAPIServerProfile takes a 10 s CPU profile of the test API server (served at
// /debug/pprof, --profiling is on by default) into path.
func saveAPIServerProfile(b *testing.B, target benchCluster, path string) {
	raw, err := kubernetes.NewForConfigOrDie(target.cfg).RESTClient().Get().AbsPath("/debug/pprof/profile").Param("seconds", "10").Timeout(time.Minute).DoRaw(context.Background())
	if err != nil {
		b.Errorf("API server profile: %v", err)
		return
	}
	writeProfile(b, bytes.NewReader(raw), path)
}

func writeProfile(b *testing.B, r io.Reader, path string) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		b.Error(err)
		return
	}
	f, err := os.Create(path)
	if err != nil {
		b.Error(err)
		return
	}
	defer func() { _ = f.Close() }()
	if _, err := io.Copy(f, r); err != nil {
		b.Error(err)
	}
}
