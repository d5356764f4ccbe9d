package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
)

// chaosSettings reads CHAOS_DURATION (how long faults are injected; 45s by default, the
// short setting `make test` runs; `make chaos` runs 10m) and CHAOS_SEED (the fault
// sequence; random by default, always printed so a failure can be replayed).
func chaosSettings(t *testing.T) (time.Duration, int64) {
	t.Helper()
	d := 45 * time.Second
	if v := os.Getenv("CHAOS_DURATION"); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil || d <= 0 {
			t.Fatalf("CHAOS_DURATION=%q: want a positive duration such as 10m", v)
		}
	}
	seed := time.Now().UnixNano()
	if v := os.Getenv("CHAOS_SEED"); v != "" {
		var err error
		if seed, err = strconv.ParseInt(v, 10, 64); err != nil {
			t.Fatalf("CHAOS_SEED=%q: want an integer", v)
		}
	}
	return d, seed
}

// chaosLog is the fault log, printed whole when the test fails.
type chaosLog struct {
	t     *testing.T
	begin time.Time
	lines []string
}

func (l *chaosLog) add(format string, args ...any) {
	line := fmt.Sprintf("+%6.1fs ", time.Since(l.begin).Seconds()) + fmt.Sprintf(format, args...)
	l.lines = append(l.lines, line)
	l.t.Log("chaos: " + line)
}

// TestChaos is the chaos run of issue "Faults across the suite", item 4, on Valkey: a 3x1
// cluster under a writer (every acknowledged key read back at the end), while a seeded
// loop injects, at random, for CHAOS_DURATION:
//
//   - the operator's pod killed (grace period 0), at any moment;
//   - the control plane (kube-apiserver and etcd) stopped for 15 s, at most once a run;
//   - a scale between 3 and 4 shards, at any moment (reshards run under the other faults);
//   - a member's pod deleted, or a replica cut off from every other member for 5 to 10 s
//     by a partition. These two take a member away, so they are injected only while the
//     cluster is Ready, as a PodDisruptionBudget lets an eviction through only while
//     enough members serve: the cluster has no persistence, so a primary restarted before
//     a replica took its data over starts empty, which is the product's documented loss,
//     not the operator's.
//
// At the end the cluster is Ready with the last shard count, the data plane agrees, every
// ValkeyNode's role and shard match CLUSTER NODES, and the writer lost nothing. The seed
// and the fault log are printed; CHAOS_SEED=<seed> replays the same choices (the timing of
// a shared machine still differs).
func TestChaos(t *testing.T) {
	needRunner(t, "the writer and the faults reach the Valkey pods at their addresses")
	needInstalled(t, "valkey-operator")
	needCLI(t)
	duration, seed := chaosSettings(t)
	t.Logf("chaos: seed %d, faults for %s (replay: CHAOS_SEED=%d CHAOS_DURATION=%s)", seed, duration, seed, duration)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	log := &chaosLog{t: t, begin: time.Now()}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("chaos seed %d; fault log:\n  %s", seed, strings.Join(log.lines, "\n  "))
		}
	})

	ctx := scenarioContext(t)
	s := &vkScenario{t: t, begin: time.Now(), ns: "e2e-chaos", name: "chaos", user: vkUser, password: vkPassword, writerRate: 50}
	t.Cleanup(func() {
		_ = env.client.CoreV1().Namespaces().Delete(context.Background(), s.ns, metav1.DeleteOptions{})
	})
	writerBin := make(chan string, 1)
	go func() { writerBin <- s.buildWriter() }()
	s.step(ctx, "create 3x1", 4*time.Minute, vkWant{3, 1, vkImageOld, ""}, func(ctx context.Context) error {
		return s.apply(ctx, vkManifest(s.ns, s.name))
	}, valkeyv1.EventClusterReady)
	bin := <-writerBin
	if bin == "" {
		t.FailNow()
	}
	s.startWriter(ctx, bin)
	s.allowWarnings = true
	log.begin = time.Now()

	shards, outage := 3, false
	counts := map[string]int{}
	for time.Since(log.begin) < duration {
		ready := false
		if w, err := s.apiReady(ctx, vkWant{shards, 1, "", ""}); err == nil && w == "" {
			ready = true
		}
		kinds := []string{"kill-operator", "scale"}
		if !outage {
			kinds = append(kinds, "control-plane")
		}
		if ready {
			kinds = append(kinds, "delete-pod", "delete-pod", "partition-replica")
		}
		kind := kinds[rng.IntN(len(kinds))]
		counts[kind]++
		switch kind {
		case "kill-operator":
			op := serviceByName("valkey-operator")
			ps, err := pods(ctx, op)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range ps {
				if err := env.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
					log.add("killing operator pod %s: %v", p.Name, err)
					continue
				}
				log.add("killed operator pod %s", p.Name)
			}
		case "control-plane":
			outage = true
			log.add("control plane stopped for 15 s")
			if err := controlPlaneOutage(ctx, t, 15*time.Second); err != nil {
				t.Fatalf("control-plane outage: %v", err)
			}
			log.add("control plane back")
		case "scale":
			shards = 7 - shards // 3 <-> 4
			if err := s.patch(fmt.Sprintf(`{"spec":{"shards":%d}}`, shards))(ctx); err != nil {
				log.add("scale to %d shards: %v (the API may be restarting)", shards, err)
				shards = 7 - shards
				continue
			}
			log.add("scaled to %d shards", shards)
		case "delete-pod":
			list, err := env.client.CoreV1().Pods(s.ns).List(ctx, metav1.ListOptions{LabelSelector: "valkey.io/cluster=" + s.name})
			if err != nil || len(list.Items) == 0 {
				log.add("no pod to delete (%v)", err)
				continue
			}
			p := list.Items[rng.IntN(len(list.Items))]
			if err := env.client.CoreV1().Pods(s.ns).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
				log.add("deleting pod %s: %v", p.Name, err)
				continue
			}
			log.add("deleted pod %s (%s)", p.Name, p.Status.PodIP)
		case "partition-replica":
			nodes, err := s.nodes(ctx)
			if err != nil {
				log.add("listing members: %v", err)
				continue
			}
			roles, err := s.roles(ctx, nodes)
			if err != nil {
				log.add("reading roles: %v", err)
				continue
			}
			var replicas, all []string
			for _, n := range nodes {
				if n.Status.PodIP == "" {
					continue
				}
				all = append(all, n.Status.PodIP)
				if roles[n.Status.PodIP] == valkeyv1.RoleReplica {
					replicas = append(replicas, n.Status.PodIP)
				}
			}
			if len(replicas) == 0 {
				log.add("no replica to cut off")
				continue
			}
			victim := replicas[rng.IntN(len(replicas))]
			var others []string
			for _, ip := range all {
				if ip != victim {
					others = append(others, ip)
				}
			}
			d := time.Duration(5+rng.IntN(6)) * time.Second
			cut := partitionPods(t, victim, others, d)
			log.add("replica %s cut off from %d members for %s", victim, len(others), d)
			time.Sleep(d)
			log.add("partition of %s healed after %s", victim, cut.heal().Round(100*time.Millisecond))
		}
		time.Sleep(time.Duration(2000+rng.IntN(6000)) * time.Millisecond)
	}
	log.add("faults stopped: %v", counts)

	seen := s.waitReady(ctx, "after the chaos", 8*time.Minute, vkWant{shards, 1, "", ""})
	log.add("Ready with %d shards; states seen: %s", shards, strings.Join(seen, " -> "))
	s.checkRoles(ctx, "after the chaos")
	s.checkShards(ctx, "after the chaos", false)
	sum := s.stopWriter()
	t.Logf("chaos writer: %d acknowledged, %d lost, %d unreadable, %d refused, longest outage %.2fs; faults %v; seed %d",
		sum.Acked, sum.Lost, sum.Unreadable, sum.Refused, sum.LongestOutageSeconds, counts, seed)
	if sum.Lost != 0 || sum.Unreadable != 0 {
		t.Errorf("data safety under chaos: %d acknowledged keys lost (first: %v), %d unreadable", sum.Lost, sum.LostKeys, sum.Unreadable)
	}
	if sum.Acked < 100 {
		t.Errorf("only %d writes acknowledged during the chaos run: the writer hardly ran", sum.Acked)
	}
	if len(log.lines) < 3 {
		t.Errorf("only %d faults in %s: the loop hardly ran", len(log.lines)-1, duration)
	}
}
