package cluster_test

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	clustercontroller "github.com/opsuite/suite/services/valkey-operator/internal/controller/cluster"
	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
	"github.com/opsuite/suite/shared/conditions"
	"github.com/opsuite/suite/shared/testenv"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestSlotMovesWaitForReplicaAcks drops the acknowledgements of one replica (an iptables
// rule on its replication connection, nothing else of it) and scales 3 shards to 4. Valkey
// 8.0+ replicates CLUSTER SETSLOT before applying it and refuses it (NOREPLICAS) when a
// replica does not acknowledge it in 2 s: within the grace the cluster says it waits for
// that primary's replicas, with no Degraded condition and no warning; past the grace it is
// Degraded with a warning that says so; once the acknowledgements flow again the move
// completes, Degraded clears and every key is there. A server that applies SETSLOT without
// its replicas (Redis 7.0) completes the move with the acknowledgements still dropped.
func TestSlotMovesWaitForReplicaAcks(t *testing.T) {
	t.Parallel()
	const grace = 20 * time.Second
	c, ctx := env.Client, context.Background()
	ns := testenv.NewNamespace(t, c, "vkc-acks")
	f := newFleet(t, c, ns)
	startControllerWith(t, f, func(cfg *clustercontroller.Config) { cfg.ReplicaAckGrace = grace })
	vc := &valkeyv1.ValkeyCluster{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: ns}, Spec: valkeyv1.ValkeyClusterSpec{Shards: 3, Replicas: 1}}
	if err := c.Create(ctx, vc); err != nil {
		t.Fatal(err)
	}
	waitReady(t, f, "a", 90*time.Second)
	t.Cleanup(func() { f.dumpOnFailure(t) })
	keys := writeKeys(t, f.seeds(), "a", 2000)

	primary, replica := f.server("a-0-0"), f.server("a-0-1")
	conn, err := valkey.Dial(primary.Addr, valkey.Options{DialTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	repl, err := conn.ReplicationState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	caps, err := conn.Capabilities(ctx)
	conn.Close()
	if err != nil {
		t.Fatal(err)
	}
	if repl.Replica() {
		t.Fatalf("a-0-0 (%s) is a replica: the test needs shard 0 as formed", primary.Addr)
	}
	// SETSLOT's TIMEOUT argument came with its replication (Valkey 8.0).
	waits := caps.SetSlotTimeout
	link, err := testenv.ConnLocalPort(replica.Pid(), primary.Addr)
	if err != nil {
		t.Fatalf("a-0-1's replication link to %s: %v", primary.Addr, err)
	}
	_, primaryPort, _ := net.SplitHostPort(primary.Addr)
	const bound = 50 * time.Second // under repl-timeout (60 s): the link itself stays up
	cut := testenv.DropOutput(t, bound, []string{"-p", "tcp", "-s", "127.0.0.1", "--sport", strconv.Itoa(link), "-d", "127.0.0.1", "--dport", primaryPort})
	t.Logf("dropping a-0-1's packets to its primary %s (from port %d), %s %s", primary.Addr, link, caps.Server, caps.Version)
	scale(t, c, ns, "a", 4, 1)

	if waits {
		waiting := "Waiting for the replicas of " + primary.Addr + " to acknowledge slot changes"
		var seen time.Time
		testenv.Eventually(t, 2*time.Minute, "the cluster waits for a-0-0's replicas", func() (bool, string) {
			f.sync(ctx)
			cur := get(t, f, "a")
			p := conditions.Get(cur.Status.Conditions, valkeyv1.ConditionProgressing)
			if p == nil || p.Message != waiting {
				return false, fmt.Sprintf("Progressing %+v", p)
			}
			seen = time.Now()
			return true, ""
		})
		// Within the grace: no Degraded, no warning, while the refusals go on.
		for time.Since(seen) < grace/2 {
			f.sync(ctx)
			cur := get(t, f, "a")
			if d := conditions.Get(cur.Status.Conditions, valkeyv1.ConditionDegraded); d != nil && d.Status == metav1.ConditionTrue {
				t.Fatalf("Degraded %s within the grace: %s", d.Reason, d.Message)
			}
			if n := eventReasons(t, c, ns, "a")[valkeyv1.EventSlotRebalanceFailed]; n > 0 {
				t.Fatalf("%d %s warnings within the grace", n, valkeyv1.EventSlotRebalanceFailed)
			}
			time.Sleep(500 * time.Millisecond)
		}
		testenv.Eventually(t, grace+30*time.Second, "Degraded past the grace", func() (bool, string) {
			f.sync(ctx)
			cur := get(t, f, "a")
			d := conditions.Get(cur.Status.Conditions, valkeyv1.ConditionDegraded)
			if d == nil || d.Status != metav1.ConditionTrue || d.Reason != valkeyv1.ReasonRebalanceFailed {
				return false, fmt.Sprintf("Degraded %+v", d)
			}
			want := fmt.Sprintf("the replicas of %s have not acknowledged slot changes for over %s", primary.Addr, grace)
			if !strings.Contains(d.Message, want) {
				return false, "message: " + d.Message
			}
			return eventReasons(t, c, ns, "a")[valkeyv1.EventSlotRebalanceFailed] == 1, "no warning event yet"
		})
		t.Logf("acknowledgements dropped for %s", cut.Heal().Round(100*time.Millisecond))
	}

	got := waitReady(t, f, "a", movesTimeout)
	if lasted := cut.Heal(); !waits && lasted >= bound {
		t.Errorf("%s %s applies SETSLOT without its replicas, yet the move waited for the dropped acknowledgements (%s)", caps.Server, caps.Version, lasted)
	}
	if d := conditions.Get(got.Status.Conditions, valkeyv1.ConditionDegraded); d != nil && d.Status == metav1.ConditionTrue {
		t.Errorf("still Degraded after the move: %s: %s", d.Reason, d.Message)
	}
	assertTopology(t, f, 4, 1)
	assertConverged(t, f)
	readKeys(t, f.seeds(), keys)
}

// get reads the cluster name of f's namespace.
func get(t *testing.T, f *fleet, name string) *valkeyv1.ValkeyCluster {
	t.Helper()
	var vc valkeyv1.ValkeyCluster
	if err := f.c.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: name}, &vc); err != nil {
		t.Fatal(err)
	}
	return &vc
}
