package controller_test

import (
	"testing"
	"time"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/shared/testenv"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestStaleCacheRepeatsNoEvent: with the cache lagging every status write by two reads,
// the cluster's transitions are judged against the last status written, so each event is
// recorded once.
func TestStaleCacheRepeatsNoEvent(t *testing.T) {
	stale := &testenv.StaleReads{Kind: &memgraphv1.MemgraphCluster{}, Reads: 2}
	h := startWith(t, "mg-stale", []testenv.ManagerOption{stale.Manager()})
	h.create("demo", 3, 2)
	h.waitCondition("demo", memgraphv1.ConditionReady, metav1.ConditionFalse, memgraphv1.ReasonWorkloadsNotReady)
	h.podsRun("demo-coordinator")
	h.podsRun("demo-data")
	h.waitCondition("demo", memgraphv1.ConditionReady, metav1.ConditionTrue, memgraphv1.ReasonReady)
	if stale.Served() == 0 {
		t.Fatal("no pass read a stale cluster")
	}
	// A repeat is sent as a patch of the first event right after it is recorded.
	time.Sleep(2 * time.Second)
	got := testenv.EventCounts(t, h.c, h.ns, "demo")
	if len(got) == 0 {
		t.Fatal("no events recorded")
	}
	for reason, n := range got {
		if n != 1 {
			t.Errorf("event %s recorded %d times, want once (events %v, %d stale reads)", reason, n, got, stale.Served())
		}
	}
}
