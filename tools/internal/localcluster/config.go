// Package localcluster runs a Kubernetes control plane on loopback with KWOK-simulated nodes
// and a process runner that starts selected pods as real processes.
package localcluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/opsuite/suite/tools/internal/podrunner"
)

// Options describe one local cluster. They are validated once and saved in the state
// directory so that the daemon, `down` and tests all read the same values.
type Options struct {
	// Dir holds everything the cluster writes: kubeconfig, logs/, state/.
	Dir string `json:"dir"`
	// BinDir holds etcd, kube-apiserver, kube-controller-manager and kube-scheduler.
	BinDir string `json:"binDir"`
	// KwokBinary is the kwok controller binary.
	KwokBinary string `json:"kwokBinary"`
	// RepoRoot is the checkout the cluster belongs to (binaries of ours live in bin/).
	RepoRoot string `json:"repoRoot"`
	// PortBase is the first of six consecutive loopback ports: apiserver, etcd client,
	// etcd peer, controller-manager, scheduler, kwok.
	PortBase int `json:"portBase"`
	// PodCIDR is where kwok allocates pod addresses; ServiceCIDR is the apiserver's
	// service-cluster-ip-range. Both must lie in 127.0.0.0/8.
	PodCIDR     string `json:"podCIDR"`
	ServiceCIDR string `json:"serviceCIDR"`
	// LoadBalancerCIDR is the pool Services of type LoadBalancer get their address from
	// (with the process runner, which forwards it); in 127.0.0.0/8, apart from the pods',
	// the Services' and the nodes' addresses. Empty gives them none.
	LoadBalancerCIDR string `json:"loadBalancerCIDR,omitempty"`
	// NodeIPPrefix is the first three octets and a dot ("127.3.0.") of node addresses.
	NodeIPPrefix string `json:"nodeIPPrefix"`
	// Nodes lists the simulated nodes.
	Nodes []NodeSpec `json:"nodes"`
	// PoolLabelPrefix prefixes the node-pool labels "<prefix>/namespace" and "<prefix>/type".
	PoolLabelPrefix string `json:"poolLabelPrefix"`
	// ImageRules maps images to host binaries for the process runner.
	ImageRules []podrunner.ImageRule `json:"imageRules"`
	// DisableRunner leaves every pod simulated.
	DisableRunner bool `json:"disableRunner"`
	// DisksPerNode loop devices of DiskSizeBytes (sparse files under DiskDir) are each
	// node's own disks: a pod on the node mounting hostPath /dev sees those alone, and its
	// node agent may use only them. Attached while the daemon runs (with the runner).
	DisksPerNode  int   `json:"disksPerNode"`
	DiskSizeBytes int64 `json:"diskSizeBytes"`
	// ObjectStore runs an S3 server in the cluster (objectstore.go; with the runner):
	// versitygw from ObjectStoreBinary, which `up` builds when missing.
	ObjectStore       bool   `json:"objectStore,omitempty"`
	ObjectStoreBinary string `json:"objectStoreBinary,omitempty"`
}

// NodeSpec describes one simulated node.
type NodeSpec struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	Type      string `json:"type"`
	CPU       string `json:"cpu"`
	Memory    string `json:"memory"`
	Pods      string `json:"pods"`
	// IP is the node's InternalIP, also the address of its hostNetwork pods.
	IP string `json:"ip"`
	// Zone is the node's topology.kubernetes.io/zone label (and its region, the zone
	// without its last letter, topology.kubernetes.io/region); empty sets neither.
	Zone string `json:"zone,omitempty"`
}

// DefaultZones are the zones DefaultNodes deals its nodes into, round-robin. They are the
// names valkey-io/valkey-operator's zone-pinning sample pins to, so that sample and
// every zone spread run unchanged here, on three zones.
var DefaultZones = []string{"eu-west-1a", "eu-west-1b", "eu-west-1c"}

const (
	clusterDomain  = "cluster.local"
	serviceAccount = "https://kubernetes.default.svc." + clusterDomain
)

// DefaultOptions returns the cluster `make up` starts for the checkout at repoRoot:
// instance 0, in .local.
func DefaultOptions(repoRoot string) Options {
	return InstanceOptions(repoRoot, 0)
}

// InstanceOptions returns the options of local cluster number i (0-59). Instances use
// disjoint ports and address ranges, so several can run at once (a developer's cluster
// and a test's): ports 26443+10i.. (below the kernel's ephemeral range, 32768-60999), pods 127.(1+4i).0.0/16, services 127.(2+4i).0.0/16,
// nodes 127.(3+4i).0.n, load balancers 127.(4+4i).0.0/16. Instance 0 lives in <repo>/.local, instance i in <repo>/.local-<i>.
func InstanceOptions(repoRoot string, i int) Options {
	dir := filepath.Join(repoRoot, ".local")
	if i != 0 {
		dir = fmt.Sprintf("%s-%d", dir, i)
	}
	return Options{
		Dir:              dir,
		BinDir:           filepath.Join(repoRoot, ".cache", "k8s", "v1.37.2"),
		KwokBinary:       filepath.Join(repoRoot, ".cache", "bin", "kwok"),
		RepoRoot:         repoRoot,
		PortBase:         26443 + 10*i,
		PodCIDR:          fmt.Sprintf("127.%d.0.0/16", 1+4*i),
		ServiceCIDR:      fmt.Sprintf("127.%d.0.0/16", 2+4*i),
		NodeIPPrefix:     fmt.Sprintf("127.%d.0.", 3+4*i),
		LoadBalancerCIDR: fmt.Sprintf("127.%d.0.0/16", 4+4*i),
		Nodes:            DefaultNodes("default", 2, 2, fmt.Sprintf("127.%d.0.", 3+4*i)),
		PoolLabelPrefix:  "pool.opsuite.io",
		ImageRules:       podrunner.DefaultImageRules(filepath.Join(repoRoot, "bin")),
		// The path the image rule of versity/versitygw names.
		ObjectStoreBinary: filepath.Join(repoRoot, ".cache", "bin", "versitygw"),
		DisksPerNode:      2,
		DiskSizeBytes:     1 << 30,
	}
}

// DefaultNodes returns general nodes followed by agent nodes, all in the pool namespace ns,
// with addresses ipPrefix+1, ipPrefix+2, ... and the DefaultZones in turn (the first node
// in the first zone, the fourth in the first again).
func DefaultNodes(ns string, general, agent int, ipPrefix string) []NodeSpec {
	var nodes []NodeSpec
	add := func(typ string, i int, cpu, mem string) {
		nodes = append(nodes, NodeSpec{
			Name:      fmt.Sprintf("kwok-%s-%d", typ, i),
			Namespace: ns,
			Type:      typ,
			CPU:       cpu,
			Memory:    mem,
			Pods:      "110",
			IP:        fmt.Sprintf("%s%d", ipPrefix, len(nodes)+1),
			Zone:      DefaultZones[len(nodes)%len(DefaultZones)],
		})
	}
	for i := range general {
		add("general", i, "8", "32Gi")
	}
	for i := range agent {
		add("agent", i, "16", "64Gi")
	}
	return nodes
}

// Validate checks the options once, before anything starts.
func (o *Options) Validate() error {
	var errs []error
	if !filepath.IsAbs(o.Dir) {
		errs = append(errs, fmt.Errorf("dir %q must be absolute", o.Dir))
	}
	if o.PortBase < 1024 || o.PortBase > 65535-6 {
		errs = append(errs, fmt.Errorf("port base %d out of range", o.PortBase))
	}
	for _, c := range []string{o.PodCIDR, o.ServiceCIDR} {
		if p, err := netip.ParsePrefix(c); err != nil || !p.Addr().IsLoopback() || p.Bits() < 8 {
			errs = append(errs, fmt.Errorf("CIDR %q must lie in 127.0.0.0/8", c))
		}
	}
	var lbPool netip.Prefix
	if o.LoadBalancerCIDR != "" {
		p, err := netip.ParsePrefix(o.LoadBalancerCIDR)
		if err != nil || !p.Addr().Is4() || !p.Addr().IsLoopback() || p.Bits() < 8 || p.Bits() > 30 {
			errs = append(errs, fmt.Errorf("load-balancer CIDR %q must lie in 127.0.0.0/8 and hold 4 addresses or more", o.LoadBalancerCIDR))
		} else {
			lbPool = p.Masked()
			// kwok hands out pod addresses from PodCIDR and the apiserver ClusterIPs from
			// ServiceCIDR; an overlap would give a load balancer a pod's or a Service's address.
			for _, c := range []string{o.PodCIDR, o.ServiceCIDR} {
				if other, err := netip.ParsePrefix(c); err == nil && other.Overlaps(lbPool) {
					errs = append(errs, fmt.Errorf("load-balancer CIDR %s overlaps %s", o.LoadBalancerCIDR, c))
				}
			}
		}
	}
	if len(o.Nodes) == 0 {
		errs = append(errs, errors.New("at least one node is required"))
	}
	seen := map[string]bool{}
	for _, n := range o.Nodes {
		if seen[n.Name] {
			errs = append(errs, fmt.Errorf("node %q listed twice", n.Name))
		}
		seen[n.Name] = true
		if msgs := validation.IsValidLabelValue(n.Zone); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("node %q: zone %q: %s", n.Name, n.Zone, strings.Join(msgs, "; ")))
		}
		ip, err := netip.ParseAddr(n.IP)
		if err != nil || !ip.IsLoopback() {
			errs = append(errs, fmt.Errorf("node %q: IP %q must be in 127.0.0.0/8", n.Name, n.IP))
		} else if lbPool.IsValid() && lbPool.Contains(ip) {
			errs = append(errs, fmt.Errorf("node %q: IP %s lies in the load-balancer CIDR %s", n.Name, n.IP, o.LoadBalancerCIDR))
		}
	}
	// mkfs.xfs refuses filesystems below 300 MiB.
	if o.DisksPerNode < 0 || o.DisksPerNode > 8 || (o.DisksPerNode > 0 && o.DiskSizeBytes < 320<<20) {
		errs = append(errs, fmt.Errorf("disks per node %d of %d bytes: want 0-8 disks of at least 320 MiB", o.DisksPerNode, o.DiskSizeBytes))
	}
	if o.ObjectStore && (o.DisableRunner || o.ObjectStoreBinary == "") {
		errs = append(errs, errors.New("the object store needs the process runner and a versitygw binary"))
	}
	if o.PoolLabelPrefix == "" {
		errs = append(errs, errors.New("pool label prefix is required"))
	}
	for _, r := range o.ImageRules {
		if err := r.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Ports of the components, derived from PortBase.
func (o *Options) APIServerPort() int  { return o.PortBase }
func (o *Options) EtcdClientPort() int { return o.PortBase + 1 }
func (o *Options) EtcdPeerPort() int   { return o.PortBase + 2 }
func (o *Options) KCMPort() int        { return o.PortBase + 3 }
func (o *Options) SchedulerPort() int  { return o.PortBase + 4 }
func (o *Options) KwokPort() int       { return o.PortBase + 5 }

// Paths inside Dir.
func (o *Options) Kubeconfig() string    { return filepath.Join(o.Dir, "kubeconfig") }
func (o *Options) LogDir() string        { return filepath.Join(o.Dir, "logs") }
func (o *Options) StateDir() string      { return filepath.Join(o.Dir, "state") }
func (o *Options) PKIDir() string        { return filepath.Join(o.StateDir(), "pki") }
func (o *Options) PidDir() string        { return filepath.Join(o.StateDir(), "pids") }
func (o *Options) VolumeDir() string     { return filepath.Join(o.StateDir(), "volumes") }
func (o *Options) PodDir() string        { return filepath.Join(o.StateDir(), "pods") }
func (o *Options) optionsFile() string   { return filepath.Join(o.StateDir(), "options.json") }
func (o *Options) readyFile() string     { return filepath.Join(o.StateDir(), "ready") }
func (o *Options) daemonPidFile() string { return filepath.Join(o.PidDir(), "daemon.pid") }

// kubernetesServiceIP is the first address of the service range, which the apiserver
// gives the "kubernetes" Service.
func (o *Options) kubernetesServiceIP() string {
	p, err := netip.ParsePrefix(o.ServiceCIDR)
	if err != nil {
		return ""
	}
	return p.Masked().Addr().Next().String()
}

func (o *Options) APIServerURL() string {
	return fmt.Sprintf("https://127.0.0.1:%d", o.APIServerPort())
}

func (o *Options) save() error {
	data, err := json.MarshalIndent(o, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(o.optionsFile(), data, 0o600)
}

// LoadOptions reads the options a running (or stopped) cluster in dir was started with.
func LoadOptions(dir string) (Options, error) {
	var o Options
	data, err := os.ReadFile(filepath.Join(dir, "state", "options.json"))
	if err != nil {
		return o, err
	}
	err = json.Unmarshal(data, &o)
	return o, err
}
