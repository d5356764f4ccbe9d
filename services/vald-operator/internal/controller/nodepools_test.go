package controller

import (
	"context"
	"slices"
	"testing"
	"time"

	valdv1 "github.com/opsuite/suite/api/vald/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const testPoolPrefix = "pool.test.opsuite.io"

func (h *harness) node(pool valdv1.NodePoolType) *corev1.Node {
	h.t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: "node-" + rand.String(6),
		Labels: map[string]string{
			testPoolPrefix + "/namespace": h.ns,
			testPoolPrefix + "/type":      string(pool),
		},
	}}
	h.create(n)
	h.t.Cleanup(func() { _ = env.Client.Delete(context.Background(), n) })
	return n
}

// twoEntries has "plain" using only the general pool and "dedicated" with an agent pool.
func (h *harness) twoEntries(name string) *valdv1.ValdOperatorRelease {
	vor := h.release(name, "plain=1")
	vor.Spec.Infrastructure = append(vor.Spec.Infrastructure, valdv1.Infrastructure{
		Role: "blue", Active: ptr.To(true),
		Clusters: []valdv1.Cluster{{Name: "dedicated", ID: "2"}},
		NodePools: valdv1.NodePools{
			General: &valdv1.NodePool{Replicas: 1},
			Agent:   &valdv1.NodePool{Replicas: 3, MachineResource: valdv1.MachineResource{Memory: "8Gi"}},
		},
	})
	return vor
}

func TestNodePoolMatch(t *testing.T) {
	h := start(t, func(o *Options) {
		o.RequireNodePoolMatch = true
		o.Build.NodePoolLabelPrefix = testPoolPrefix
		o.NodePoolLossGrace = 0 // a lost match prunes at once; TestNodePoolLossGrace holds
	})
	h.create(h.twoEntries("vor"))

	// No labelled node: an empty render fails the phase and creates nothing.
	vor := h.waitStatus("vor", "WaitingCreateVrs 1/3 Failed | WaitingClusterCreate=True/Succeeded WaitingCreateVrs=False/Failed")
	if msg := condition(vor, valdv1.ConditionWaitingCreateVrs).Message; msg != "No node carries the node-pool labels of this namespace, so there is no ValdRelease to create; nothing was pruned. Label the pool's nodes or turn the node-pool match off." {
		t.Errorf("message %q", msg)
	}
	if n := len(h.valdReleases()); n != 0 {
		t.Fatalf("%d ValdReleases without nodes", n)
	}

	// A general node admits the entry without an agent pool; the Node watch wakes the release.
	general := h.node(valdv1.NodePoolTypeGeneral)
	h.waitStatus("vor", statusCompleted)
	if got := names(h.valdReleases()); got != h.ns+"-plain" {
		t.Errorf("ValdReleases with a general node: %s", got)
	}

	// An agent node admits the other entry too.
	agent := h.node(valdv1.NodePoolTypeValdAgent)
	h.waitFor("both ValdReleases", func() bool { return names(h.valdReleases()) == h.ns+"-dedicated,"+h.ns+"-plain" })
	h.waitStatus("vor", statusCompleted)

	// Losing the agent node prunes the dedicated entry's ValdRelease (no grace).
	delete(agent.Labels, testPoolPrefix+"/namespace")
	if err := env.Client.Update(context.Background(), agent); err != nil {
		t.Fatal(err)
	}
	h.waitFor("the dedicated ValdRelease to be pruned", func() bool { return names(h.valdReleases()) == h.ns+"-plain" })

	// Every node gone (a transient zero match): Failed, and nothing is pruned.
	if err := env.Client.Delete(context.Background(), general); err != nil {
		t.Fatal(err)
	}
	h.waitStatus("vor", "WaitingCreateVrs 1/3 Failed | WaitingClusterCreate=True/Succeeded WaitingCreateVrs=False/Failed Completed=Unknown/Blocked")
	if got := names(h.valdReleases()); got != h.ns+"-plain" {
		t.Errorf("ValdReleases after the match found no nodes: %s", got)
	}
}

func TestNodePoolMatchOff(t *testing.T) {
	h := start(t, func(o *Options) { o.Build.NodePoolLabelPrefix = testPoolPrefix })
	// Nodes labelled for the namespace, but only the general pool: with the match off
	// every active entry is generated regardless.
	h.node(valdv1.NodePoolTypeGeneral)
	h.create(h.twoEntries("vor"))
	h.waitStatus("vor", statusCompleted)
	if got := names(h.valdReleases()); got != h.ns+"-dedicated,"+h.ns+"-plain" {
		t.Errorf("ValdReleases with the match off: %s", got)
	}
}

// TestNodePoolLossGrace: an entry whose node-pool match is lost while others still match
// keeps its ValdReleases as last rendered for the grace, with a condition and a Warning
// event saying so; they are pruned when it ends, and kept for good if the nodes return.
func TestNodePoolLossGrace(t *testing.T) {
	const grace = 4 * time.Second
	h := start(t, func(o *Options) {
		o.RequireNodePoolMatch = true
		o.Build.NodePoolLabelPrefix = testPoolPrefix
		o.NodePoolLossGrace = grace
		o.RequeueAfter = time.Hour // only the hold's own requeue ends it
	})
	h.node(valdv1.NodePoolTypeGeneral)
	agent := h.node(valdv1.NodePoolTypeValdAgent)
	h.create(h.twoEntries("vor"))
	h.waitStatus("vor", statusCompleted)
	both := h.ns + "-dedicated," + h.ns + "-plain"
	h.waitFor("both ValdReleases", func() bool { return names(h.valdReleases()) == both })

	// The agent node leaves the pool, and the spec changes meanwhile: the plain entry is
	// rewritten, the dedicated one held as it was.
	relabel := func(ns string) {
		t.Helper()
		n := &corev1.Node{}
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(agent), n); err != nil {
			t.Fatal(err)
		}
		n.Labels[testPoolPrefix+"/namespace"] = ns
		if err := env.Client.Update(context.Background(), n); err != nil {
			t.Fatal(err)
		}
	}
	relabel("elsewhere")
	lost := time.Now()
	h.update("vor", func(v *valdv1.ValdOperatorRelease) { v.Spec.VectorEngine.Vald.Agent.NGT.Dimension = 16 })
	held := statusCompleted + " NodePoolMatchLost=True/Held"
	vor := h.waitStatus("vor", held)
	c := condition(vor, valdv1.ConditionNodePoolMatchLost)
	until := c.LastTransitionTime.Add(grace).UTC().Format(time.RFC3339)
	if want := `No labelled nodes match the node pools of infrastructure entries "blue" any more: their ValdReleases are kept as last rendered until ` + until + ` (NODEPOOL_LOSS_GRACE), then pruned unless the nodes come back.`; c.Message != want {
		t.Errorf("message %q, want %q", c.Message, want)
	}
	gens := map[string]string{}
	for _, vr := range h.valdReleases() {
		gens[vr.Name] = vr.Labels[valdv1.LabelManagedGeneration]
	}
	if gens[h.ns+"-dedicated"] != "1" || gens[h.ns+"-plain"] != "2" {
		t.Errorf("managed generations while held: %v, want dedicated at 1 (held), plain at 2", gens)
	}
	h.waitFor("a Warning event for the hold", func() bool {
		return slices.Contains(h.events("vor"), "Warning NodePoolMatchLost/"+valdv1.ReasonHeld)
	})

	// The grace ends: the held ValdRelease is pruned and the condition goes.
	h.waitStatus("vor", statusCompleted)
	if got := names(h.valdReleases()); got != h.ns+"-plain" {
		t.Errorf("ValdReleases after the grace: %s", got)
	}
	if waited := time.Since(lost); waited < grace-time.Second {
		t.Errorf("pruned after %s, before the grace of %s", waited, grace)
	}

	// Back: the node returns; then leaves again and comes back within the grace, so the
	// ValdRelease is kept and the condition goes without a prune.
	relabel(h.ns)
	h.waitFor("the dedicated ValdRelease again", func() bool { return names(h.valdReleases()) == both })
	h.waitStatus("vor", statusCompleted)
	before := h.valdReleases()[0]
	relabel("elsewhere")
	h.waitStatus("vor", held)
	relabel(h.ns)
	h.waitStatus("vor", statusCompleted)
	if vrs := h.valdReleases(); names(vrs) != both || vrs[0].UID != before.UID {
		t.Errorf("ValdReleases after the nodes came back within the grace: %s", names(vrs))
	}
}
