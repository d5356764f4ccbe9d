package controller

import (
	"testing"
	"time"

	valdv1 "github.com/opsuite/suite/api/vald/v1"
	"github.com/opsuite/suite/shared/testenv"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestStaleCacheRepeatsNoEvent: with the reconciler's reads lagging every status write by
// two reads, a release waiting on a cluster id and then completing records each event
// once: transitions are judged against the last status written, not the cached one.
func TestStaleCacheRepeatsNoEvent(t *testing.T) {
	stale := &testenv.StaleReads{Kind: &valdv1.ValdOperatorRelease{}, Reads: 2}
	h := start(t, func(o *Options) {
		count := o.wrapClient
		o.wrapClient = func(c client.Client) client.Client { return stale.Wrap(count(c)) }
		// Only the reconciler's reads lag: the cache's events would tell the kit it
		// caught up.
		o.cacheUntracked = true
	})
	h.create(h.release("vor", "a=id-a", "b="))
	h.waitStatus("vor", "WaitingClusterCreate 0/3 Pending | WaitingClusterCreate=Unknown/Pending")
	// Passes every RequeueAfter (1 s) while Pending; the first after the write reads stale.
	h.waitFor("a pass reading a stale release", func() bool { return stale.Served() > 0 })
	h.update("vor", func(v *valdv1.ValdOperatorRelease) { v.Spec.Infrastructure[0].Clusters[1].ID = "id-b" })
	h.waitStatus("vor", statusCompleted)
	// More passes on stale reads after Completed, then time for a repeat to be sent (a
	// patch of the first event, right after it).
	time.Sleep(3 * time.Second)
	got := testenv.EventCounts(t, env.Client, h.ns, "vor")
	if len(got) < 2 {
		t.Fatalf("events %v, want Pending and Completed", got)
	}
	for reason, n := range got {
		if n != 1 {
			t.Errorf("event %s recorded %d times, want once (events %v, %d stale reads)", reason, n, got, stale.Served())
		}
	}
}
