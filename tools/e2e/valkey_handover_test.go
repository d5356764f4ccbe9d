package e2e

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
)

// The hand-over scenario's cluster.
const (
	vkhNamespace = "e2e-valkey-handover"
	vkhName      = "vkh"
)

// TestValkeyPrimaryHandover (issue 21, item 2): with a writer running, a primary's pod is
// deleted as `kubectl delete pod` does (default grace period). The pod's preStop hook
// hands the shard to its replica with a coordinated CLUSTER FAILOVER before the server
// gets SIGTERM, so the operator never has to promote a replica with CLUSTER FAILOVER
// TAKEOVER: no ReplicasTakenOver event, the writer's longest outage stays under 1 s and
// no acknowledged write is lost. The pod comes back as a replica and the cluster is Ready.
func TestValkeyPrimaryHandover(t *testing.T) {
	needRunner(t, "the writer and the cli reach the Valkey pods at their addresses")
	needInstalled(t, "valkey-operator")
	needCLI(t)
	ctx := scenarioContext(t)
	s := &vkScenario{t: t, begin: time.Now(), ns: vkhNamespace, name: vkhName, user: vkUser, password: vkPassword}
	writerBin := make(chan string, 1)
	go func() { writerBin <- s.buildWriter() }()
	t.Cleanup(func() {
		_ = env.client.CoreV1().Namespaces().Delete(context.Background(), s.ns, metav1.DeleteOptions{})
	})
	s.step(ctx, "create 3x1", 4*time.Minute, vkWant{3, 1, vkImageOld, ""}, func(ctx context.Context) error {
		return s.apply(ctx, vkManifest(vkhNamespace, vkhName))
	}, valkeyv1.EventClusterReady)

	bin := <-writerBin
	if bin == "" {
		t.FailNow()
	}
	s.startWriter(ctx, bin)
	// Some acknowledged writes before the deletion.
	time.Sleep(5 * time.Second)

	s.allowWarnings = true
	victim, err := s.primaryPod(ctx)
	if err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	s.step(ctx, "delete a primary's pod", 3*time.Minute, vkWant{3, 1, vkImageOld, ""}, func(ctx context.Context) error {
		s.t.Logf("deleting pod %s (primary, %s)", victim.Name, victim.Status.PodIP)
		if err := env.client.CoreV1().Pods(s.ns).Delete(ctx, victim.Name, metav1.DeleteOptions{}); err != nil {
			return err
		}
		return poll(ctx, t, "pod "+victim.Name+" replaced", 2*time.Minute, func(ctx context.Context) (bool, error) {
			q, err := env.client.CoreV1().Pods(s.ns).Get(ctx, victim.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			if err != nil {
				return transient(err)
			}
			return q.UID != victim.UID, nil
		})
	}, valkeyv1.EventClusterReady)
	// The replaced pod's server is a replica now: the shard's primary moved before it went.
	nodes, err := s.nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	roles, err := s.roles(ctx, nodes)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if n.Status.PodName == victim.Name && roles[n.Status.PodIP] != valkeyv1.RoleReplica {
			t.Errorf("the replaced pod %s (%s) is %q in CLUSTER NODES, want a replica", victim.Name, n.Status.PodIP, roles[n.Status.PodIP])
		}
	}
	// Writes keep going a little after the pod is back.
	time.Sleep(3 * time.Second)
	sum := s.stopWriter()

	evs, err := s.events(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.at.After(deleted.Add(-time.Second)) && e.reason == valkeyv1.EventReplicasTakenOver {
			t.Errorf("the operator promoted a replica with TAKEOVER (%s %s: %s): the pod went without handing its shard over", e.kind, e.name, e.note)
		}
	}
	t.Logf("primary pod deleted (server %s): writer %d acknowledged, %d refused, longest outage %.2fs, %d lost, %d unreadable; its summary:\n%s",
		vkCLI, sum.Acked, sum.Refused, sum.LongestOutageSeconds, sum.Lost, sum.Unreadable, sum.raw)
	if sum.Acked < 500 {
		t.Errorf("only %d writes acknowledged: the writer hardly ran", sum.Acked)
	}
	if sum.LongestOutageSeconds >= 1 {
		t.Errorf("writes were refused for %.2fs after the primary's pod was deleted, want under 1 s", sum.LongestOutageSeconds)
	}
	if sum.Lost != 0 || sum.Unreadable != 0 {
		t.Errorf("data safety: %d acknowledged keys lost (first: %v), %d unreadable", sum.Lost, sum.LostKeys, sum.Unreadable)
	}
}
