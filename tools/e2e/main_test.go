package e2e

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/opsuite/suite/shared/testenv"
	"github.com/opsuite/suite/tools/internal/localcluster"
)

// env is what every test uses: set once by TestMain.
var env struct {
	root       string
	kubeconfig string
	// local is set when the suite started the local cluster itself (its process runner
	// runs our pods as processes on this host); nil against E2E_KUBECONFIG.
	local    *localcluster.Options
	cfg      *rest.Config
	client   kubernetes.Interface
	dyn      dynamic.Interface
	helmBin  string
	helmEnv  []string
	kubectl  string
	workDir  string
	setupErr error
}

// defaultInstance is the local-cluster instance the suite starts: its own ports
// (36513-36518) and ranges (pods 127.29/16, services 127.30/16, nodes 127.31.0.x), apart
// from `make up` (0) and the localcluster package tests (5). E2E_INSTANCE overrides it.
const defaultInstance = 7

// The suite's nodes: 3 general and 2 agent nodes, each with its node agent and its own two
// loop devices (`make up` starts 2 and 2). The VeltrixDB sample places one member per host
// (podAntiAffinityTopologyKey kubernetes.io/hostname, required) on one prepared disk per
// node, so its scale to 5 members needs 5 nodes; the fifth is a general node, which no
// sample pins anything to.
const (
	e2eGeneralNodes = 3
	e2eAgentNodes   = 2
)

// defaultPortBase is the first of the six control-plane ports (E2E_PORT_BASE overrides it).
const defaultPortBase = 29513

// TestMain starts the local cluster once (unless E2E_KUBECONFIG names one), runs the
// tests, and always stops the cluster. The test binary doubles as the cluster daemon and
// the pod helper, as the localcluster command does.
func TestMain(m *testing.M) {
	if handled, err := localcluster.Dispatch(os.Args[1:]); handled {
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	flag.Parse()
	// The suite's controller-runtime clients (the node-agent library's reader) log nothing
	// the suite reads; without a logger controller-runtime prints a stack trace instead.
	ctrllog.SetLogger(logr.Discard())
	if err := selectShard(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(2)
	}
	os.Exit(run(m))
}

func run(m *testing.M) (code int) {
	if testing.Short() {
		fmt.Println("e2e: skipped in -short mode (the suite starts a cluster and installs every chart)")
		return 0
	}
	begin := time.Now()
	teardown, err := setup()
	if teardown != nil {
		defer func() {
			t0 := time.Now()
			teardown()
			fmt.Printf("e2e: teardown %s; whole suite %s\n", since(t0), since(begin))
			if teardownErr != nil {
				fmt.Fprintf(os.Stderr, "e2e: FAIL: teardown: %v\n", teardownErr)
				code = 1
			}
		}()
		// A test binary killed by -timeout never runs deferred code: stop the cluster a
		// little before that deadline.
		if d := testTimeout(); d > 0 {
			watchdog := time.AfterFunc(d-45*time.Second, func() {
				fmt.Fprintln(os.Stderr, "e2e: close to -test.timeout, stopping the cluster now")
				teardown()
			})
			defer watchdog.Stop()
		}
		// Ctrl-C (or go test's SIGTERM) would leave the daemon running: it has its own
		// session. Stop the cluster first.
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
		defer signal.Stop(sigs)
		go func() {
			sig, ok := <-sigs
			if !ok {
				return
			}
			fmt.Fprintf(os.Stderr, "e2e: %v: stopping the cluster\n", sig)
			teardown()
			os.Exit(1)
		}()
	}
	if err != nil {
		// The tests report it (each fails with this error) rather than vanishing.
		env.setupErr = err
		fmt.Fprintf(os.Stderr, "e2e: setup failed: %v\n", err)
	} else {
		fmt.Printf("e2e: cluster ready in %s (kubeconfig %s)\n", since(begin), env.kubeconfig)
	}
	code = m.Run()
	if code != 0 || env.setupErr != nil {
		keepLogs = true
	}
	return code
}

// teardownErr is what teardown found left behind (processes, mounts): it fails the run.
var teardownErr error

// leftovers lists processes still marked with the cluster directory (every process the
// cluster starts carries it in its environment) and mounts left under the work directory.
func leftovers(clusterDir, work string) error {
	var errs []error
	mark := []byte(localcluster.EnvDir + "=" + clusterDir + "\x00")
	deadline := time.Now().Add(10 * time.Second)
	for {
		var pids []string
		procs, _ := filepath.Glob("/proc/[0-9]*/environ")
		for _, p := range procs {
			data, err := os.ReadFile(p)
			if err == nil && bytes.Contains(data, mark) && filepath.Base(filepath.Dir(p)) != strconv.Itoa(os.Getpid()) {
				cmd, _ := os.ReadFile(filepath.Join(filepath.Dir(p), "cmdline"))
				pids = append(pids, filepath.Base(filepath.Dir(p))+" "+strings.ReplaceAll(string(bytes.TrimRight(cmd, "\x00")), "\x00", " "))
			}
		}
		if len(pids) == 0 {
			break
		}
		if time.Now().After(deadline) {
			errs = append(errs, fmt.Errorf("processes left after down:\n  %s", strings.Join(pids, "\n  ")))
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if mi, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		for _, line := range strings.Split(string(mi), "\n") {
			if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], work+"/") {
				errs = append(errs, fmt.Errorf("mount left after down: %s", f[4]))
			}
		}
	}
	return errors.Join(errs...)
}

// keepLogs asks teardown to copy the cluster's logs (components, daemon, every pod
// process) out of the temporary directory before it goes: set when anything failed, or
// always with E2E_KEEP_LOGS=1.
var keepLogs = os.Getenv("E2E_KEEP_LOGS") == "1"

func saveLogs(dir string) {
	if !keepLogs && env.setupErr == nil {
		return
	}
	dst := os.Getenv("E2E_LOG_DIR")
	if dst == "" {
		dst = filepath.Join(os.TempDir(), "opsuite-e2e-logs-"+time.Now().UTC().Format("20060102T150405"))
		if current.name != "" {
			dst += "-" + current.name
		}
	}
	if err := os.CopyFS(dst, os.DirFS(dir)); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: copying logs to %s: %v\n", dst, err)
		return
	}
	fmt.Fprintf(os.Stderr, "e2e: cluster logs kept in %s\n", dst)
}

func testTimeout() time.Duration {
	f := flag.Lookup("test.timeout")
	if f == nil {
		return 0
	}
	d, _ := time.ParseDuration(f.Value.String())
	return d
}

func since(t time.Time) time.Duration { return time.Since(t).Round(100 * time.Millisecond) }

func setup() (teardown func(), err error) {
	root, err := repoRoot()
	if err != nil {
		return nil, err
	}
	env.root = root
	env.kubectl = filepath.Join(root, ".cache", "k8s", "v1.37.2", "kubectl")
	if p := os.Getenv("KUBECTL"); p != "" {
		env.kubectl = p
	}
	env.helmBin = filepath.Join(root, ".cache", "bin", "helm")
	if p := os.Getenv("HELM"); p != "" {
		env.helmBin = p
	}
	var missing []string
	if _, err := os.Stat(env.helmBin); err != nil {
		missing = append(missing, fmt.Sprintf("helm (%s): build it with `make runtime-tools` (or `cd tools && GOWORK=off go build -o ../.cache/bin/ helm.sh/helm/v3/cmd/helm`), or point $HELM at one", env.helmBin))
	}
	if _, err := os.Stat(env.kubectl); err != nil {
		missing = append(missing, fmt.Sprintf("kubectl (%s): build the control plane with tools/build-controlplane.sh, or point $KUBECTL at one", env.kubectl))
	}
	work, err := os.MkdirTemp("", "opsuite-e2e-")
	if err != nil {
		return nil, err
	}
	env.workDir = work
	cleanWork := func() { _ = os.RemoveAll(work) }
	for _, d := range []string{"CACHE", "CONFIG", "DATA"} {
		p := filepath.Join(work, "helm", strings.ToLower(d))
		if err := os.MkdirAll(p, 0o755); err != nil {
			return cleanWork, err
		}
		env.helmEnv = append(env.helmEnv, "HELM_"+d+"_HOME="+p)
	}

	if kc := os.Getenv("E2E_KUBECONFIG"); kc != "" {
		if len(missing) > 0 {
			return cleanWork, fmt.Errorf("missing tools:\n  %s", strings.Join(missing, "\n  "))
		}
		env.kubeconfig = kc
		if err := connect(); err != nil {
			return cleanWork, err
		}
		// Someone else's cluster: leave it as found. Releases of an interrupted run go first.
		removeReleases()
		if err := waitNamespacesGone(); err != nil {
			return cleanWork, err
		}
		return func() { removeReleases(); cleanWork() }, nil
	}

	// Our binaries stand in for the images on the local cluster.
	for _, s := range services {
		if p := filepath.Join(root, "bin", s.name); !exists(p) {
			missing = append(missing, fmt.Sprintf("%s: run `make build`", p))
		}
	}
	// The local cluster runs valkey/valkey images as valkey-server, redis images as
	// redis-server (tools/internal/podrunner).
	if !exists("/usr/bin/valkey-server") {
		missing = append(missing, "/usr/bin/valkey-server: install valkey-server from bookworm-backports (.ci/run adds it)")
	}
	if !exists("/usr/bin/redis-server") {
		missing = append(missing, "/usr/bin/redis-server: install the Debian package redis-server (.ci/apt-packages.txt)")
	}
	// ... and the Valkey exporter sidecar's image (ghcr.io/oliver006/redis_exporter) as the
	// exporter pinned in tools/go.mod.
	if p := filepath.Join(root, ".cache", "bin", "redis_exporter"); !exists(p) {
		missing = append(missing, p+": run `make runtime-tools` (it builds redis_exporter, pinned in tools/go.mod)")
	}
	if len(missing) > 0 {
		return cleanWork, fmt.Errorf("missing binaries:\n  %s", strings.Join(missing, "\n  "))
	}

	instance := defaultInstance
	if current.name != "" {
		instance = current.instance
		fmt.Printf("e2e: shard %s (run %q, skip %q) on local cluster instance %d\n", current.name, current.run, current.skip, instance)
	}
	if v := os.Getenv("E2E_INSTANCE"); v != "" {
		if instance, err = strconv.Atoi(v); err != nil || instance < 1 || instance > 59 {
			return cleanWork, fmt.Errorf("E2E_INSTANCE=%q: want 1-59", v)
		}
	}
	o := localcluster.InstanceOptions(root, instance)
	o.Dir = filepath.Join(work, "cluster")
	// One node more than `make up`: see e2eGeneralNodes.
	general := e2eGeneralNodes
	if v := os.Getenv("E2E_GENERAL_NODES"); v != "" {
		if general, err = strconv.Atoi(v); err != nil || general < e2eGeneralNodes {
			return cleanWork, fmt.Errorf("E2E_GENERAL_NODES=%q: want %d or more", v, e2eGeneralNodes)
		}
	}
	o.Nodes = localcluster.DefaultNodes("default", general, e2eAgentNodes, o.NodeIPPrefix)
	// A disk more per node than `make up`: the others shard runs the VeltrixDB scenarios
	// one after another, and clusters with reclaimPolicy Retain, a lost node's returned
	// disks (re-offered only by hand) and the sample's Delete cluster on the nodes' other
	// disks took every disk of a zone with two (TestVeltrixPlacement's zone b, then
	// TestVeltrixSample's one-member cluster: every agent FailedPrecondition).
	o.DisksPerNode = 3
	// A port base of the suite's own, below the kernel's ephemeral range (32768-60999
	// here), where outgoing connections of the busy host could hold one of the ports.
	// Instances use ports of their own too: a run's ports are free while its control plane
	// is stopped (a control-plane outage), and another run must not take them then.
	o.PortBase = defaultPortBase + 10*(instance-defaultInstance)
	if v := os.Getenv("E2E_PORT_BASE"); v != "" {
		if o.PortBase, err = strconv.Atoi(v); err != nil {
			return cleanWork, fmt.Errorf("E2E_PORT_BASE=%q: %w", v, err)
		}
	}
	if err := testenv.PortsFree(o.PortBase, 6); err != nil {
		return cleanWork, fmt.Errorf("the e2e cluster uses ports %d-%d (set E2E_INSTANCE or E2E_PORT_BASE): %w", o.PortBase, o.PortBase+5, err)
	}
	self, err := os.Executable()
	if err != nil {
		return cleanWork, err
	}
	var out bytes.Buffer
	var once sync.Once
	teardown = func() {
		once.Do(func() {
			saveLogs(o.LogDir())
			// Mount points the runner had to create on the host (e.g.
			// /var/run/secrets/kubernetes.io/serviceaccount): down removes them, unless
			// another local cluster runs at that moment; then they stay for good, since
			// the list goes with the state directory. Say so.
			hostMounts, _ := os.ReadFile(filepath.Join(o.StateDir(), "host-mountpoints"))
			var down bytes.Buffer
			if err := localcluster.Down(o, false, &down); err != nil {
				fmt.Fprintf(os.Stderr, "e2e: down: %v\n%s", err, down.String())
			}
			teardownErr = leftovers(o.Dir, work)
			switch disks, err := localcluster.NodeDisks(o); {
			case err != nil:
				teardownErr = errors.Join(teardownErr, fmt.Errorf("listing the nodes' loop devices after down: %w", err))
			case len(disks) > 0:
				teardownErr = errors.Join(teardownErr, fmt.Errorf("loop devices of the nodes left attached after down: %v", disks))
			}
			var kept []string
			for _, p := range strings.Fields(string(hostMounts)) {
				if exists(p) && !slices.Contains(kept, p) {
					kept = append(kept, p)
				}
			}
			if len(kept) > 0 {
				fmt.Fprintf(os.Stderr, "e2e: warning: host mount points the runner created are still there after down (another local cluster was running?): %s\n", strings.Join(kept, " "))
			}
			cleanWork()
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := localcluster.Up(ctx, o, self, &out); err != nil {
		return teardown, fmt.Errorf("localcluster up: %w\n%s", err, out.String())
	}
	env.local = &o
	env.kubeconfig = o.Kubeconfig()
	return teardown, connect()
}

// removeReleases uninstalls the suite's releases and deletes its namespaces (used only
// against E2E_KUBECONFIG; the local cluster goes away whole).
func removeReleases() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, s := range services {
		if _, err := helm(ctx, "status", s.name, "-n", s.namespace()); err == nil {
			if _, err := helm(ctx, "uninstall", s.name, "-n", s.namespace(), "--wait"); err != nil {
				fmt.Fprintf(os.Stderr, "e2e: cleanup: %v\n", err)
			}
		}
	}
	for _, ns := range append(namespaces(), valdSampleNamespace) {
		err := env.client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			fmt.Fprintf(os.Stderr, "e2e: cleanup: deleting namespace %s: %v\n", ns, err)
		}
	}
}

// waitNamespacesGone waits until the namespaces of an earlier run are deleted (a namespace
// being terminated takes no new objects).
func waitNamespacesGone() error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, ns := range append(namespaces(), valdSampleNamespace) {
		for {
			_, err := env.client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				break
			}
			if ctx.Err() != nil {
				return fmt.Errorf("namespace %s of an earlier run is still there (terminating?): delete it first", ns)
			}
			time.Sleep(time.Second)
		}
	}
	return nil
}

func namespaces() []string {
	var out []string
	for _, s := range services {
		out = append(out, s.namespace())
	}
	return out
}

func connect() error {
	cfg, err := clientcmd.BuildConfigFromFlags("", env.kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 50, 100
	env.cfg = cfg
	if env.client, err = kubernetes.NewForConfig(cfg); err != nil {
		return err
	}
	env.dyn, err = dynamic.NewForConfig(cfg)
	return err
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; d != "/"; d = filepath.Dir(d) {
		if exists(filepath.Join(d, "go.work")) {
			return d, nil
		}
	}
	return "", fmt.Errorf("no go.work above %s", dir)
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// needCluster fails a test when setup failed, with setup's error.
func needCluster(t *testing.T) {
	t.Helper()
	if env.setupErr != nil {
		t.Fatalf("no cluster: %v", env.setupErr)
	}
}

// needRunner skips a check that only the local cluster's process runner makes possible.
func needRunner(t *testing.T, what string) {
	t.Helper()
	needCluster(t)
	if env.local == nil {
		t.Skipf("skipped against E2E_KUBECONFIG=%s: %s needs the local cluster's process runner (pods as host processes)", env.kubeconfig, what)
	}
}

// helm runs the pinned helm against the cluster with its own home directories.
func helm(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, env.helmBin, append(args, "--kubeconfig", env.kubeconfig)...)
	cmd.Env = append(os.Environ(), env.helmEnv...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String(), nil
}

func kubectl(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, env.kubectl, append([]string{"--kubeconfig", env.kubeconfig}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String(), nil
}
