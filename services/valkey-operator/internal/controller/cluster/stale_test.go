package cluster_test

import (
	"context"
	"testing"
	"time"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	"github.com/opsuite/suite/shared/testenv"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestStaleCacheRepeatsNoEvent: with the controller's reads lagging every status write by
// two reads, a cluster waiting for an unreachable member records WaitingForShards once:
// transitions are judged against the last status written, not the cached one.
func TestStaleCacheRepeatsNoEvent(t *testing.T) {
	t.Parallel()
	c := env.Client
	ns := testenv.NewNamespace(t, c, "vkc-stale")
	f := newFleet(t, c, ns)
	f.unreachable["s-1-0"] = testenv.FreeAddr(t)
	stale := &testenv.StaleReads{Kind: &valkeyv1.ValkeyCluster{}, Reads: 2}
	startController(t, f, stale.Manager())
	vc := &valkeyv1.ValkeyCluster{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: ns}, Spec: valkeyv1.ValkeyClusterSpec{Shards: 3}}
	if err := c.Create(context.Background(), vc); err != nil {
		t.Fatal(err)
	}
	waitReason(t, f, "s", valkeyv1.ReasonMissingShards)
	wantEvents(t, f, "s", map[string]int{valkeyv1.EventWaitingForShards: 1})
	// Passes go on every poll while a member does not answer; a repeat is sent as a patch
	// of the first event right after it.
	testenv.Eventually(t, 30*time.Second, "a pass reading a stale cluster", func() (bool, string) {
		f.sync(context.Background())
		return stale.Served() > 0, ""
	})
	time.Sleep(3 * time.Second)
	got := testenv.EventCounts(t, c, ns, "s")
	if n := got[valkeyv1.EventWaitingForShards+"/"+valkeyv1.EventWaitingForShards]; n != 1 {
		t.Errorf("WaitingForShards recorded %d times, want once (events %v, %d stale reads)", n, got, stale.Served())
	}
}
