package controller_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	veltrixv1 "github.com/opsuite/suite/api/veltrix/v1alpha1"
	"github.com/opsuite/suite/services/veltrix-operator/internal/disks"
	"github.com/opsuite/suite/services/veltrix-operator/internal/resources"
	"github.com/opsuite/suite/shared/testenv"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestTenancyNodeLentElsewhere: of three nodes with an agent and a disk each, node-t1 is lent
// to another namespace by its node-pool label (pool.opsuite.io/namespace), node-t2 to the
// cluster's namespace, node-t3 to none. A two-member cluster runs on node-t2 and node-t3:
// node-t1, first by name, is never asked to prepare a disk and gets no volume.
func TestTenancyNodeLentElsewhere(t *testing.T) {
	ctx := context.Background()
	ns := testenv.NewNamespace(t, env.Client, "vx")
	lent := map[string]string{"node-t1": "someone-else", "node-t2": ns, "node-t3": ""}
	createNodes(t, "node-t1", "node-t2", "node-t3")
	for name, to := range lent {
		var n corev1.Node
		if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, &n); err != nil {
			t.Fatal(err)
		}
		n.Labels["tenancy-test"] = "true"
		if to != "" {
			n.Labels["pool.opsuite.io/namespace"] = to
		}
		if err := env.Client.Update(ctx, &n); err != nil {
			t.Fatal(err)
		}
	}
	f := startFleet(t, operatorTokens(t, "tenancy", true), 1<<30, []string{"node-t1", "node-t2", "node-t3"}, nil)
	startController(t, f, ns)
	c := newCluster(t, ns, func(c *veltrixv1.VeltrixCluster) {
		c.Spec.Size, c.Spec.ReplicationFactor = 2, 2
		c.Spec.NodeSelector = map[string]string{"tenancy-test": "true"}
		c.Spec.DiskSelector.NVMeOnly = ptr.To(false)
		c.Spec.IndexMapFallback = true
	})
	condition(t, c, veltrixv1.ConditionDisksPrepared, metav1.ConditionTrue, veltrixv1.ReasonPrepared)
	var live veltrixv1.VeltrixCluster
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(c), &live); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(live.Status.Nodes, []string{"node-t2", "node-t3"}) {
		t.Errorf("status.nodes %v, want node-t2 and node-t3", live.Status.Nodes)
	}
	if n := f.calls.count("node-t1"); n != 0 {
		t.Errorf("node-t1, lent to another namespace, was asked to prepare disks %d times", n)
	}
	if p := f.prepared(t, "node-t1"); len(p) != 0 {
		t.Errorf("node-t1, lent to another namespace, has %d disks prepared", len(p))
	}
	var pvs corev1.PersistentVolumeList
	if err := env.Client.List(ctx, &pvs, client.MatchingLabels(resources.VolumeLabels(c))); err != nil {
		t.Fatal(err)
	}
	var nodes []string
	for _, pv := range pvs.Items {
		nodes = append(nodes, pv.Labels[resources.LabelNode])
	}
	slices.Sort(nodes)
	if !slices.Equal(nodes, []string{"node-t2", "node-t3"}) {
		t.Errorf("volumes on %v, want one on node-t2 and one on node-t3", nodes)
	}
}

// TestTenancyAgentsAgree: with agents that read their Node's pool label, as deployed: the
// operator names the cluster's namespace in PrepareDisks, so node-t4, lent to the cluster's
// namespace, prepares its disk for it (an agent refuses a request naming no namespace on a
// lent node); node-t5, lent to another namespace, is never asked by the operator, and its
// agent refuses the same request when asked directly, which the operator would report as
// DisksRefused in the agent's words.
func TestTenancyAgentsAgree(t *testing.T) {
	ctx := context.Background()
	ns := testenv.NewNamespace(t, env.Client, "vx")
	lent := map[string]string{"node-t4": ns, "node-t5": "someone-else"}
	createNodes(t, "node-t4", "node-t5")
	for name, to := range lent {
		var n corev1.Node
		if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, &n); err != nil {
			t.Fatal(err)
		}
		n.Labels["tenancy-agents"] = "true"
		n.Labels["pool.opsuite.io/namespace"] = to
		if err := env.Client.Update(ctx, &n); err != nil {
			t.Fatal(err)
		}
	}
	f := startFleetLabels(t, operatorTokens(t, "tenancy-agents", true), 1<<30, []string{"node-t4", "node-t5"}, nil, true)
	startController(t, f, ns)
	c := newCluster(t, ns, func(c *veltrixv1.VeltrixCluster) {
		c.Spec.Size, c.Spec.ReplicationFactor = 1, 1
		c.Spec.NodeSelector = map[string]string{"tenancy-agents": "true"}
		c.Spec.DiskSelector.NVMeOnly = ptr.To(false)
		c.Spec.IndexMapFallback = true
	})
	condition(t, c, veltrixv1.ConditionDisksPrepared, metav1.ConditionTrue, veltrixv1.ReasonPrepared)
	if p := f.prepared(t, "node-t4"); len(p) != 1 {
		t.Errorf("node-t4, lent to the cluster's namespace, has %d disks prepared, want 1", len(p))
	}
	if n := f.calls.count("node-t5"); n != 0 {
		t.Errorf("node-t5, lent to another namespace, was asked %d times", n)
	}
	// Asked anyway (as a stale view of the label would), node-t5's agent refuses.
	var live veltrixv1.VeltrixCluster
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(c), &live); err != nil {
		t.Fatal(err)
	}
	_, err := f.calls.Node("node-t5").PrepareDisks(ctx, disks.PrepareRequest(&live, f.pvRoot("node-t5")))
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("node-t5's agent answered %v to a request for namespace %s, want PermissionDenied", err, ns)
	}
	if p, msg := disks.Classify(err); p != disks.ProblemRefused || !strings.Contains(msg, `"someone-else"`) {
		t.Errorf("the refusal classified %s %q, want DisksRefused with the agent's words", p, msg)
	}
	if p := f.prepared(t, "node-t5"); len(p) != 0 {
		t.Errorf("node-t5 has %d disks prepared for another namespace", len(p))
	}
}
