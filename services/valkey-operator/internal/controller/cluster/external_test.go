package cluster_test

import (
	"context"
	"testing"
	"time"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	"github.com/opsuite/suite/shared/testenv"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestExternalToggledWithoutRoll: networking.external added to and removed from a running
// cluster reaches every ValkeyNode at once, not through the rolling update: no pod
// restarts, no failover, no ValkeyNodeUpdated, and the cluster is Ready again.
func TestExternalToggledWithoutRoll(t *testing.T) {
	t.Parallel()
	f, vc := startCluster(t, "vkc-ext", "x", valkeyv1.ValkeyClusterSpec{Shards: 3, Replicas: 1})
	ctx := context.Background()
	waitReady(t, f, "x", 90*time.Second)
	before := eventReasons(t, f.c, f.ns, "x")

	set := func(ext *valkeyv1.ExternalSpec) {
		testenv.Eventually(t, 10*time.Second, "updating the cluster", func() (bool, string) {
			if err := f.c.Get(ctx, client.ObjectKeyFromObject(vc), vc); err != nil {
				return false, err.Error()
			}
			vc.Spec.Networking = &valkeyv1.NetworkingSpec{External: ext}
			if ext == nil {
				vc.Spec.Networking = nil
			}
			err := f.c.Update(ctx, vc)
			return err == nil, "update: " + errString(err)
		})
	}
	nodesHave := func(want bool) {
		testenv.Eventually(t, 30*time.Second, "every node's spec.external follows", func() (bool, string) {
			f.sync(ctx)
			var list valkeyv1.ValkeyNodeList
			if err := f.c.List(ctx, &list, client.InNamespace(f.ns)); err != nil {
				return false, err.Error()
			}
			for _, n := range list.Items {
				if (n.Spec.External != nil) != want {
					return false, n.Name + " not updated yet"
				}
			}
			return len(list.Items) == 6, "nodes"
		})
	}

	set(&valkeyv1.ExternalSpec{Mode: valkeyv1.ExternalModeLoadBalancer})
	nodesHave(true)
	waitReady(t, f, "x", 60*time.Second)
	set(nil)
	nodesHave(false)
	waitReady(t, f, "x", 60*time.Second)

	after := eventReasons(t, f.c, f.ns, "x")
	for _, r := range []string{valkeyv1.EventValkeyNodeUpdated, valkeyv1.EventFailoverInitiated} {
		if after[r] != before[r] {
			t.Errorf("event %s: %d before the toggles, %d after: external access went through the rolling update", r, before[r], after[r])
		}
	}
	if f.restarts != 0 {
		t.Errorf("%d servers restarted for external access", f.restarts)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
