// Package podrunner starts the containers of pods on simulated nodes as real processes:
// each container whose image maps to a host binary runs in its own mount and UTS namespace,
// on the pod's loopback address, with its volumes, environment and ServiceAccount token,
// and its readiness probe decides the pod's Ready condition.
package podrunner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// Config is what the runner needs from the cluster it serves.
type Config struct {
	Client kubernetes.Interface
	Rules  []ImageRule
	// StateDir holds one directory per pod (volumes, hosts file, exec specs).
	StateDir string
	// VolumeDir holds provisioned volumes (the hostPath of kwok's PersistentVolumes); the
	// runner removes a volume's directory when its PersistentVolume is deleted.
	VolumeDir string
	// LogDir receives <namespace>_<pod>_<container>.log.
	LogDir string
	// PidDir receives one pidfile per running container, for `down`.
	PidDir string
	// CAFile is the cluster CA, for reference; pods get it from kube-root-ca.crt.
	CAFile string
	// APIServerHost and APIServerPort are what in-cluster clients dial.
	APIServerHost string
	APIServerPort int
	ClusterDomain string
	// HelperBinary is a binary whose HelperCommand subcommand calls ExecInNamespace.
	HelperBinary string
	// Env is added to every container's environment.
	Env []string
	// NodeVars are variables per node name that image rules' ExtraArgs may use
	// ($(NODE_DEVICES)); they are not in the environment.
	NodeVars map[string]map[string]string
	// NodeDevices are the host device nodes each node owns (its loop devices). With
	// NodeDevDir set, a pod's hostPath /dev is <NodeDevDir>/<node>: the basic character
	// devices and the node's own disks with their partitions, never the host's other disks.
	NodeDevices map[string][]string
	NodeDevDir  string
	// NodeRootDir, when set, holds each node's own filesystem: a hostPath other than /dev,
	// /proc and /sys is <NodeRootDir>/<node>/<path>, never the host's path shared by all
	// simulated nodes.
	NodeRootDir string
	// LoadBalancerCIDR, when set, is the loopback pool Services of type LoadBalancer get
	// their address from (status.loadBalancer.ingress); the service proxy listens there.
	LoadBalancerCIDR string
	Log              *slog.Logger
}

// Runner watches pods and runs the ones its rules map.
type Runner struct {
	cfg   Config
	rules Rules
	log   *slog.Logger
	// stopped is Run's ctx.Done(): retries of API writes end with the runner.
	stopped <-chan struct{}

	pods     corelisters.PodLister
	nodes    corelisters.NodeLister
	services corelisters.ServiceLister

	mu      sync.Mutex
	workers map[types.UID]*podWorker
	wg      sync.WaitGroup

	hostsKick chan struct{}
	mountMu   sync.Mutex
	devMu     sync.Mutex
	proxy     *serviceProxy
	lb        *loadBalancers // nil without a LoadBalancerCIDR
}

// New checks the configuration and returns a runner.
func New(cfg Config) (*Runner, error) {
	if cfg.Client == nil || cfg.HelperBinary == "" || cfg.StateDir == "" || cfg.LogDir == "" {
		return nil, errors.New("podrunner: client, helper binary, state and log directories are required")
	}
	for _, r := range cfg.Rules {
		if err := r.Validate(); err != nil {
			return nil, err
		}
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.ClusterDomain == "" {
		cfg.ClusterDomain = "cluster.local"
	}
	var pool netip.Prefix
	if cfg.LoadBalancerCIDR != "" {
		var err error
		if pool, err = netip.ParsePrefix(cfg.LoadBalancerCIDR); err != nil || !pool.Addr().Is4() || !pool.Addr().IsLoopback() || pool.Bits() < 8 || pool.Bits() > 30 {
			return nil, fmt.Errorf("podrunner: load-balancer CIDR %q must be an IPv4 range of 4 addresses or more in 127.0.0.0/8", cfg.LoadBalancerCIDR)
		}
	}
	r := &Runner{
		cfg:       cfg,
		rules:     Rules(cfg.Rules),
		log:       cfg.Log,
		workers:   map[types.UID]*podWorker{},
		hostsKick: make(chan struct{}, 1),
	}
	if pool.IsValid() {
		r.lb = newLoadBalancers(r, pool)
	}
	return r, nil
}

// Managed reports whether the runner runs at least one container of pod.
func (r *Runner) Managed(pod *corev1.Pod) bool {
	for _, c := range append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
		if _, ok := r.rules.Match(c.Image); ok {
			return true
		}
	}
	return false
}

// Run watches the cluster until ctx ends, then stops every process it started. synced is
// closed once the caches are filled.
func (r *Runner) Run(ctx context.Context, synced chan<- struct{}) error {
	r.stopped = ctx.Done()
	factory := informers.NewSharedInformerFactory(r.cfg.Client, 0)
	podInf := factory.Core().V1().Pods().Informer()
	nodeInf := factory.Core().V1().Nodes().Informer()
	serviceInf := factory.Core().V1().Services().Informer()
	pvInf := factory.Core().V1().PersistentVolumes().Informer()
	r.pods = factory.Core().V1().Pods().Lister()
	r.nodes = factory.Core().V1().Nodes().Lister()
	r.services = factory.Core().V1().Services().Lister()

	_, err := podInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { r.podChanged(obj.(*corev1.Pod)); r.kickHosts() },
		UpdateFunc: func(_, obj any) { r.podChanged(obj.(*corev1.Pod)); r.kickHosts() },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if pod, ok := obj.(*corev1.Pod); ok {
				r.podGone(pod)
			}
			r.kickHosts()
		},
	})
	if err != nil {
		return err
	}
	_, err = nodeInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if node, ok := obj.(*corev1.Node); ok {
				go r.nodeGone(ctx, node.Name)
			}
		},
	})
	if err != nil {
		return err
	}
	_, err = pvInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if pv, ok := obj.(*corev1.PersistentVolume); ok {
				r.volumeGone(pv)
			}
		},
	})
	if err != nil {
		return err
	}
	_, err = serviceInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { r.kickHosts() },
		UpdateFunc: func(any, any) { r.kickHosts() },
		DeleteFunc: func(any) { r.kickHosts() },
	})
	if err != nil {
		return err
	}
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("cache of %v did not sync", typ)
		}
	}
	r.proxy = newServiceProxy(r)
	r.syncLoadBalancers(ctx)
	r.proxy.sync()
	close(synced)
	go r.hostsLoop(ctx)
	go r.devicesLoop(ctx)
	<-ctx.Done()
	r.proxy.close()

	r.mu.Lock()
	for _, w := range r.workers {
		w.shutdown()
	}
	r.mu.Unlock()
	r.wg.Wait()
	factory.Shutdown()
	return nil
}

func (r *Runner) podChanged(pod *corev1.Pod) {
	if pod.Spec.NodeName == "" || !r.Managed(pod) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if w, ok := r.workers[pod.UID]; ok {
		w.update(pod)
		return
	}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		if pod.DeletionTimestamp != nil {
			go r.deletePod(context.Background(), pod)
		}
		return
	}
	w := newPodWorker(r, pod)
	r.workers[pod.UID] = w
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		w.run()
		r.mu.Lock()
		delete(r.workers, pod.UID)
		r.mu.Unlock()
	}()
}

func (r *Runner) podGone(pod *corev1.Pod) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if w, ok := r.workers[pod.UID]; ok {
		w.gone()
	}
}

// nodeGone stops the processes of every pod on a deleted node and deletes the pods, as
// the pod garbage collector would after its quarantine.
func (r *Runner) nodeGone(ctx context.Context, node string) {
	pods, err := r.pods.List(labels.Everything())
	if err != nil {
		return
	}
	for _, pod := range pods {
		if pod.Spec.NodeName != node {
			continue
		}
		r.mu.Lock()
		w := r.workers[pod.UID]
		r.mu.Unlock()
		if w != nil {
			w.gone()
			<-w.done
		}
		r.deletePod(ctx, pod)
	}
	r.log.Info("Deleted the pods of a removed node", "node", node)
}

// volumeGone removes the directory of a deleted PersistentVolume that the cluster
// provisioned; a claim's data outlives its pods, not the claim.
func (r *Runner) volumeGone(pv *corev1.PersistentVolume) {
	if r.cfg.VolumeDir == "" || pv.Spec.HostPath == nil {
		return
	}
	path := filepath.Clean(pv.Spec.HostPath.Path)
	if filepath.Dir(path) != filepath.Clean(r.cfg.VolumeDir) {
		return
	}
	if err := os.RemoveAll(path); err != nil {
		r.log.Warn("Failed to remove the directory of a deleted volume", "volume", pv.Name, "err", err)
		return
	}
	r.log.Info("Removed the directory of a deleted volume", "volume", pv.Name)
}

// deletePod removes a pod whose processes are gone (grace 0), as the kubelet does once a
// deleted pod's containers stopped. Like the kubelet it retries until the API server
// takes it: a pod left Terminating after an API outage would never go, and its
// StatefulSet would wait for it for ever.
func (r *Runner) deletePod(ctx context.Context, pod *corev1.Pod) {
	zero := int64(0)
	wait := 500 * time.Millisecond
	for {
		err := r.cfg.Client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
			GracePeriodSeconds: &zero,
			Preconditions:      &metav1.Preconditions{UID: &pod.UID},
		})
		if err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return
		}
		r.log.Warn("Failed to delete pod; retrying", "pod", pod.Namespace+"/"+pod.Name, "err", err, "after", wait)
		select {
		case <-ctx.Done():
			return
		case <-r.stopped:
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

func (r *Runner) nodeAllocatable(node string, name corev1.ResourceName) (resource.Quantity, bool) {
	n, err := r.nodes.Get(node)
	if err != nil {
		return resource.Quantity{}, false
	}
	q, ok := n.Status.Allocatable[name]
	return q, ok
}

// ensureMountpoint creates a missing mount target on the host (an empty directory or
// file; the mount itself stays inside the pod's namespace) and records what it created.
func (r *Runner) ensureMountpoint(target string, file bool) error {
	r.mountMu.Lock()
	defer r.mountMu.Unlock()
	if _, err := os.Stat(target); err == nil {
		return nil
	}
	// Record the top-most directory we create, for cleanup by `down`.
	top := target
	for p := filepath.Dir(target); p != "/"; p = filepath.Dir(p) {
		if _, err := os.Stat(p); err == nil {
			break
		}
		top = p
	}
	dir := target
	if file {
		dir = filepath.Dir(target)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if file {
		f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		f.Close()
	}
	f, err := os.OpenFile(filepath.Join(r.cfg.StateDir, "..", "host-mountpoints"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err == nil {
		fmt.Fprintln(f, top)
		f.Close()
	}
	return nil
}

func sortStrings(s []string) { sort.Strings(s) }

func (r *Runner) kickHosts() {
	select {
	case r.hostsKick <- struct{}{}:
	default:
	}
}

func (r *Runner) hostsLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.hostsKick:
		}
		time.Sleep(200 * time.Millisecond)
		r.mu.Lock()
		workers := make([]*podWorker, 0, len(r.workers))
		for _, w := range r.workers {
			workers = append(workers, w)
		}
		r.mu.Unlock()
		table := r.hostsTable()
		for _, w := range workers {
			w.writeHosts(table)
		}
		r.syncLoadBalancers(ctx)
		r.proxy.sync()
	}
}

// syncLoadBalancers gives LoadBalancer Services their addresses; a failed status write is
// tried again a second later.
func (r *Runner) syncLoadBalancers(ctx context.Context) {
	if r.lb != nil && !r.lb.sync(ctx) && ctx.Err() == nil {
		time.AfterFunc(time.Second, r.kickHosts)
	}
}
