package cluster_test

import (
	"context"
	"strings"
	"testing"
	"time"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	"github.com/opsuite/suite/shared/conditions"
	"github.com/opsuite/suite/shared/testenv"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestRollStopsBeforeAPrimaryWithoutReplica: with spec.replicas 0 a rolling update would
// take each shard's only copy down. It stops before the first primary with Progressing and
// Ready reason RollBlocked, a message saying how to go on and one RollBlocked Warning
// event, and restarts nothing; once spec.rollout.allowPrimaryWithoutReplica is set it
// replaces every primary, each with a PrimaryReplacedAlone Warning event.
func TestRollStopsBeforeAPrimaryWithoutReplica(t *testing.T) {
	t.Parallel()
	c := env.Client
	ctx := context.Background()
	f, vc := startCluster(t, "vkc-roll", "solo", valkeyv1.ValkeyClusterSpec{Shards: 3, Replicas: 0})
	waitReady(t, f, "solo", 90*time.Second)
	keys := writeKeys(t, f.seeds(), "r", 300)

	update := func(change func(*valkeyv1.ValkeyCluster)) {
		t.Helper()
		var cur valkeyv1.ValkeyCluster
		if err := c.Get(ctx, client.ObjectKeyFromObject(vc), &cur); err != nil {
			t.Fatal(err)
		}
		change(&cur)
		if err := c.Update(ctx, &cur); err != nil {
			t.Fatal(err)
		}
	}
	restarts := f.restarts
	update(func(cur *valkeyv1.ValkeyCluster) { cur.Spec.Image = "valkey/valkey:9.0" })
	var blocked valkeyv1.ValkeyCluster
	testenv.Eventually(t, 60*time.Second, "the roll blocked", func() (bool, string) {
		f.sync(ctx)
		if err := c.Get(ctx, client.ObjectKeyFromObject(vc), &blocked); err != nil {
			return false, err.Error()
		}
		p := conditions.Get(blocked.Status.Conditions, valkeyv1.ConditionProgressing)
		return p != nil && p.Reason == valkeyv1.ReasonRollBlocked && p.ObservedGeneration == blocked.Generation, blocked.Status.Reason + ": " + blocked.Status.Message
	})
	wantCondition(t, &blocked, valkeyv1.ConditionProgressing, metav1.ConditionTrue, valkeyv1.ReasonRollBlocked)
	wantCondition(t, &blocked, valkeyv1.ConditionReady, metav1.ConditionFalse, valkeyv1.ReasonRollBlocked)
	msg := conditions.Get(blocked.Status.Conditions, valkeyv1.ConditionProgressing).Message
	for _, want := range []string{"no replica", "keys are lost", "spec.replicas", "spec.rollout.allowPrimaryWithoutReplica"} {
		if !strings.Contains(msg, want) {
			t.Errorf("RollBlocked message %q does not say %q", msg, want)
		}
	}
	// It stays blocked: passes go by (Poll is 300 ms) and nothing is restarted.
	for range 10 {
		f.sync(ctx)
		time.Sleep(300 * time.Millisecond)
	}
	if n := f.restarts - restarts; n != 0 {
		t.Errorf("a blocked roll restarted %d servers", n)
	}
	wantEvents(t, f, "solo", map[string]int{valkeyv1.EventRollBlocked: 1})
	if n := eventReasons(t, c, f.ns, "solo")[valkeyv1.EventRollBlocked]; n != 1 {
		t.Errorf("RollBlocked recorded as %d distinct events, want 1", n)
	}
	readKeys(t, f.seeds(), keys)

	update(func(cur *valkeyv1.ValkeyCluster) {
		cur.Spec.Rollout = &valkeyv1.RolloutSpec{AllowPrimaryWithoutReplica: true}
	})
	waitReady(t, f, "solo", 120*time.Second)
	if n := f.restarts - restarts; n != 3 {
		t.Errorf("the allowed roll restarted %d servers, want 3", n)
	}
	wantEvents(t, f, "solo", map[string]int{valkeyv1.EventPrimaryReplacedAlone: 1, valkeyv1.EventValkeyNodeUpdated: 3})
	// The fleet's servers run without persistence, so the keys went with the restarts, as
	// the RollBlocked message warned; the cluster serves writes again.
	readKeys(t, f.seeds(), writeKeys(t, f.seeds(), "after", 100))
}
