package controller

import (
	"context"
	"testing"

	valdv1 "github.com/opsuite/suite/api/vald/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
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

	// Losing the agent node prunes the dedicated entry's ValdRelease.
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
