package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	veltrixv1 "github.com/opsuite/suite/api/veltrix/v1alpha1"
	"github.com/opsuite/suite/tools/internal/localcluster"
)

// vxChaosName is the chaos run's VeltrixCluster, in the sample's namespace.
const vxChaosName = "chaos-vx"

// vxChaos is the chaos run's VeltrixDB part: the sample (3 members, every key on each of
// them, one prepared disk per node) with reclaimPolicy Delete, written through members 0,
// 1 and 2 in turn.
type vxChaos struct {
	t    *testing.T
	size int32
	w    *vxWriter
}

func newVxChaos(t *testing.T) *vxChaos {
	t.Cleanup(func() {
		if out, err := kubectl(context.Background(), "delete", "vc", vxChaosName, "-n", vxNamespace, "--wait=true", "--timeout=3m", "--ignore-not-found"); err != nil {
			t.Logf("deleting VeltrixCluster %s: %v\n%s", vxChaosName, err, out)
		}
	})
	return &vxChaos{t: t, size: 3}
}

func (v *vxChaos) product() string  { return "veltrix" }
func (v *vxChaos) operator() string { return "veltrix-operator" }

func (v *vxChaos) create(ctx context.Context) {
	if err := vxUseAgentsPVRoot(ctx); err != nil {
		v.t.Fatal(err)
	}
	manifest := vxSampleOf(v.t, filepath.Join(env.root, "deploy", "samples", "veltrix.yaml"))
	for old, repl := range map[string]string{"name: " + vxName: "name: " + vxChaosName, "reclaimPolicy: Retain": "reclaimPolicy: Delete"} {
		if !strings.Contains(manifest, old) {
			v.t.Fatalf("the sample no longer holds %q", old)
		}
		manifest = strings.Replace(manifest, old, repl, 1)
	}
	if out, err := kubectlStdin(ctx, manifest, "apply", "-f", "-"); err != nil {
		v.t.Fatalf("applying the VeltrixCluster: %v\n%s", err, out)
	}
}

func (v *vxChaos) isReady(c *veltrixv1.VeltrixCluster) bool {
	r := meta.FindStatusCondition(c.Status.Conditions, veltrixv1.ConditionReady)
	return r != nil && r.Status == metav1.ConditionTrue && r.ObservedGeneration == c.Generation &&
		c.Status.State == veltrixv1.StateReady && c.Status.ReadyMembers == v.size && c.Status.Size == v.size
}

func (v *vxChaos) ready(ctx context.Context) bool {
	c, err := vxClusterNamed(ctx, vxChaosName)
	return err == nil && v.isReady(c)
}

// waitReady waits until the cluster is Ready with v.size members at its generation.
func (v *vxChaos) waitReady(ctx context.Context, step string) {
	v.t.Helper()
	last := ""
	err := poll(ctx, v.t, fmt.Sprintf("%s: VeltrixCluster %s Ready with %d members", step, vxChaosName, v.size), 8*time.Minute, func(ctx context.Context) (bool, error) {
		c, err := vxClusterNamed(ctx, vxChaosName)
		if err != nil {
			return transient(err)
		}
		line := fmt.Sprintf("%s %d/%d", c.Status.State, c.Status.ReadyMembers, c.Status.Size)
		if r := meta.FindStatusCondition(c.Status.Conditions, veltrixv1.ConditionReady); r != nil {
			line += fmt.Sprintf(" Ready=%s %s: %s", r.Status, r.Reason, r.Message)
		}
		if line != last {
			v.t.Logf("%s: %s", step, line)
			last = line
		}
		return v.isReady(c), nil
	})
	if err != nil {
		if out, kerr := kubectl(ctx, "get", "vc,pods,pvc,pv", "-o", "wide", "-n", vxNamespace); kerr == nil {
			v.t.Logf("%s", out)
		}
		diagnose(ctx, v.t, serviceByName("veltrix-operator"))
		v.t.Fatal(err)
	}
}

func (v *vxChaos) selector() string { return "app.kubernetes.io/instance=" + vxChaosName }

func (v *vxChaos) members(ctx context.Context) []string {
	return podIPs(ctx, vxNamespace, v.selector())
}

// addr is the text-protocol address of a member's pod now.
func (v *vxChaos) addr(ctx context.Context, ordinal int) (string, error) {
	p, err := env.client.CoreV1().Pods(vxNamespace).Get(ctx, fmt.Sprintf("%s-%d", vxChaosName, ordinal), metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	if p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
		return "", fmt.Errorf("pod %s is %s at %q", p.Name, p.Status.Phase, p.Status.PodIP)
	}
	return net.JoinHostPort(p.Status.PodIP, "9000"), nil
}

// start waits for Ready and starts the writer, through the members' addresses at the time
// of each batch.
func (v *vxChaos) start(ctx context.Context) {
	v.waitReady(ctx, "veltrix created")
	v.w = startVxWriterVia(ctx, "ch", v.addr)
	v.t.Cleanup(func() { v.w.stop() })
}

func (v *vxChaos) patch(ctx context.Context, p string) error {
	_, err := kubectl(ctx, "patch", "vc", vxChaosName, "-n", vxNamespace, "--type", "merge", "-p", p)
	return err
}

func (v *vxChaos) faults() []chaosFault {
	return []chaosFault{
		{name: "scale", run: func(ctx context.Context, _ *rand.Rand, log *chaosLog) error {
			to := 7 - v.size // 3 <-> 4
			if err := v.patch(ctx, fmt.Sprintf(`{"spec":{"size":%d}}`, to)); err != nil {
				return err
			}
			v.size = to
			log.add("veltrix scaled to %d members", to)
			return nil
		}},
		{name: "roll", member: true, once: true, run: func(ctx context.Context, _ *rand.Rand, log *chaosLog) error {
			if err := v.patch(ctx, `{"spec":{"version":"1.17.1","image":"`+vxMirror+`"}}`); err != nil {
				return err
			}
			log.add("veltrix rolls to %s:1.17.1", vxMirror)
			return nil
		}},
		{name: "delete-pod", member: true, run: func(ctx context.Context, rng *rand.Rand, log *chaosLog) error {
			return deleteMemberPod(ctx, rng, log, vxNamespace, v.selector())
		}},
		{name: "cut-member", member: true, run: func(ctx context.Context, rng *rand.Rand, log *chaosLog) error {
			all := v.members(ctx)
			if len(all) < 2 {
				return fmt.Errorf("%d veltrix members running", len(all))
			}
			cutMember(v.t, rng, log, "veltrix member", all[rng.IntN(len(all))], all)
			return nil
		}},
	}
}

func (v *vxChaos) finish(ctx context.Context) {
	v.waitReady(ctx, "veltrix after the chaos")
	written, failed, firstErr := v.w.stop()
	addr, err := v.addr(ctx, 0)
	if err != nil {
		v.t.Fatal(err)
	}
	s := vxSession(v.t, addr)
	defer s.close()
	lost := 0
	for k, val := range written {
		if got := s.do(v.t, "GET "+k); got != val {
			lost++
			if lost <= 10 {
				v.t.Errorf("veltrix GET %s = %q, want %q", k, got, val)
			}
		}
	}
	v.t.Logf("veltrix writer: %d acknowledged, %d failed (first: %s), %d lost (read through %s-0)", len(written), failed, firstErr, lost, vxChaosName)
	if lost > 0 {
		v.t.Errorf("veltrix lost %d of %d acknowledged keys under chaos", lost, len(written))
	}
	if len(written) < 100 {
		v.t.Errorf("only %d veltrix writes acknowledged during the chaos run: the writer hardly ran", len(written))
	}
}

// diskWatch is the chaos run's check on the node agents: no disk of any node formatted
// that was not asked for. It reads every node's loop devices (and their partitions) at the
// start, and the filesystem UUIDs of the volumes the cluster's prepared disks became, for
// as long as the run lasts.
type diskWatch struct {
	t       *testing.T
	cluster string
	before  map[string]string // device -> filesystem UUID ("" when none)
	cancel  context.CancelFunc
	done    chan struct{}

	mu    sync.Mutex
	asked map[string]bool // filesystem UUIDs of the cluster's volumes, ever seen
}

func watchDisks(ctx context.Context, t *testing.T, cluster string) *diskWatch {
	t.Helper()
	if env.local == nil {
		t.Fatalf("the disk check reads the local cluster's loop devices; E2E_KUBECONFIG=%s has none here", env.kubeconfig)
	}
	if os.Geteuid() != 0 {
		t.Fatal("the disk check needs root: blkid on the nodes' loop devices")
	}
	if _, err := exec.LookPath("blkid"); err != nil {
		t.Fatalf("blkid not found: %v", err)
	}
	w := &diskWatch{t: t, cluster: cluster, before: probeNodeDisks(t), asked: map[string]bool{}, done: make(chan struct{})}
	wctx, cancel := context.WithCancel(ctx)
	w.cancel = cancel
	go func() {
		defer close(w.done)
		for {
			w.record(wctx)
			select {
			case <-wctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}()
	t.Cleanup(w.stop)
	return w
}

func (w *diskWatch) stop() {
	w.cancel()
	<-w.done
}

// record notes the filesystem UUIDs of the cluster's volumes now.
func (w *diskWatch) record(ctx context.Context) {
	pvs, err := env.client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{LabelSelector: "veltrix.io/cluster=" + w.cluster})
	if err != nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, pv := range pvs.Items {
		if u := pv.Annotations["veltrix.io/filesystem-uuid"]; u != "" {
			w.asked[u] = true
		}
	}
}

// check compares the devices now with the start: a filesystem that is new must be one of
// the cluster's volumes, and one that is gone or replaced must have been one.
func (w *diskWatch) check(ctx context.Context) {
	w.record(ctx)
	w.stop()
	after := probeNodeDisks(w.t)
	w.mu.Lock()
	defer w.mu.Unlock()
	made, wiped := 0, 0
	for dev, now := range after {
		was := w.before[dev]
		if now == was {
			continue
		}
		if now != "" {
			made++
			if !w.asked[now] {
				w.t.Errorf("%s holds filesystem %s, made during the chaos run, which no volume of %s asked for", dev, now, w.cluster)
			}
		}
		if was != "" {
			wiped++
			if !w.asked[was] {
				w.t.Errorf("%s held filesystem %s before the chaos run, not %s's, and now holds %q", dev, was, w.cluster, now)
			}
		}
	}
	for dev, was := range w.before {
		if _, ok := after[dev]; !ok && was != "" {
			wiped++
			if !w.asked[was] {
				w.t.Errorf("%s held filesystem %s before the chaos run, not %s's, and is gone", dev, was, w.cluster)
			}
		}
	}
	w.t.Logf("node disks: %d devices and partitions read, %d filesystems made and %d replaced or removed during the run, all of them %s's (%d volume filesystems seen)",
		len(after), made, wiped, w.cluster, len(w.asked))
}

// probeNodeDisks reads the filesystem UUID of every node's loop devices and their
// partitions.
func probeNodeDisks(t *testing.T) map[string]string {
	t.Helper()
	disks, err := localcluster.NodeDisks(*env.local)
	if err != nil {
		t.Fatalf("listing the nodes' loop devices: %v", err)
	}
	out := map[string]string{}
	for _, devs := range disks {
		for _, dev := range devs {
			parts, err := filepath.Glob(dev + "p*")
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range append([]string{dev}, parts...) {
				out[d] = blkidProbe(t, d)["UUID"]
			}
		}
	}
	if len(out) == 0 {
		t.Fatal(errors.New("the local cluster's nodes have no loop devices"))
	}
	return out
}
