package controller

import (
	"context"
	"slices"
	"testing"
	"time"

	valdv1 "github.com/opsuite/suite/api/vald/v1"
	corev1 "k8s.io/api/core/v1"
)

// TestNodePoolLossGraceDeletedNode: the only node of an entry's agent pool is deleted (a
// node lost, not relabelled). Its ValdRelease is held as last rendered for the grace, with
// NodePoolMatchLost=True/Held and a Warning event; a replacement node carrying the pool's
// labels (another name) within the grace keeps the same ValdRelease, and when that one is
// deleted too and none comes back, the entry's ValdRelease is pruned once the grace ends,
// never before.
func TestNodePoolLossGraceDeletedNode(t *testing.T) {
	const grace = 4 * time.Second
	h := start(t, func(o *Options) {
		o.RequireNodePoolMatch = true
		o.Build.NodePoolLabelPrefix = testPoolPrefix
		o.NodePoolLossGrace = grace
		o.RequeueAfter = time.Hour // only the Node watch and the hold's own requeue act
	})
	h.node(valdv1.NodePoolTypeGeneral)
	agent := h.node(valdv1.NodePoolTypeValdAgent)
	h.create(h.twoEntries("vor"))
	h.waitStatus("vor", statusCompleted)
	both := h.ns + "-dedicated," + h.ns + "-plain"
	h.waitFor("both ValdReleases", func() bool { return names(h.valdReleases()) == both })
	before := h.valdReleases()[0]
	if before.Name != h.ns+"-dedicated" {
		t.Fatalf("first ValdRelease %s, want the dedicated one", before.Name)
	}

	deleteNode := func(n *corev1.Node) {
		t.Helper()
		if err := env.Client.Delete(context.Background(), n); err != nil {
			t.Fatal(err)
		}
	}
	held := statusCompleted + " NodePoolMatchLost=True/Held"
	deleteNode(agent)
	h.waitStatus("vor", held)
	h.waitFor("a Warning event for the hold", func() bool {
		return slices.Contains(h.events("vor"), "Warning NodePoolMatchLost/"+valdv1.ReasonHeld)
	})
	if got := names(h.valdReleases()); got != both {
		t.Errorf("ValdReleases right after the node's deletion: %s, want both (held)", got)
	}

	// A replacement node joins the pool within the grace: the same ValdRelease stays.
	replacement := h.node(valdv1.NodePoolTypeValdAgent)
	h.waitStatus("vor", statusCompleted)
	if vrs := h.valdReleases(); names(vrs) != both || vrs[0].UID != before.UID {
		t.Errorf("ValdReleases after a replacement node within the grace: %s (the dedicated one recreated?)", names(vrs))
	}

	// Deleted again, and nothing comes back: pruned when the grace ends, not before.
	deleteNode(replacement)
	lost := time.Now()
	h.waitStatus("vor", held)
	if got := names(h.valdReleases()); got != both {
		t.Errorf("ValdReleases during the grace: %s, want both", got)
	}
	h.waitFor("the dedicated ValdRelease pruned", func() bool { return names(h.valdReleases()) == h.ns+"-plain" })
	if waited := time.Since(lost); waited < grace-time.Second {
		t.Errorf("pruned %s after the node's deletion, before the grace of %s", waited, grace)
	}
	h.waitStatus("vor", statusCompleted)
}
