package disks

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	veltrixv1 "github.com/opsuite/suite/api/veltrix/v1alpha1"
	nodeagentv1 "github.com/opsuite/suite/proto/nodeagent/v1"
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
	}
	for _, tc := range []struct {
		name string
		c    *veltrixv1.VeltrixCluster
		want []string
	}{
		{"no selector, no tolerations", cluster(), []string{"b-plain", "c-nvme", "e-nvme-soft"}},
		{"selector", cluster(func(c *veltrixv1.VeltrixCluster) { c.Spec.NodeSelector = map[string]string{"nvme": "true"} }), []string{"c-nvme", "e-nvme-soft"}},
		{"selector and toleration", cluster(func(c *veltrixv1.VeltrixCluster) {
			c.Spec.NodeSelector = map[string]string{"nvme": "true"}
			c.Spec.Tolerations = []corev1.Toleration{{Key: "workload", Value: "veltrixdb", Effect: corev1.TaintEffectNoSchedule}}
		}), []string{"a-nvme-tainted", "c-nvme", "e-nvme-soft"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Candidates(tc.c, nodes); !slices.Equal(got, tc.want) {
				t.Errorf("candidates %v, want %v", got, tc.want)
			}
		})
	}
}

func TestOrder(t *testing.T) {
	got := Order([]string{"a", "b", "c", "d"}, []string{"c", "gone"})
	if want := []string{"c", "gone", "a", "b", "d"}; !slices.Equal(got, want) {
		t.Errorf("order %v, want %v: used nodes first", got, want)
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
	if r.GetXfsPercent() != 20 || r.GetPvPath() != "/mnt/opsuite/veltrix/db/vx/slot-0" {
		t.Errorf("xfs %d pv %s", r.GetXfsPercent(), r.GetPvPath())
	}
	off := PrepareRequest(cluster(func(c *veltrixv1.VeltrixCluster) {
		c.Spec.DiskSelector.NVMeOnly = new(false)
		c.Spec.RawVLog = veltrixv1.RawVLogSpec{XFSPartitionPercent: 20}
	}), "/mnt/opsuite")
	if off.GetXfsPercent() != 0 || off.GetSelector().GetNvmeOnly() {
		t.Errorf("without rawVLog: xfs %d nvmeOnly %v", off.GetXfsPercent(), off.GetSelector().GetNvmeOnly())
	}
	rel := ReleaseRequest(c, "/mnt/opsuite", true)
	if rel.GetPvPath() != r.GetPvPath() || !rel.GetWipe() || len(rel.GetDevices()) != 0 {
		t.Errorf("release %v: by PV path, never by kernel name", rel)
	}
}

func TestFromAgent(t *testing.T) {
	prepared := []*nodeagentv1.PreparedDisk{
		{Device: "/dev/nvme0n1", FilesystemUuid: "u-b", PvPath: "/p/nvme0n1", XfsSizeBytes: 10, RawDevice: "/dev/nvme0n1p2", RawSizeBytes: 40, DiskGuid: "g-b", State: "ready"},
		{Device: "/dev/nvme1n1", FilesystemUuid: "u-a", PvPath: "/p/nvme1n1", XfsSizeBytes: 11, Wwn: "w", Serial: "s", State: "ready"},
	}
	got, err := FromAgent("n1", prepared)
	if err != nil {
		t.Fatal(err)
	}
	// Indexed by filesystem UUID, not by kernel name: nvme1n1 is index 0.
	if len(got) != 2 || got[0].FilesystemUUID != "u-a" || got[0].Index != 0 || got[1].Index != 1 || got[1].RawDevice != "/dev/nvme0n1p2" || got[0].WWN != "w" || got[1].Node != "n1" {
		t.Errorf("disks %+v", got)
	}
	prepared[0].State = "missing"
	if _, err := FromAgent("n1", prepared); err == nil {
		t.Error("a missing disk was taken for a prepared one")
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
	asked           []string
	now, mostAtOnce int
}

func (b *batchAgents) Node(name string) Agent { return batchAgent{b: b, node: name} }

type batchAgent struct {
	b    *batchAgents
	node string
}

func (a batchAgent) PrepareDisks(context.Context, *nodeagentv1.PrepareDisksRequest) (*nodeagentv1.PrepareDisksResponse, error) {
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
	return &nodeagentv1.PrepareDisksResponse{Disks: []*nodeagentv1.PreparedDisk{{State: "ready", FilesystemUuid: "u-" + a.node, PvPath: "/pv/" + a.node}}}, nil
}

func (batchAgent) ReleaseDisks(context.Context, *nodeagentv1.ReleaseDisksRequest) (*nodeagentv1.ReleaseDisksResponse, error) {
	return &nodeagentv1.ReleaseDisksResponse{}, nil
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
