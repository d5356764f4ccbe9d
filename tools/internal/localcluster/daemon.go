package localcluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/opsuite/suite/tools/internal/podrunner"
)

// EnvDir marks every process the cluster starts with the cluster directory, so that `down`
// only ever signals processes that belong to this cluster.
const EnvDir = "LOCALCLUSTER_DIR"

// RunDaemon starts the control plane, kwok, the nodes and the process runner, writes the
// ready file, and keeps them running until SIGTERM/SIGINT or until a component exits.
func RunDaemon(o Options) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))

	for _, d := range []string{o.LogDir(), o.PidDir(), o.PKIDir(), o.VolumeDir(), o.PodDir()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	_ = os.Remove(o.readyFile())
	if err := writePidFile(o.daemonPidFile(), os.Getpid()); err != nil {
		return err
	}
	defer os.Remove(o.daemonPidFile())
	if err := ensurePKI(o.PKIDir(), o.kubernetesServiceIP()); err != nil {
		return fmt.Errorf("creating certificates: %w", err)
	}
	if err := o.writeComponentConfig(); err != nil {
		return err
	}

	var procs []*process
	defer func() {
		// Stop in reverse start order: kwok and the scheduler first, etcd last.
		for i := len(procs) - 1; i >= 0; i-- {
			procs[i].stop(10 * time.Second)
			_ = os.Remove(filepath.Join(o.PidDir(), procs[i].name+".pid"))
		}
		_ = os.Remove(o.readyFile())
		log.Info("Stopped cluster")
	}()
	start := func(name, binary string, args []string) (*process, error) {
		p, err := o.startProcess(name, binary, args)
		if err == nil {
			procs = append(procs, p)
		}
		return p, err
	}

	begin := time.Now()
	bootCtx, cancelBoot := context.WithTimeout(ctx, 3*time.Minute)
	defer cancelBoot()
	plain := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{Proxy: nil}}
	etcd, err := start("etcd", filepath.Join(o.BinDir, "etcd"), o.etcdArgs())
	if err != nil {
		return err
	}
	if err := waitHTTP(bootCtx, plain, fmt.Sprintf("http://127.0.0.1:%d/health", o.EtcdClientPort()), etcd); err != nil {
		return err
	}
	apiserver, err := start("kube-apiserver", filepath.Join(o.BinDir, "kube-apiserver"), o.apiserverArgs())
	if err != nil {
		return err
	}
	admin, err := o.httpClient()
	if err != nil {
		return err
	}
	if err := waitHTTP(bootCtx, admin, o.APIServerURL()+"/readyz", apiserver); err != nil {
		return err
	}
	log.Info("Started kube-apiserver", "after", time.Since(begin).Round(time.Millisecond))
	if err := o.writeKubeconfig(o.Kubeconfig(), "admin"); err != nil {
		return err
	}

	restConfig, err := clientcmd.BuildConfigFromFlags("", o.componentKubeconfig("runner"))
	if err != nil {
		return err
	}
	restConfig.QPS, restConfig.Burst = 100, 200
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return err
	}
	kcm, err := start("kube-controller-manager", filepath.Join(o.BinDir, "kube-controller-manager"), o.kcmArgs())
	if err != nil {
		return err
	}
	sched, err := start("kube-scheduler", filepath.Join(o.BinDir, "kube-scheduler"), o.schedulerArgs())
	if err != nil {
		return err
	}
	if err := o.releaseNodeLeases(bootCtx, client); err != nil {
		return err
	}
	kwok, err := start("kwok", o.KwokBinary, o.kwokArgs())
	if err != nil {
		return err
	}

	if err := o.bootstrap(bootCtx, client); err != nil {
		return err
	}
	insecure := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		Proxy: nil, TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // loopback health checks of self-signed components
	}}
	if err := waitHTTP(bootCtx, insecure, fmt.Sprintf("https://127.0.0.1:%d/healthz", o.KCMPort()), kcm); err != nil {
		return err
	}
	if err := waitHTTP(bootCtx, insecure, fmt.Sprintf("https://127.0.0.1:%d/healthz", o.SchedulerPort()), sched); err != nil {
		return err
	}
	if err := o.waitNodesReady(bootCtx, client, kwok); err != nil {
		return err
	}
	if err := waitDefaultServiceAccount(bootCtx, client); err != nil {
		return err
	}

	// runnerStopped is closed once the runner returned (runnerErr); nil while none runs.
	var runnerStopped chan struct{}
	var runnerErr error
	runCtx, cancelRunner := context.WithCancel(context.Background())
	defer func() {
		cancelRunner()
		if runnerStopped != nil {
			<-runnerStopped // its pod processes are stopped
		}
	}()
	if !o.DisableRunner {
		// Detached after the runner stopped the pods using them (deferred earlier, runs later).
		defer func() {
			if err := o.detachDisks(); err != nil {
				log.Warn("Failed to detach the nodes' disks", "err", err)
			}
		}()
		disks, err := o.attachDisks()
		if err != nil {
			return fmt.Errorf("attaching the nodes' disks: %w", err)
		}
		log.Info("Attached the nodes' disks", "disks", disks)
		nodeDevices, nodeVars := o.runnerDisks(disks)
		// /proc/self/exe still works when `go run` already removed the binary.
		exe := "/proc/self/exe"
		runner, err := podrunner.New(podrunner.Config{
			Client:           client,
			Rules:            o.ImageRules,
			StateDir:         o.PodDir(),
			VolumeDir:        o.VolumeDir(),
			LogDir:           o.LogDir(),
			PidDir:           o.PidDir(),
			CAFile:           o.pki("ca.crt"),
			APIServerHost:    "127.0.0.1",
			APIServerPort:    o.APIServerPort(),
			ClusterDomain:    clusterDomain,
			HelperBinary:     exe,
			Env:              []string{EnvDir + "=" + o.Dir},
			NodeVars:         nodeVars,
			NodeDevices:      nodeDevices,
			NodeDevDir:       o.NodeDevDir(),
			NodeRootDir:      o.NodeRootDir(),
			LoadBalancerCIDR: o.LoadBalancerCIDR,
			Log:              log.With("component", "runner"),
		})
		if err != nil {
			return err
		}
		synced := make(chan struct{})
		runnerStopped = make(chan struct{})
		go func() {
			runnerErr = runner.Run(runCtx, synced)
			close(runnerStopped)
		}()
		select {
		case <-synced:
		case <-runnerStopped:
			return fmt.Errorf("process runner: %w", runnerErr)
		case <-bootCtx.Done():
			return errors.New("process runner did not sync")
		}
	}
	if o.ObjectStore {
		// Its own bound: the pod starts only now, once the runner runs.
		storeCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		err := o.ensureObjectStore(storeCtx, client)
		cancel()
		if err != nil {
			return err
		}
		log.Info("Object store ready", "endpoint", o.ObjectStoreEndpoint(), "bucket", ObjectStoreBucket)
	}
	if err := os.WriteFile(o.readyFile(), []byte(time.Now().Format(time.RFC3339)+"\n"), 0o644); err != nil {
		return err
	}
	log.Info("Cluster ready", "after", time.Since(begin).Round(time.Millisecond), "kubeconfig", o.Kubeconfig())

	exited := make(chan *process, 2*len(procs))
	watch := func(p *process) { go func() { <-p.done; exited <- p }() }
	for _, p := range procs {
		watch(p)
	}
	outages := make(chan os.Signal, 1)
	signal.Notify(outages, syscall.SIGUSR1)
	defer signal.Stop(outages)
	stopped := map[*process]bool{} // stopped on purpose by an outage
	crashes := crashLoop{restartable: map[string]bool{"kube-scheduler": true, "kube-controller-manager": true}}
	for {
		select {
		case <-ctx.Done():
			log.Info("Stopping cluster")
			return nil
		case p := <-exited:
			if stopped[p] {
				delete(stopped, p)
				continue
			}
			logFile := filepath.Join(o.LogDir(), p.name+".log")
			wait, ok := crashes.next(p.name, time.Now())
			if !ok && crashes.restartable[p.name] {
				return fmt.Errorf("%s exited (%w), %d times within %s; see %s", p.name, p.err, maxCrashes+1, crashWindow, logFile)
			}
			if !ok {
				return fmt.Errorf("%s exited (%w); see %s", p.name, p.err, logFile)
			}
			// As a kubelet restarts a static pod: kube-scheduler exits on purpose when its
			// cache disagrees with the API (an assumed pod bound elsewhere), and
			// kube-controller-manager when it loses its lease.
			log.Warn("Control-plane component exited; restarting it", "component", p.name, "err", p.err, "after", wait, "log", logFile)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(wait):
			}
			np, err := o.startProcess(p.name, p.binary, p.args)
			if err != nil {
				return fmt.Errorf("restarting %s: %w", p.name, err)
			}
			replace(procs, np)
			watch(np)
		case <-runnerStopped: // never ready when the runner is disabled (nil channel)
			return fmt.Errorf("process runner stopped: %w", runnerErr)
		case <-outages:
			d, err := o.readOutage()
			if err != nil {
				log.Warn("Ignoring SIGUSR1", "err", err)
				continue
			}
			log.Info("Control-plane outage: stopping kube-apiserver and etcd", "for", d)
			for _, p := range []*process{apiserver, etcd} {
				stopped[p] = true
				p.stop(10 * time.Second)
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(d):
			}
			restartCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			etcd, apiserver, err = o.restartControlPlane(restartCtx, plain, admin, procs)
			cancel()
			if err != nil {
				return fmt.Errorf("restarting after the outage: %w", err)
			}
			watch(etcd)
			watch(apiserver)
			log.Info("Control plane back", "after", d)
		}
	}
}

// restartControlPlane starts etcd and kube-apiserver again on their data and replaces them
// in procs (so that the daemon's exit stops the new ones).
func (o *Options) restartControlPlane(ctx context.Context, plain, admin *http.Client, procs []*process) (etcd, apiserver *process, err error) {
	etcd, err = o.startProcess("etcd", filepath.Join(o.BinDir, "etcd"), o.etcdArgs())
	if err != nil {
		return nil, nil, err
	}
	replace(procs, etcd)
	if err := waitHTTP(ctx, plain, fmt.Sprintf("http://127.0.0.1:%d/health", o.EtcdClientPort()), etcd); err != nil {
		return etcd, nil, err
	}
	apiserver, err = o.startProcess("kube-apiserver", filepath.Join(o.BinDir, "kube-apiserver"), o.apiserverArgs())
	if err != nil {
		return etcd, nil, err
	}
	replace(procs, apiserver)
	return etcd, apiserver, waitHTTP(ctx, admin, o.APIServerURL()+"/readyz", apiserver)
}

// replace puts p in place of the process of the same name.
func replace(procs []*process, p *process) {
	for i := range procs {
		if procs[i].name == p.name {
			procs[i] = p
		}
	}
}

// bootstrap creates the default StorageClass and the simulated nodes; both are kept when
// they exist, so a restart on an existing state directory changes nothing.
func (o *Options) bootstrap(ctx context.Context, client kubernetes.Interface) error {
	raw, err := storageClassManifest()
	if err != nil {
		return err
	}
	var sc storagev1.StorageClass
	if err := yaml.Unmarshal(raw, &sc); err != nil {
		return err
	}
	if err := retryCreate(ctx, func() error {
		_, err := client.StorageV1().StorageClasses().Create(ctx, &sc, metav1.CreateOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("creating StorageClass: %w", err)
	}
	for _, n := range o.Nodes {
		node := o.desiredNode(n)
		if err := retryCreate(ctx, func() error {
			_, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
			return err
		}); err != nil {
			return fmt.Errorf("creating node %s: %w", n.Name, err)
		}
	}
	return nil
}

func retryCreate(ctx context.Context, create func() error) error {
	for {
		err := create()
		if err == nil || apierrors.IsAlreadyExists(err) {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (o *Options) desiredNode(n NodeSpec) *corev1.Node {
	res := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(n.CPU),
		corev1.ResourceMemory: resource.MustParse(n.Memory),
		corev1.ResourcePods:   resource.MustParse(n.Pods),
	}
	labels := map[string]string{
		"kubernetes.io/hostname":         n.Name,
		"kubernetes.io/os":               "linux",
		"kubernetes.io/arch":             "amd64",
		"type":                           "kwok",
		o.PoolLabelPrefix + "/namespace": n.Namespace,
		o.PoolLabelPrefix + "/type":      n.Type,
		"node.kubernetes.io/exclude-from-external-load-balancers": "true",
	}
	if n.Zone != "" {
		labels[corev1.LabelTopologyZone] = n.Zone
		if region := strings.TrimRight(n.Zone, "abcdefghijklmnopqrstuvwxyz"); region != "" && region != n.Zone {
			labels[corev1.LabelTopologyRegion] = region
		}
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:   n.Name,
			Labels: labels,
			Annotations: map[string]string{
				kwokNodeAnnotation:             "fake",
				"node.alpha.kubernetes.io/ttl": "0",
			},
		},
		Status: corev1.NodeStatus{
			Capacity:    res,
			Allocatable: res,
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: n.IP},
				{Type: corev1.NodeHostName, Address: n.Name},
			},
		},
	}
}

func (o *Options) waitNodesReady(ctx context.Context, client kubernetes.Interface, kwok *process) error {
	for {
		ready := 0
		list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err == nil {
			want := map[string]bool{}
			for _, n := range o.Nodes {
				want[n.Name] = true
			}
			for _, n := range list.Items {
				// A node counts once kwok holds its lease (kwok manages a node only then)
				// and it reports Ready.
				lease, lerr := client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, n.Name, metav1.GetOptions{})
				if lerr != nil || lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
					continue
				}
				for _, c := range n.Status.Conditions {
					if want[n.Name] && c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
						ready++
					}
				}
			}
			if ready == len(o.Nodes) {
				// On a restart, kwok syncs the pods of each node after taking its lease and
				// only then knows which addresses are taken; give it a moment.
				if pods, err := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{Limit: 1}); err == nil && len(pods.Items) > 0 {
					time.Sleep(2 * time.Second)
				}
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d nodes Ready before the deadline (last error: %w)", ready, len(o.Nodes), err)
		case <-kwok.done:
			return fmt.Errorf("kwok exited: %w", kwok.err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// releaseNodeLeases deletes the node leases a previous kwok held: a new kwok only takes
// over a node once it holds its lease, which would otherwise take a lease duration.
func (o *Options) releaseNodeLeases(ctx context.Context, client kubernetes.Interface) error {
	for _, n := range o.Nodes {
		err := client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Delete(ctx, n.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("releasing the lease of node %s: %w", n.Name, err)
		}
	}
	return nil
}

// waitDefaultServiceAccount waits until pods can be created in "default": the
// ServiceAccount admission plugin rejects pods until the controller made the account.
func waitDefaultServiceAccount(ctx context.Context, client kubernetes.Interface) error {
	for {
		_, err := client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		if err == nil {
			_, err = client.CoreV1().ConfigMaps("default").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		}
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("default ServiceAccount and kube-root-ca.crt not created: %w", err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Crash-loop limits of the restarted components: a component that exits more than
// maxCrashes times within crashWindow stops the cluster.
const (
	maxCrashes  = 5
	crashWindow = 10 * time.Minute
)

// crashLoop decides whether, and after what delay, a component that exited is restarted:
// only the restartable ones, with a delay doubling from one second per recent exit.
type crashLoop struct {
	restartable map[string]bool
	exits       map[string][]time.Time
}

func (c *crashLoop) next(name string, now time.Time) (time.Duration, bool) {
	if !c.restartable[name] {
		return 0, false
	}
	if c.exits == nil {
		c.exits = map[string][]time.Time{}
	}
	recent := slices.DeleteFunc(c.exits[name], func(t time.Time) bool { return now.Sub(t) > crashWindow })
	if len(recent) >= maxCrashes {
		return 0, false
	}
	c.exits[name] = append(recent, now)
	return time.Second << len(recent), true
}
