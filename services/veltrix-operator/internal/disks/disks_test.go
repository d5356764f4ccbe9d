package disks

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	veltrixv1 "github.com/opsuite/suite/api/veltrix/v1alpha1"
	nodeagentv1 "github.com/opsuite/suite/proto/nodeagent/v1"
	"github.com/opsuite/suite/services/veltrix-operator/internal/resources"
	"github.com/opsuite/suite/shared/nodeagent"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func cluster(mut ...func(*veltrixv1.VeltrixCluster)) *veltrixv1.VeltrixCluster {
	c := &veltrixv1.VeltrixCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "vx", Namespace: "db"},
		Spec:       veltrixv1.VeltrixClusterSpec{Size: 3, ReplicationFactor: 3, DisksPerNode: 2, StorageClassName: "local-nvme"},
	}
	for _, m := range mut {
		m(c)
	}
	return c
}

func node(name string, labels map[string]string, taints ...corev1.Taint) corev1.Node {
	return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{Taints: taints}}
}

func TestCandidates(t *testing.T) {
	taint := corev1.Taint{Key: "workload", Value: "veltrixdb", Effect: corev1.TaintEffectNoSchedule}
	soft := corev1.Taint{Key: "soft", Effect: corev1.TaintEffectPreferNoSchedule}
	cordoned := node("d-cordoned", map[string]string{"nvme": "true"})
	cordoned.Spec.Unschedulable = true
	nodes := []corev1.Node{
		node("c-nvme", map[string]string{"nvme": "true"}),
		node("a-nvme-tainted", map[string]string{"nvme": "true"}, taint),
		node("b-plain", nil),
		node("e-nvme-soft", map[string]string{"nvme": "true"}, soft),
		cordoned,
		// Tenancy: node-pool labels under the default prefix and under another one.
		node("f-lent-db", map[string]string{"nvme": "true", "pool.opsuite.io/namespace": "db"}),
		node("g-lent-other", map[string]string{"nvme": "true", "pool.opsuite.io/namespace": "other"}),
		node("h-lent-nobody", map[string]string{"nvme": "true", "pool.opsuite.io/namespace": ""}),
		node("i-pool-type-only", map[string]string{"nvme": "true", "pool.opsuite.io/type": "nvme"}),
		node("j-lent-other-by-acme", map[string]string{"nvme": "true", "pool.acme.io/namespace": "other"}),
	}
	for _, tc := range []struct {
		name   string
		c      *veltrixv1.VeltrixCluster
		prefix string
		want   []string
	}{
		{"no selector, no tolerations", cluster(), DefaultPoolLabelPrefix, []string{"b-plain", "c-nvme", "e-nvme-soft", "f-lent-db", "h-lent-nobody", "i-pool-type-only", "j-lent-other-by-acme"}},
		{"selector", cluster(func(c *veltrixv1.VeltrixCluster) { c.Spec.NodeSelector = map[string]string{"nvme": "true"} }), DefaultPoolLabelPrefix,
			[]string{"c-nvme", "e-nvme-soft", "f-lent-db", "h-lent-nobody", "i-pool-type-only", "j-lent-other-by-acme"}},
		{"selector and toleration", cluster(func(c *veltrixv1.VeltrixCluster) {
			c.Spec.NodeSelector = map[string]string{"nvme": "true"}
			c.Spec.Tolerations = []corev1.Toleration{{Key: "workload", Value: "veltrixdb", Effect: corev1.TaintEffectNoSchedule}}
		}), DefaultPoolLabelPrefix, []string{"a-nvme-tainted", "c-nvme", "e-nvme-soft", "f-lent-db", "h-lent-nobody", "i-pool-type-only", "j-lent-other-by-acme"}},
		{"a cluster of namespace other", cluster(func(c *veltrixv1.VeltrixCluster) {
			c.Namespace, c.Spec.NodeSelector = "other", map[string]string{"nvme": "true"}
		}), DefaultPoolLabelPrefix, []string{"c-nvme", "e-nvme-soft", "g-lent-other", "h-lent-nobody", "i-pool-type-only", "j-lent-other-by-acme"}},
		{"the agents' prefix is pool.acme.io", cluster(func(c *veltrixv1.VeltrixCluster) { c.Spec.NodeSelector = map[string]string{"nvme": "true"} }), "pool.acme.io",
			[]string{"c-nvme", "e-nvme-soft", "f-lent-db", "g-lent-other", "h-lent-nobody", "i-pool-type-only"}},
		{"a selector naming another namespace's pool", cluster(func(c *veltrixv1.VeltrixCluster) {
			c.Spec.NodeSelector = map[string]string{"pool.opsuite.io/namespace": "other"}
		}), DefaultPoolLabelPrefix, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Candidates(tc.c, nodes, tc.prefix); !slices.Equal(got, tc.want) {
				t.Errorf("candidates %v, want %v", got, tc.want)
			}
		})
	}
}

// TestKeepUsed: a node the cluster used is asked again unless it was lent to another
// namespace since; one no longer listed is kept (its volumes pin members).
func TestKeepUsed(t *testing.T) {
	nodes := []corev1.Node{
		node("a", nil),
		node("b", map[string]string{"pool.opsuite.io/namespace": "other"}),
		node("c", map[string]string{"pool.opsuite.io/namespace": "db"}),
	}
	got := KeepUsed(cluster(), nodes, DefaultPoolLabelPrefix, []string{"a", "b", "c", "gone"})
	if want := []string{"a", "c", "gone"}; !slices.Equal(got, want) {
		t.Errorf("kept %v, want %v", got, want)
	}
}

func TestPrepareRequest(t *testing.T) {
	c := cluster(func(c *veltrixv1.VeltrixCluster) {
		minSize, maxSize := resource.MustParse("100Gi"), resource.MustParse("4Ti")
		c.Spec.DiskSelector = veltrixv1.DiskSelector{Model: "PM1733", MinSize: &minSize, MaxSize: &maxSize}
		c.Spec.RawVLog = veltrixv1.RawVLogSpec{Enabled: true, XFSPartitionPercent: 20}
	})
	r := PrepareRequest(c, "/mnt/opsuite")
	s := r.GetSelector()
	if s.GetModel() != "PM1733" || s.GetMinSizeBytes() != 100<<30 || s.GetMaxSizeBytes() != 4<<40 || !s.GetNvmeOnly() || s.GetCount() != 2 || len(s.GetPaths()) != 0 {
		t.Errorf("selector %v", s)
	}
	if r.GetXfsPercent() != 20 || r.GetPvPath() != "/mnt/opsuite/veltrix/db/vx/slot-0" || r.GetNamespace() != "db" {
		t.Errorf("xfs %d pv %s namespace %q", r.GetXfsPercent(), r.GetPvPath(), r.GetNamespace())
	}
	off := PrepareRequest(cluster(func(c *veltrixv1.VeltrixCluster) {
		c.Spec.DiskSelector.NVMeOnly = new(false)
		c.Spec.RawVLog = veltrixv1.RawVLogSpec{XFSPartitionPercent: 20}
	}), "/mnt/opsuite")
	if off.GetXfsPercent() != 0 || off.GetSelector().GetNvmeOnly() {
		t.Errorf("without rawVLog: xfs %d nvmeOnly %v", off.GetXfsPercent(), off.GetSelector().GetNvmeOnly())
	}
	rel := ReleaseRequest(c, "/mnt/opsuite", true)
	if rel.GetPvPath() != r.GetPvPath() || !rel.GetWipe() || len(rel.GetDevices()) != 0 || rel.GetNamespace() != "db" {
		t.Errorf("release %v: by PV path, never by kernel name", rel)
	}
}

const (
	uuidA = "0a6d1d7e-5f1c-4c4e-9b7a-2f0e3c1d4b5a"
	uuidB = "1b7e2e8f-6a2d-4d5f-8c8b-3a1f4d2e5c6b"
	guidB = "2c8f3f9a-7b3e-4e6a-9d9c-4b2a5e3f6d7c"
)

func TestFromAgent(t *testing.T) {
	req := &nodeagentv1.PrepareDisksRequest{Selector: &nodeagentv1.DeviceSelector{Count: 2}, XfsPercent: 20, PvPath: "/p"}
	prepared := []*nodeagentv1.PreparedDisk{
		{Device: "/dev/nvme0n1", FilesystemUuid: uuidB, PvPath: "/p/nvme0n1", XfsSizeBytes: 10, RawDevice: "/dev/nvme0n1p2", RawSizeBytes: 40, DiskGuid: guidB, State: "ready"},
		{Device: "/dev/nvme1n1", FilesystemUuid: uuidA, PvPath: "/p/nvme1n1", XfsSizeBytes: 11, RawDevice: "/dev/nvme1n1p2", RawSizeBytes: 44, Wwn: "w", Serial: "s", State: "ready"},
	}
	got, err := FromAgent("n1", req, prepared)
	if err != nil {
		t.Fatal(err)
	}
	// Indexed by filesystem UUID, not by kernel name: nvme1n1 is index 0.
	if len(got) != 2 || got[0].FilesystemUUID != uuidA || got[0].Index != 0 || got[1].Index != 1 || got[1].RawDevice != "/dev/nvme0n1p2" || got[0].WWN != "w" || got[1].Node != "n1" {
		t.Errorf("disks %+v", got)
	}
	prepared[0].State = "missing"
	if _, err := FromAgent("n1", req, prepared); err == nil {
		t.Error("a missing disk was taken for a prepared one")
	}
	prepared[0].State, prepared[0].FilesystemUuid = "ready", "veltrix-data"
	var bad *BadReply
	if _, err := FromAgent("n1", req, prepared); !errors.As(err, &bad) {
		t.Errorf("a filesystem UUID that is not one: %v, want a BadReply", err)
	}
}

// TestCheckReply: every way an agent's answer can lie about what it prepared is refused
// with a stable message that does not repeat the value; honest answers pass.
func TestCheckReply(t *testing.T) {
	one := &nodeagentv1.PrepareDisksRequest{Selector: &nodeagentv1.DeviceSelector{Count: 1}, PvPath: "/mnt/opsuite/veltrix/db/vx/slot-0"}
	split := &nodeagentv1.PrepareDisksRequest{Selector: &nodeagentv1.DeviceSelector{Count: 1}, XfsPercent: 30, PvPath: one.PvPath}
	two := &nodeagentv1.PrepareDisksRequest{Selector: &nodeagentv1.DeviceSelector{Count: 2}, PvPath: one.PvPath}
	plain := func(mut ...func(*nodeagentv1.PreparedDisk)) *nodeagentv1.PreparedDisk {
		d := &nodeagentv1.PreparedDisk{Device: "/dev/nvme0n1", XfsDevice: "/dev/nvme0n1", FilesystemUuid: uuidA, PvPath: one.PvPath,
			XfsSizeBytes: 1 << 40, State: "ready", Wwn: "eui.0025388b91b0a1b2", Serial: "S4EVNX0R 123"}
		for _, m := range mut {
			m(d)
		}
		return d
	}
	splitDisk := func(mut ...func(*nodeagentv1.PreparedDisk)) *nodeagentv1.PreparedDisk {
		return plain(append([]func(*nodeagentv1.PreparedDisk){func(d *nodeagentv1.PreparedDisk) {
			d.XfsDevice, d.RawDevice, d.RawPartitionUuid, d.DiskGuid, d.XfsPercent = "/dev/nvme0n1p1", "/dev/nvme0n1p2", guidB, uuidB, 30
			d.XfsSizeBytes, d.RawSizeBytes = 300<<30, 700<<30
		}}, mut...)...)
	}
	second := func(d *nodeagentv1.PreparedDisk) {
		d.Device, d.XfsDevice, d.FilesystemUuid, d.PvPath = "/dev/nvme1n1", "/dev/nvme1n1", uuidB, one.PvPath+"/nvme1n1"
	}
	for _, tc := range []struct {
		name  string
		req   *nodeagentv1.PrepareDisksRequest
		disks []*nodeagentv1.PreparedDisk
		want  string // "" for an honest answer
		value string
	}{
		{"honest whole disk", one, []*nodeagentv1.PreparedDisk{plain()}, "", ""},
		{"honest split disk", split, []*nodeagentv1.PreparedDisk{splitDisk()}, "", ""},
		{"honest split, agent without partition GUIDs", split, []*nodeagentv1.PreparedDisk{splitDisk(func(d *nodeagentv1.PreparedDisk) { d.RawPartitionUuid = "" })}, "", ""},
		{"honest two disks", two, []*nodeagentv1.PreparedDisk{plain(func(d *nodeagentv1.PreparedDisk) { d.PvPath += "/nvme0n1" }), plain(second)}, "", ""},
		{"a disk still preparing is no lie", one, []*nodeagentv1.PreparedDisk{plain(func(d *nodeagentv1.PreparedDisk) { d.State = "preparing" })}, "", ""},
		{"more disks than asked", one, []*nodeagentv1.PreparedDisk{plain(), plain(second)}, "the agent answered 2 disks for 1 requested", "2"},
		{"none", one, nil, "the agent answered 0 disks for 1 requested", "0"},
		{"filesystem UUID empty", one, []*nodeagentv1.PreparedDisk{plain(func(d *nodeagentv1.PreparedDisk) { d.FilesystemUuid = "" })}, "disk 1 of the reply: filesystem UUID is not a canonical UUID", ""},
		{"filesystem UUID a path", one, []*nodeagentv1.PreparedDisk{plain(func(d *nodeagentv1.PreparedDisk) { d.FilesystemUuid = "../../kube-system" })}, "disk 1 of the reply: filesystem UUID is not a canonical UUID", "../../kube-system"},
		{"filesystem UUID another volume's name", one, []*nodeagentv1.PreparedDisk{plain(func(d *nodeagentv1.PreparedDisk) { d.FilesystemUuid = "pvc-data" })}, "disk 1 of the reply: filesystem UUID is not a canonical UUID", "pvc-data"},
		{"filesystem UUID in capitals", one, []*nodeagentv1.PreparedDisk{plain(func(d *nodeagentv1.PreparedDisk) { d.FilesystemUuid = strings.ToUpper(uuidA) })}, "disk 1 of the reply: filesystem UUID is not a canonical UUID", strings.ToUpper(uuidA)},
		{"filesystem UUID without dashes", one, []*nodeagentv1.PreparedDisk{plain(func(d *nodeagentv1.PreparedDisk) { d.FilesystemUuid = strings.ReplaceAll(uuidA, "-", "") + "abcd" })}, "disk 1 of the reply: filesystem UUID is not a canonical UUID", strings.ReplaceAll(uuidA, "-", "") + "abcd"},
		{"unknown state", one, []*nodeagentv1.PreparedDisk{plain(func(d *nodeagentv1.PreparedDisk) { d.State = "mounted; rm -rf" })}, "disk 1 of the reply: unknown state", "mounted; rm -rf"},
		{"PV path outside the root", one, []*nodeagentv1.PreparedDisk{plain(func(d *nodeagentv1.PreparedDisk) { d.PvPath = "/etc" })}, "disk 1 of the reply: PV path is not the requested " + one.PvPath + " nor directly below it", "/etc"},
		{"PV path of another cluster", one, []*nodeagentv1.PreparedDisk{plain(func(d *nodeagentv1.PreparedDisk) { d.PvPath = "/mnt/opsuite/veltrix/other/vx/slot-0" })}, "disk 1 of the reply: PV path is not the requested " + one.PvPath + " nor directly below it", "/mnt/opsuite/veltrix/other/vx/slot-0"},
		{"PV path climbing out", one, []*nodeagentv1.PreparedDisk{plain(func(d *nodeagentv1.PreparedDisk) { d.PvPath = one.PvPath + "/../../../../../../var/lib/kubelet" })}, "disk 1 of the reply: PV path is not the requested " + one.PvPath + " nor directly below it", one.PvPath + "/../../../../../../var/lib/kubelet"},
		{"PV path with dot-dot that cleans to the request", one, []*nodeagentv1.PreparedDisk{plain(func(d *nodeagentv1.PreparedDisk) { d.PvPath = one.PvPath + "/x/.." })}, "disk 1 of the reply: PV path is not the requested " + one.PvPath + " nor directly below it", one.PvPath + "/x/.."},
		{"PV path relative", one, []*nodeagentv1.PreparedDisk{plain(func(d *nodeagentv1.PreparedDisk) { d.PvPath = "srv/pv/slot-0" })}, "disk 1 of the reply: PV path is not the requested " + one.PvPath + " nor directly below it", "srv/pv/slot-0"},
		{"PV path two levels below", two, []*nodeagentv1.PreparedDisk{plain(func(d *nodeagentv1.PreparedDisk) { d.PvPath += "/a/b" }), plain(second)}, "disk 1 of the reply: PV path is not the requested " + one.PvPath + " nor directly below it", one.PvPath + "/a/b"},
		{"PV path twice", two, []*nodeagentv1.PreparedDisk{plain(func(d *nodeagentv1.PreparedDisk) { d.PvPath += "/nvme1n1" }), plain(second)}, "disk 2 of the reply: PV path reported twice", "pv:" + one.PvPath + "/nvme1n1"},
		{"filesystem UUID twice", two, []*nodeagentv1.PreparedDisk{plain(func(d *nodeagentv1.PreparedDisk) { d.PvPath += "/nvme0n1" }), plain(second, func(d *nodeagentv1.PreparedDisk) { d.FilesystemUuid = uuidA })}, "disk 2 of the reply: filesystem UUID reported twice", "fs:" + uuidA},
		{"negative size", one, []*nodeagentv1.PreparedDisk{plain(func(d *nodeagentv1.PreparedDisk) { d.XfsSizeBytes = -1 })}, "disk 1 of the reply: XFS size out of range (1 byte to 1024 TiB)", "-1"},
		{"zero size", one, []*nodeagentv1.PreparedDisk{plain(func(d *nodeagentv1.PreparedDisk) { d.XfsSizeBytes = 0 })}, "disk 1 of the reply: XFS size out of range (1 byte to 1024 TiB)", "0"},
		{"absurd size", one, []*nodeagentv1.PreparedDisk{plain(func(d *nodeagentv1.PreparedDisk) { d.XfsSizeBytes = 1 << 62 })}, "disk 1 of the reply: XFS size out of range (1 byte to 1024 TiB)", fmt.Sprint(int64(1) << 62)},
		{"negative raw size", split, []*nodeagentv1.PreparedDisk{splitDisk(func(d *nodeagentv1.PreparedDisk) { d.RawSizeBytes = -5 })}, "disk 1 of the reply: raw partition size out of range (0 to 1024 TiB with the XFS size)", "-5"},
		{"absurd raw size", split, []*nodeagentv1.PreparedDisk{splitDisk(func(d *nodeagentv1.PreparedDisk) { d.RawSizeBytes = MaxDiskBytes })}, "disk 1 of the reply: raw partition size out of range (0 to 1024 TiB with the XFS size)", fmt.Sprint(MaxDiskBytes)},
		{"raw device outside /dev", split, []*nodeagentv1.PreparedDisk{splitDisk(func(d *nodeagentv1.PreparedDisk) { d.RawDevice = "/var/lib/etcd/member" })}, "disk 1 of the reply: raw device path is not a clean path under /dev", "/var/lib/etcd/member"},
		{"raw device climbing out of /dev", split, []*nodeagentv1.PreparedDisk{splitDisk(func(d *nodeagentv1.PreparedDisk) { d.RawDevice = "/dev/../etc/shadow" })}, "disk 1 of the reply: raw device path is not a clean path under /dev", "/dev/../etc/shadow"},
		{"raw device /dev itself", split, []*nodeagentv1.PreparedDisk{splitDisk(func(d *nodeagentv1.PreparedDisk) { d.RawDevice = "/dev" })}, "disk 1 of the reply: raw device path is not a clean path under /dev", "/dev"},
		{"device outside /dev", one, []*nodeagentv1.PreparedDisk{plain(func(d *nodeagentv1.PreparedDisk) { d.Device = "/home/x" })}, "disk 1 of the reply: device path is not a clean path under /dev", "/home/x"},
		{"raw partition GUID not one", split, []*nodeagentv1.PreparedDisk{splitDisk(func(d *nodeagentv1.PreparedDisk) { d.RawPartitionUuid = "../../nvme0n1" })}, "disk 1 of the reply: raw partition GUID is not a canonical UUID", "../../nvme0n1"},
		{"disk GUID not one", split, []*nodeagentv1.PreparedDisk{splitDisk(func(d *nodeagentv1.PreparedDisk) { d.DiskGuid = "x" })}, "disk 1 of the reply: disk GUID is not a canonical UUID", "x"},
		{"no raw partition for a split", split, []*nodeagentv1.PreparedDisk{splitDisk(func(d *nodeagentv1.PreparedDisk) { d.RawDevice, d.RawPartitionUuid, d.RawSizeBytes = "", "", 0 })}, "disk 1 of the reply: no raw partition although a split was requested", ""},
		{"a raw partition nobody asked for", one, []*nodeagentv1.PreparedDisk{splitDisk()}, "disk 1 of the reply: a raw partition although no split was requested", "/dev/nvme0n1p2"},
		{"serial with a newline", one, []*nodeagentv1.PreparedDisk{plain(func(d *nodeagentv1.PreparedDisk) { d.Serial = "S4\nfake: true" + "\n" })}, "disk 1 of the reply: serial is not printable text of at most 256 bytes", "S4\nfake: true\n"},
		{"WWN too long", one, []*nodeagentv1.PreparedDisk{plain(func(d *nodeagentv1.PreparedDisk) { d.Wwn = strings.Repeat("w", 257) })}, "disk 1 of the reply: WWN is not printable text of at most 256 bytes", strings.Repeat("w", 257)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckReply(tc.req, tc.disks)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("an honest answer refused: %v", err)
				}
				return
			}
			var bad *BadReply
			if !errors.As(err, &bad) {
				t.Fatalf("CheckReply = %v, want a BadReply %q", err, tc.want)
			}
			if bad.Message != tc.want || bad.Value != tc.value {
				t.Errorf("BadReply %q (value %q), want %q (value %q)", bad.Message, bad.Value, tc.want, tc.value)
			}
			if len(tc.value) > 4 && strings.Contains(bad.Message, tc.value) {
				t.Errorf("the message %q repeats the agent's value %q", bad.Message, tc.value)
			}
		})
	}
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want Problem
		msg  string
	}{
		{fmt.Errorf("resolving: %w", nodeagent.ErrNoAgent), ProblemUnreachable, "no ready node-agent pod on the node"},
		{status.Error(codes.Unavailable, "dial tcp 10.0.0.1:9443: connection refused"), ProblemUnreachable, "the node agent did not answer"},
		{status.Error(codes.PermissionDenied, "system:serviceaccount:x:y may not update nodes/disks"), ProblemPermissionDenied, "the node agent denied the operator (bind the operator to the agent's preparer ClusterRole)"},
		{status.Error(codes.PermissionDenied, `node node-a is lent to namespace "team-a" (label pool.opsuite.io/namespace); this request is for namespace "db"`), ProblemRefused,
			`node node-a is lent to namespace "team-a" (label pool.opsuite.io/namespace); this request is for namespace "db"`},
		{status.Error(codes.Unauthenticated, "token audience"), ProblemPermissionDenied, "the node agent did not accept the operator's token"},
		{status.Error(codes.FailedPrecondition, "0 eligible devices match the selector, 1 requested"), ProblemNoMatchingDisks, "0 eligible devices match the selector, 1 requested"},
		{status.Error(codes.FailedPrecondition, "device /dev/loop1 would get an XFS filesystem of 204 MiB; XFS needs at least 300 MiB"), ProblemRefused, "device /dev/loop1 would get an XFS filesystem of 204 MiB; XFS needs at least 300 MiB"},
		{status.Error(codes.Internal, "boom at 12:00"), ProblemAgentError, "the node agent failed (Internal)"},
		{errors.New("plain"), ProblemAgentError, "the node agent failed (Unknown)"},
	} {
		p, msg := Classify(tc.err)
		if p != tc.want || msg != tc.msg {
			t.Errorf("Classify(%v) = %s %q, want %s %q", tc.err, p, msg, tc.want, tc.msg)
		}
	}
}

func TestUsable(t *testing.T) {
	for _, tc := range []struct {
		r        NodeResult
		fallback bool
		want     bool
	}{
		{NodeResult{}, false, true},
		{NodeResult{MaxMapCountLow: true}, false, false},
		{NodeResult{MaxMapCountLow: true}, true, true},
		{NodeResult{Problem: ProblemNoMatchingDisks}, true, false},
		{NodeResult{SysctlProblem: ProblemPermissionDenied}, true, false},
	} {
		if got := tc.r.Usable(tc.fallback); got != tc.want {
			t.Errorf("%+v fallback %v: usable %v, want %v", tc.r, tc.fallback, got, tc.want)
		}
	}
}

func TestSamePVRoot(t *testing.T) {
	if got := SamePVRoot("/mnt/opsuite")("n1"); got != "/mnt/opsuite" {
		t.Errorf("plain root %s", got)
	}
	if got := SamePVRoot("/srv/pv/$(NODE_NAME)")("n1"); got != "/srv/pv/n1" {
		t.Errorf("per-node root %s", got)
	}
}

// batchAgents answer PrepareDisks after a pause, failing for the nodes in fail, and record
// who was asked and how many were asked at once.
type batchAgents struct {
	mu              sync.Mutex
	fail            map[string]bool
	echo            map[string]string // node -> the node whose disks it claims
	asked           []string
	now, mostAtOnce int
}

func (b *batchAgents) Node(name string) Agent { return batchAgent{b: b, node: name} }

type batchAgent struct {
	b    *batchAgents
	node string
}

func (a batchAgent) PrepareDisks(_ context.Context, req *nodeagentv1.PrepareDisksRequest) (*nodeagentv1.PrepareDisksResponse, error) {
	a.b.mu.Lock()
	a.b.asked = append(a.b.asked, a.node)
	a.b.now++
	a.b.mostAtOnce = max(a.b.mostAtOnce, a.b.now)
	a.b.mu.Unlock()
	time.Sleep(50 * time.Millisecond)
	a.b.mu.Lock()
	a.b.now--
	a.b.mu.Unlock()
	if a.b.fail[a.node] {
		return nil, status.Error(codes.Unavailable, "down")
	}
	if other, ok := a.b.echo[a.node]; ok {
		return honestReply(req, other), nil
	}
	return honestReply(req, a.node), nil
}

// honestReply is what an agent answers when it prepared the disks req asks for.
func honestReply(req *nodeagentv1.PrepareDisksRequest, node string) *nodeagentv1.PrepareDisksResponse {
	resp := &nodeagentv1.PrepareDisksResponse{}
	n := int(req.GetSelector().GetCount())
	for i := range n {
		d := &nodeagentv1.PreparedDisk{State: "ready", XfsSizeBytes: 1 << 30, PvPath: req.GetPvPath(),
			FilesystemUuid: fmt.Sprintf("%08x-0000-4000-8000-%012x", crc32.ChecksumIEEE([]byte(node)), i)}
		if n > 1 {
			d.PvPath = fmt.Sprintf("%s/nvme%dn1", req.GetPvPath(), i)
		}
		resp.Disks = append(resp.Disks, d)
	}
	return resp
}

func (batchAgent) ReleaseDisks(context.Context, *nodeagentv1.ReleaseDisksRequest) (*nodeagentv1.ReleaseDisksResponse, error) {
	return &nodeagentv1.ReleaseDisksResponse{}, nil
}

func (batchAgent) GetNodeReport(context.Context, *nodeagentv1.GetNodeReportRequest) (*nodeagentv1.GetNodeReportResponse, error) {
	return &nodeagentv1.GetNodeReportResponse{}, nil
}

func (batchAgent) EnsureSysctl(_ context.Context, req *nodeagentv1.EnsureSysctlRequest) (*nodeagentv1.EnsureSysctlResponse, error) {
	return &nodeagentv1.EnsureSysctlResponse{Status: &nodeagentv1.SysctlStatus{Name: req.GetName(), Value: req.GetMinimum(), Minimum: req.GetMinimum(), Met: true}}, nil
}

// TestPrepareInBatches: the nodes still missing are asked at once; a failed node is
// replaced by the next in order, and no node beyond that is asked.
func TestPrepareInBatches(t *testing.T) {
	agents := &batchAgents{fail: map[string]bool{"n2": true}}
	ordered := []string{"n1", "n2", "n3", "n4", "n5"}
	res := Prepare(context.Background(), agents, cluster(), ordered, func(string) string { return "/pv" }, 3)
	var got []string
	for _, n := range res.Nodes {
		got = append(got, n.Node)
	}
	if !slices.Equal(got, []string{"n1", "n2", "n3", "n4"}) {
		t.Errorf("results for %v, want n1..n4 in order", got)
	}
	if u := res.Usable(false); len(u) != 3 || u[2].Node != "n4" {
		t.Errorf("usable %v, want n1, n3, n4", u)
	}
	if res.Nodes[1].Problem != ProblemUnreachable {
		t.Errorf("n2: %s, want %s", res.Nodes[1].Problem, ProblemUnreachable)
	}
	agents.mu.Lock()
	defer agents.mu.Unlock()
	if slices.Contains(agents.asked, "n5") || len(agents.asked) != 4 {
		t.Errorf("asked %v: want n1..n4 once each, never n5", agents.asked)
	}
	if agents.mostAtOnce != 3 {
		t.Errorf("%d agents asked at once, want the first batch of 3 together", agents.mostAtOnce)
	}
}

// TestPrepareRefusesClaimedUUID: an agent that reports a disk another node reported (an
// echo of node n1's filesystem UUID) gets no disk and AgentReplyInvalid; the next node
// takes its place.
func TestPrepareRefusesClaimedUUID(t *testing.T) {
	agents := &batchAgents{echo: map[string]string{"n2": "n1"}}
	res := Prepare(context.Background(), agents, cluster(), []string{"n1", "n2", "n3", "n4"}, func(string) string { return "/pv" }, 3)
	if len(res.Nodes) != 4 || res.Nodes[1].Problem != ProblemBadReply || res.Nodes[1].Disks != nil ||
		res.Nodes[1].Message != "a filesystem UUID node n1 reported" {
		t.Fatalf("results %+v, want n2 refused", res.Nodes)
	}
	if u := res.Usable(false); len(u) != 3 || u[0].Node != "n1" || u[1].Node != "n3" || u[2].Node != "n4" {
		t.Errorf("usable %v, want n1, n3, n4", u)
	}
}

// TestRefuseVolumesElsewhere: a node reporting a disk whose volume exists pinned to another
// node gets no disk; a disk whose volume is its own node's, or has none yet, is kept.
func TestRefuseVolumesElsewhere(t *testing.T) {
	res := Result{Wanted: 2, Nodes: []NodeResult{
		{Node: "n1", Disks: []resources.Disk{{Node: "n1", FilesystemUUID: uuidA}}},
		{Node: "n2", Disks: []resources.Disk{{Node: "n2", FilesystemUUID: guidB}, {Node: "n2", FilesystemUUID: uuidA}}},
		{Node: "n3", Disks: []resources.Disk{{Node: "n3", FilesystemUUID: uuidB}}},
	}}
	volumes := map[string]string{uuidA: "n1"} // uuidB: no volume yet
	RefuseVolumesElsewhere(&res, func(d resources.Disk) string { return volumes[d.FilesystemUUID] })
	if n := res.Nodes[1]; n.Problem != ProblemBadReply || n.Disks != nil || n.Message != "a filesystem UUID whose volume is on node n1" {
		t.Errorf("n2 %+v, want refused", n)
	}
	if res.Nodes[0].Problem != ProblemNone || res.Nodes[2].Problem != ProblemNone || len(res.Usable(false)) != 2 {
		t.Errorf("n1 %+v, n3 %+v: want both kept", res.Nodes[0], res.Nodes[2])
	}
}
