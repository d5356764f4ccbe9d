package controller_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	veltrixv1 "github.com/opsuite/suite/api/veltrix/v1alpha1"
	nodeagentv1 "github.com/opsuite/suite/proto/nodeagent/v1"
	"github.com/opsuite/suite/services/veltrix-operator/internal/controller"
	"github.com/opsuite/suite/services/veltrix-operator/internal/disks"
	"github.com/opsuite/suite/services/veltrix-operator/internal/resources"
	"github.com/opsuite/suite/shared/testenv"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestBadAgentAnswers: an agent that refuses the operator (no preparer role) and one without
// a matching disk each end in a DisksPrepared condition and a Warning event that say what is
// wrong; no StatefulSet is made without disks, and the agent is asked with back-off, not in
// a loop.
func TestBadAgentAnswers(t *testing.T) {
	for _, tc := range []struct {
		name     string
		preparer bool
		nvmeOnly bool
		reason   string
		message  string
	}{
		{"permission denied", false, false, "AgentPermissionDenied", "node-a: AgentPermissionDenied (the node agent denied the operator (bind the operator to the agent's preparer ClusterRole))"},
		{"no matching disks", true, true, "NoMatchingDisks", "node-a: NoMatchingDisks (0 eligible devices match the selector, 1 requested)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			sa := strings.ReplaceAll(tc.name, " ", "-")
			f := startFleet(t, operatorTokens(t, sa, tc.preparer), 1<<30, []string{"node-a"}, nil)
			ns := testenv.NewNamespace(t, env.Client, "vx")
			startController(t, f, ns)
			c := newCluster(t, ns, func(c *veltrixv1.VeltrixCluster) {
				c.Spec.Size, c.Spec.ReplicationFactor = 1, 1
				c.Spec.DiskSelector.NVMeOnly = ptr.To(tc.nvmeOnly)
				// Without the fallback a machine whose vm.max_map_count is low would have
				// node-a excluded before its disks are asked for (TestNodesExcludedWithoutFallback).
				c.Spec.IndexMapFallback = true
			})
			cond := condition(t, c, veltrixv1.ConditionDisksPrepared, metav1.ConditionFalse, tc.reason)
			if !strings.Contains(cond.Message, tc.message) || !strings.Contains(cond.Message, "0 of 1 nodes usable") {
				t.Errorf("DisksPrepared message %q lacks %q", cond.Message, tc.message)
			}
			ready := condition(t, c, veltrixv1.ConditionReady, metav1.ConditionFalse, veltrixv1.ReasonDisksNotPrepared)
			if ready.Message == "" {
				t.Error("Ready has no message")
			}
			testenv.Eventually(t, 10*time.Second, "a Warning event "+tc.reason, func() (bool, string) {
				ev := eventReasons(t, c)
				return ev[tc.reason] == corev1.EventTypeWarning, "events so far: " + strings.Join(keys(ev), ", ")
			})
			err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "vx"}, &appsv1.StatefulSet{})
			if !apierrors.IsNotFound(err) {
				t.Errorf("a StatefulSet without disks: %v", err)
			}
			var live veltrixv1.VeltrixCluster
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(c), &live); err != nil || live.Status.State != veltrixv1.StateFailed {
				t.Errorf("state %q (%v), want Failed", live.Status.State, err)
			}
			before := f.calls.count("node-a")
			time.Sleep(4 * time.Second)
			if n := f.calls.count("node-a") - before; n > 6 {
				t.Errorf("node-a was asked %d times in 4 s: a hot loop", n)
			}
			if tc.preparer {
				if p := f.prepared(t, "node-a"); len(p) != 0 {
					t.Errorf("the agent prepared %d disks for a selector nothing matches", len(p))
				}
			}
		})
	}
}

// TestNoAgents: an operator started without node agents says so on the cluster.
func TestNoAgents(t *testing.T) {
	ns := testenv.NewNamespace(t, env.Client, "vx")
	env.StartManager(t, func(mgr ctrl.Manager) error {
		return controller.Setup(mgr, controller.Config{})
	}, testenv.InNamespaces(ns))
	c := newCluster(t, ns, func(c *veltrixv1.VeltrixCluster) { c.Spec.Size, c.Spec.ReplicationFactor = 1, 1 })
	condition(t, c, veltrixv1.ConditionReady, metav1.ConditionFalse, veltrixv1.ReasonAgentsMissing)
}

// TestRetainKeepsVolumes: deleting a cluster with reclaim policy Retain keeps its volumes
// and its prepared disks, and says so in an event.
func TestRetainKeepsVolumes(t *testing.T) {
	ctx := context.Background()
	f := startFleet(t, operatorTokens(t, "retain", true), 1<<30, []string{"node-b"}, nil)
	ns := testenv.NewNamespace(t, env.Client, "vx")
	startController(t, f, ns)
	c := newCluster(t, ns, func(c *veltrixv1.VeltrixCluster) {
		c.Spec.Size, c.Spec.ReplicationFactor = 1, 1
		c.Spec.DiskSelector.NVMeOnly = ptr.To(false)
		c.Spec.IndexMapFallback = true
	})
	condition(t, c, veltrixv1.ConditionDisksPrepared, metav1.ConditionTrue, veltrixv1.ReasonPrepared)
	var live veltrixv1.VeltrixCluster
	testenv.Eventually(t, 30*time.Second, "the finalizer", func() (bool, string) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(c), &live); err != nil {
			return false, err.Error()
		}
		return len(live.Finalizers) == 1 && live.Finalizers[0] == veltrixv1.Finalizer, strings.Join(live.Finalizers, ",")
	})
	if err := env.Client.Delete(ctx, c); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 60*time.Second, "the cluster gone", func() (bool, string) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(c), &veltrixv1.VeltrixCluster{})
		return apierrors.IsNotFound(err), "still there"
	})
	var pvs corev1.PersistentVolumeList
	if err := env.Client.List(ctx, &pvs, client.MatchingLabels(resources.VolumeLabels(c))); err != nil {
		t.Fatal(err)
	}
	if len(pvs.Items) != 1 || !pvs.Items[0].DeletionTimestamp.IsZero() {
		t.Errorf("reclaim policy Retain: %d volumes, want the one kept", len(pvs.Items))
	}
	if p := f.prepared(t, "node-b"); len(p) != 1 {
		t.Errorf("reclaim policy Retain: node-b has %d prepared disks, want 1 kept", len(p))
	}
	if ev := eventReasons(t, c); ev[controller.EventVolumesRetained] != corev1.EventTypeNormal {
		t.Errorf("events %v lack VolumesRetained", ev)
	}
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestVolumeDeviceMoved: when the raw partition of a prepared disk is found under another
// device path than its Block volume names (a kernel name that changed across a reboot; here
// the volume is re-made with an old path), the operator reports it instead of failing on
// the immutable path every pass.
func TestVolumeDeviceMoved(t *testing.T) {
	ctx := context.Background()
	f := startFleet(t, operatorTokens(t, "moved", true), 1<<30, []string{"node-c"}, nil)
	ns := testenv.NewNamespace(t, env.Client, "vx")
	// Volumes are not watched: a pass every second finds the re-made one.
	startController(t, f, ns, func(cfg *controller.Config, _ ctrl.Manager) { cfg.Resync = time.Second })
	c := newCluster(t, ns, func(c *veltrixv1.VeltrixCluster) {
		c.Spec.Size, c.Spec.ReplicationFactor = 1, 1
		c.Spec.DiskSelector.NVMeOnly = ptr.To(false)
		c.Spec.RawVLog = veltrixv1.RawVLogSpec{Enabled: true, XFSPartitionPercent: 40}
		c.Spec.IndexMapFallback = true
	})
	condition(t, c, veltrixv1.ConditionDisksPrepared, metav1.ConditionTrue, veltrixv1.ReasonPrepared)
	prepared := f.prepared(t, "node-c")
	if len(prepared) != 1 || prepared[0].GetRawDevice() == "" {
		t.Fatalf("prepared %v, want one split disk", prepared)
	}
	name := "veltrix-" + prepared[0].GetFilesystemUuid() + "-vlog"
	var pv corev1.PersistentVolume
	if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, &pv); err != nil {
		t.Fatal(err)
	}
	// Re-make the volume as an operator that named raw partitions by kernel name made it
	// (no PV controller runs here to drop the protection finalizer).
	remake := func(path string) {
		t.Helper()
		var live corev1.PersistentVolume
		if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, &live); err != nil {
			t.Fatal(err)
		}
		live.Finalizers = nil
		if err := env.Client.Update(ctx, &live); err != nil {
			t.Fatal(err)
		}
		if err := env.Client.Delete(ctx, &live); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, 10*time.Second, "the volume gone", func() (bool, string) {
			return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Name: name}, &corev1.PersistentVolume{})), "still there"
		})
		old := pv.DeepCopy()
		old.ResourceVersion, old.UID, old.CreationTimestamp, old.DeletionTimestamp, old.ManagedFields, old.Finalizers = "", "", metav1.Time{}, nil, nil, nil
		old.Spec.Local.Path = path
		if err := env.Client.Create(ctx, old); err != nil {
			t.Fatal(err)
		}
	}
	if want := "/dev/disk/by-partuuid/" + prepared[0].GetRawPartitionUuid(); pv.Spec.Local.Path != want {
		t.Fatalf("Block volume at %s, want %s", pv.Spec.Local.Path, want)
	}
	// Named by the partition's current kernel name: still the partition, nothing to report.
	remake(prepared[0].GetRawDevice())
	time.Sleep(3 * time.Second) // three passes
	condition(t, c, veltrixv1.ConditionDisksPrepared, metav1.ConditionTrue, veltrixv1.ReasonPrepared)
	if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, &pv); err != nil || pv.Spec.Local.Path != prepared[0].GetRawDevice() {
		t.Fatalf("the volume named by kernel name: %v, path %s", err, pv.Spec.Local.Path)
	}
	// Named by a kernel name the partition no longer has (a reboot renamed it).
	remake("/dev/old-name-p2")
	cond := condition(t, c, veltrixv1.ConditionDisksPrepared, metav1.ConditionFalse, veltrixv1.ReasonVolumeDeviceMoved)
	if !strings.Contains(cond.Message, name+" (/dev/old-name-p2, now "+prepared[0].GetRawDevice()+")") {
		t.Errorf("message %q does not name the volume and both paths", cond.Message)
	}
}

// TestNodesExcludedWithoutFallback: a node whose vm.max_map_count is below the minimum
// (its agent says so, and may not raise it) is left out when spec.indexMapFallback is off:
// node-a, which would be chosen first. A NodesExcluded Warning event names it, no disk of it
// is prepared, and the cluster runs on node-b and node-c without VELTRIXDB_INDEX=map; from
// the next pass on, only the nodes used are asked, and MaxMapCountLow=False names them.
// Scaled to 3, the cluster needs node-a again: MaxMapCountLow=True/NodesExcluded names it
// alone, DisksPrepared=False says why, and still no disk of node-a is prepared.
func TestNodesExcludedWithoutFallback(t *testing.T) {
	ctx := context.Background()
	f := startFleet(t, operatorTokens(t, "excluded", true), 1<<30, []string{"node-a", "node-b", "node-c"}, nil)
	ns := testenv.NewNamespace(t, env.Client, "vx")
	// The machine's own value would decide for every node alike: the agents' answers are
	// set per node instead (node-a, the first candidate, low), their disks stay real.
	agents := &sysctlAgents{countingAgents: f.calls, value: map[string]int64{"node-a": 65530, "node-b": 262144, "node-c": 1 << 20}}
	startController(t, f, ns, func(cfg *controller.Config, _ ctrl.Manager) { cfg.Agents = agents })
	c := newCluster(t, ns, func(c *veltrixv1.VeltrixCluster) {
		c.Spec.Size, c.Spec.ReplicationFactor = 2, 2
		c.Spec.DiskSelector.NVMeOnly = ptr.To(false)
	})
	testenv.Eventually(t, 60*time.Second, "a NodesExcluded Warning event", func() (bool, string) {
		ev := eventReasons(t, c)
		return ev[veltrixv1.ReasonNodesExcluded] == corev1.EventTypeWarning, fmt.Sprint(ev)
	})
	cond := condition(t, c, veltrixv1.ConditionMaxMapCountLow, metav1.ConditionFalse, veltrixv1.ReasonMaxMapCountMet)
	if cond.Message != "vm.max_map_count is at least 262144 on node-b, node-c" {
		t.Errorf("MaxMapCountLow message %q, want it to name node-b and node-c", cond.Message)
	}
	condition(t, c, veltrixv1.ConditionDisksPrepared, metav1.ConditionTrue, veltrixv1.ReasonPrepared)
	var live veltrixv1.VeltrixCluster
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(c), &live); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(live.Status.Nodes, []string{"node-b", "node-c"}) {
		t.Errorf("status.nodes %v, want node-b and node-c", live.Status.Nodes)
	}
	var env1 corev1.ConfigMap
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: resources.ConfigMapName(c)}, &env1); err != nil {
		t.Fatal(err)
	}
	if env1.Data["VELTRIXDB_INDEX"] == "map" {
		t.Errorf("VELTRIXDB_INDEX=map without spec.indexMapFallback: %v", env1.Data)
	}

	// Three members need node-a: it is asked again on every pass, and excluded again.
	live.Spec.Size = 3
	if err := env.Client.Update(ctx, &live); err != nil {
		t.Fatal(err)
	}
	cond = condition(t, c, veltrixv1.ConditionMaxMapCountLow, metav1.ConditionTrue, veltrixv1.ReasonNodesExcluded)
	if !strings.Contains(cond.Message, "below 262144 on node-a and") || strings.Contains(cond.Message, "node-b") || strings.Contains(cond.Message, "node-c") {
		t.Errorf("MaxMapCountLow message %q does not name node-a alone", cond.Message)
	}
	cond = condition(t, c, veltrixv1.ConditionDisksPrepared, metav1.ConditionFalse, veltrixv1.ReasonNotEnoughNodes)
	if !strings.Contains(cond.Message, "2 of 3 nodes usable; node-a: vm.max_map_count below 262144") {
		t.Errorf("DisksPrepared message %q does not say node-a is the missing node and why", cond.Message)
	}
	if n := f.calls.count("node-a"); n != 0 {
		t.Errorf("PrepareDisks asked %d times of the excluded node-a", n)
	}
}

// sysctlAgents answers EnsureSysctl with a set value per node (met when at least the
// minimum; never raised) and passes every other call to the real agents.
type sysctlAgents struct {
	*countingAgents
	value map[string]int64
}

func (s *sysctlAgents) Node(name string) disks.Agent {
	return sysctlAgent{Agent: s.countingAgents.Node(name), value: s.value[name]}
}

type sysctlAgent struct {
	disks.Agent
	value int64
}

func (a sysctlAgent) EnsureSysctl(_ context.Context, req *nodeagentv1.EnsureSysctlRequest) (*nodeagentv1.EnsureSysctlResponse, error) {
	return &nodeagentv1.EnsureSysctlResponse{PreviousValue: a.value, Status: &nodeagentv1.SysctlStatus{
		Name: req.GetName(), Value: a.value, Minimum: req.GetMinimum(), Met: a.value >= req.GetMinimum()}}, nil
}

// TestLyingAgentMakesNoVolume: an agent whose answer lies about what it prepared (here the
// real agent's answer, altered on its way back, as a compromised agent would send it) gets
// no PersistentVolume: DisksPrepared=False (AgentReplyInvalid) and a Warning event say what
// is wrong without repeating the value the agent sent, and no StatefulSet is made.
func TestLyingAgentMakesNoVolume(t *testing.T) {
	for _, tc := range []struct {
		name    string
		rawVLog bool
		lie     func(d *nodeagentv1.PreparedDisk)
		message string
		value   string
	}{
		{"filesystem UUID not a UUID", false, func(d *nodeagentv1.PreparedDisk) { d.FilesystemUuid = "kube-system-etcd" },
			"filesystem UUID is not a canonical UUID", "kube-system-etcd"},
		{"PV path outside the PV root", false, func(d *nodeagentv1.PreparedDisk) { d.PvPath = "/var/lib/etcd" },
			"PV path is not the requested", "/var/lib/etcd"},
		{"PV path climbing out of the root", false, func(d *nodeagentv1.PreparedDisk) { d.PvPath += "/../../../../../../etc" },
			"PV path is not the requested", "/etc"},
		{"raw partition GUID not a GUID", true, func(d *nodeagentv1.PreparedDisk) { d.RawPartitionUuid = "../../../var/lib/etcd" },
			"raw partition GUID is not a canonical UUID", "var/lib/etcd"},
		{"raw device outside /dev", true, func(d *nodeagentv1.PreparedDisk) { d.RawPartitionUuid, d.RawDevice = "", "/var/lib/etcd/member" },
			"raw device path is not a clean path under /dev", "/var/lib/etcd"},
		{"negative size", false, func(d *nodeagentv1.PreparedDisk) { d.XfsSizeBytes = -1 << 40 },
			"XFS size out of range", "-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			sa := "liar-" + strings.ReplaceAll(strings.ToLower(tc.name), " ", "-")
			sa = strings.NewReplacer("/", "", "(", "", ")", "").Replace(sa)
			f := startFleet(t, operatorTokens(t, sa, true), 1<<30, []string{"node-a"}, nil)
			ns := testenv.NewNamespace(t, env.Client, "vx")
			startController(t, f, ns, func(cfg *controller.Config, _ ctrl.Manager) {
				cfg.Agents = lyingAgents{inner: f.calls, lie: tc.lie}
			})
			c := newCluster(t, ns, func(c *veltrixv1.VeltrixCluster) {
				c.Spec.Size, c.Spec.ReplicationFactor = 1, 1
				c.Spec.DiskSelector.NVMeOnly = ptr.To(false)
				c.Spec.IndexMapFallback = true
				if tc.rawVLog {
					c.Spec.RawVLog = veltrixv1.RawVLogSpec{Enabled: true, XFSPartitionPercent: 40}
				}
			})
			cond := condition(t, c, veltrixv1.ConditionDisksPrepared, metav1.ConditionFalse, "AgentReplyInvalid")
			if !strings.Contains(cond.Message, "node-a: AgentReplyInvalid (disk 1 of the reply: "+tc.message) {
				t.Errorf("DisksPrepared message %q does not say %q", cond.Message, tc.message)
			}
			if strings.Contains(cond.Message, tc.value) {
				t.Errorf("DisksPrepared message %q repeats the agent's value %q", cond.Message, tc.value)
			}
			testenv.Eventually(t, 10*time.Second, "a Warning event AgentReplyInvalid", func() (bool, string) {
				ev := eventReasons(t, c)
				return ev["AgentReplyInvalid"] == corev1.EventTypeWarning, "events so far: " + strings.Join(keys(ev), ", ")
			})
			// A few passes more: still nothing made of the answer.
			time.Sleep(2 * time.Second)
			var pvs corev1.PersistentVolumeList
			if err := env.Client.List(ctx, &pvs); err != nil {
				t.Fatal(err)
			}
			for _, pv := range pvs.Items {
				if pv.Labels[resources.LabelNamespace] == ns {
					t.Errorf("PersistentVolume %s (local %v) made from a lying answer", pv.Name, pv.Spec.Local)
				}
			}
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "vx"}, &appsv1.StatefulSet{}); !apierrors.IsNotFound(err) {
				t.Errorf("a StatefulSet on a lying agent's disks: %v", err)
			}
		})
	}
}

// lyingAgents pass every call to the real agents and alter the disks their PrepareDisks
// answers report: the agent's reply is what is under test, the agent itself is real.
type lyingAgents struct {
	inner disks.Agents
	lie   func(*nodeagentv1.PreparedDisk)
}

func (l lyingAgents) Node(name string) disks.Agent {
	return lyingAgent{Agent: l.inner.Node(name), lie: l.lie}
}

type lyingAgent struct {
	disks.Agent
	lie func(*nodeagentv1.PreparedDisk)
}

func (a lyingAgent) PrepareDisks(ctx context.Context, req *nodeagentv1.PrepareDisksRequest) (*nodeagentv1.PrepareDisksResponse, error) {
	resp, err := a.Agent.PrepareDisks(ctx, req)
	for _, d := range resp.GetDisks() {
		a.lie(d)
	}
	return resp, err
}

// TestLyingAgentCannotRepinVolume: an agent that reports the filesystem UUID of a disk whose
// PersistentVolume is pinned to another node (here node-b's volume of the same cluster,
// node-b not asked in this pass) gets AgentReplyInvalid, and the volume keeps its node.
func TestLyingAgentCannotRepinVolume(t *testing.T) {
	ctx := context.Background()
	const stolen = "5d1c0b7a-3e2f-4a6b-9c8d-7e6f5a4b3c2d"
	f := startFleet(t, operatorTokens(t, "liar-repin", true), 1<<30, []string{"node-a"}, nil)
	ns := testenv.NewNamespace(t, env.Client, "vx")
	c := &veltrixv1.VeltrixCluster{ObjectMeta: metav1.ObjectMeta{Name: "vx", Namespace: ns}}
	labels := resources.VolumeLabels(c)
	labels[resources.LabelNode] = "node-b"
	mode := corev1.PersistentVolumeFilesystem
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "veltrix-" + stolen, Labels: labels},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              "local-nvme",
			VolumeMode:                    &mode,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: f.pvRoot("node-a") + "/veltrix/" + ns + "/vx/slot-0"}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: resources.HostnameLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"node-b"}}},
			}}}},
		},
	}
	if err := env.Client.Create(ctx, pv); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), pv) })
	startController(t, f, ns, func(cfg *controller.Config, _ ctrl.Manager) {
		cfg.Agents = lyingAgents{inner: f.calls, lie: func(d *nodeagentv1.PreparedDisk) { d.FilesystemUuid = stolen }}
	})
	newCluster(t, ns, func(c *veltrixv1.VeltrixCluster) {
		c.Spec.Size, c.Spec.ReplicationFactor = 1, 1
		c.Spec.DiskSelector.NVMeOnly = ptr.To(false)
		c.Spec.IndexMapFallback = true
	})
	cond := condition(t, c, veltrixv1.ConditionDisksPrepared, metav1.ConditionFalse, "AgentReplyInvalid")
	if !strings.Contains(cond.Message, "node-a: AgentReplyInvalid (a filesystem UUID whose volume is on node node-b)") {
		t.Errorf("DisksPrepared message %q does not say the volume is node-b's", cond.Message)
	}
	time.Sleep(2 * time.Second)
	var live corev1.PersistentVolume
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pv), &live); err != nil {
		t.Fatal(err)
	}
	if live.Labels[resources.LabelNode] != "node-b" || live.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions[0].Values[0] != "node-b" {
		t.Errorf("node-b's volume re-pinned: labels %v, affinity %v", live.Labels, live.Spec.NodeAffinity.Required)
	}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "vx"}, &appsv1.StatefulSet{}); !apierrors.IsNotFound(err) {
		t.Errorf("a StatefulSet on a lying agent's disks: %v", err)
	}
}
