package controller_test

import (
	"testing"
	"time"

	veltrixv1 "github.com/opsuite/suite/api/veltrix/v1alpha1"
	"github.com/opsuite/suite/services/veltrix-operator/internal/controller"
	"github.com/opsuite/suite/shared/testenv"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
)

// TestStaleCacheRepeatsNoEvent: with the controller's reads lagging every status write by
// two reads, the cluster's transitions are judged against the last status written, so each
// event is recorded once.
func TestStaleCacheRepeatsNoEvent(t *testing.T) {
	ns := testenv.NewNamespace(t, env.Client, "vx")
	stale := &testenv.StaleReads{Kind: &veltrixv1.VeltrixCluster{}, Reads: 2}
	env.StartManager(t, func(mgr ctrl.Manager) error {
		return controller.Setup(mgr, controller.Config{
			Client: stale.Wrap(mgr.GetClient()), Poll: 200 * time.Millisecond,
			Backoff: 200 * time.Millisecond, MaxBackoff: 400 * time.Millisecond,
		})
	}, testenv.InNamespaces(ns))
	c := newCluster(t, ns, func(c *veltrixv1.VeltrixCluster) { c.Spec.Size, c.Spec.ReplicationFactor = 1, 1 })
	condition(t, c, veltrixv1.ConditionReady, metav1.ConditionFalse, veltrixv1.ReasonAgentsMissing)
	testenv.Eventually(t, 10*time.Second, "a pass reading a stale cluster", func() (bool, string) {
		return stale.Served() > 0, ""
	})
	// A repeat is sent as a patch of the first event right after it is recorded.
	time.Sleep(2 * time.Second)
	got := testenv.EventCounts(t, env.Client, ns, c.Name)
	if len(got) == 0 {
		t.Fatal("no events recorded")
	}
	for reason, n := range got {
		if n != 1 {
			t.Errorf("event %s recorded %d times, want once (events %v, %d stale reads)", reason, n, got, stale.Served())
		}
	}
}
