package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
)

// vkChaos is the chaos run's Valkey part: a 3x1 cluster with no persistence, under the
// scenario's writer. A primary restarted before a replica took its data over starts empty,
// the product's documented loss and not the operator's, so a member is taken away only
// while the cluster is Ready.
type vkChaos struct {
	s      *vkScenario
	shards int
	image  string
	bin    chan string
}

func newVkChaos(t *testing.T) *vkChaos {
	s := &vkScenario{t: t, begin: time.Now(), ns: "e2e-chaos", name: "chaos", user: vkUser, password: vkPassword, writerRate: 50}
	t.Cleanup(func() {
		_ = env.client.CoreV1().Namespaces().Delete(context.Background(), s.ns, metav1.DeleteOptions{})
	})
	return &vkChaos{s: s, shards: 3, image: vkImageOld, bin: make(chan string, 1)}
}

func (v *vkChaos) product() string  { return "valkey" }
func (v *vkChaos) operator() string { return "valkey-operator" }

func (v *vkChaos) create(ctx context.Context) {
	go func() { v.bin <- v.s.buildWriter() }()
	if err := v.s.apply(ctx, vkManifest(v.s.ns, v.s.name)); err != nil {
		v.s.t.Fatalf("applying the ValkeyCluster: %v", err)
	}
}

func (v *vkChaos) start(ctx context.Context) {
	v.s.step(ctx, "create 3x1", 4*time.Minute, vkWant{3, 1, vkImageOld, ""}, func(context.Context) error { return nil })
	bin := <-v.bin
	if bin == "" {
		v.s.t.FailNow()
	}
	v.s.startWriter(ctx, bin)
	v.s.allowWarnings = true
}

func (v *vkChaos) ready(ctx context.Context) bool {
	w, err := v.s.apiReady(ctx, vkWant{v.shards, 1, "", ""})
	return err == nil && w == ""
}

func (v *vkChaos) members(ctx context.Context) []string {
	return podIPs(ctx, v.s.ns, "valkey.io/cluster="+v.s.name)
}

func (v *vkChaos) faults() []chaosFault {
	return []chaosFault{
		{name: "scale", run: func(ctx context.Context, _ *rand.Rand, log *chaosLog) error {
			to := 7 - v.shards // 3 <-> 4
			if err := v.s.patch(fmt.Sprintf(`{"spec":{"shards":%d}}`, to))(ctx); err != nil {
				return err
			}
			v.shards = to
			log.add("valkey scaled to %d shards", to)
			return nil
		}},
		{name: "roll", member: true, once: true, run: func(ctx context.Context, _ *rand.Rand, log *chaosLog) error {
			if err := v.s.patch(`{"spec":{"image":"` + vkImageNew + `"}}`)(ctx); err != nil {
				return err
			}
			v.image = vkImageNew
			log.add("valkey rolls to %s", vkImageNew)
			return nil
		}},
		{name: "delete-pod", member: true, run: func(ctx context.Context, rng *rand.Rand, log *chaosLog) error {
			return deleteMemberPod(ctx, rng, log, v.s.ns, "valkey.io/cluster="+v.s.name)
		}},
		{name: "cut-replica", member: true, run: func(ctx context.Context, rng *rand.Rand, log *chaosLog) error {
			nodes, err := v.s.nodes(ctx)
			if err != nil {
				return err
			}
			roles, err := v.s.roles(ctx, nodes)
			if err != nil {
				return err
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
				return fmt.Errorf("no replica to cut off")
			}
			cutMember(v.s.t, rng, log, "valkey replica", replicas[rng.IntN(len(replicas))], all)
			return nil
		}},
	}
}

func (v *vkChaos) finish(ctx context.Context) {
	s := v.s
	seen := s.waitReady(ctx, "after the chaos", 8*time.Minute, vkWant{v.shards, 1, v.image, ""})
	s.t.Logf("valkey Ready with %d shards; states seen: %s", v.shards, strings.Join(seen, " -> "))
	s.checkRoles(ctx, "after the chaos")
	s.checkShards(ctx, "after the chaos", false)
	sum := s.stopWriter()
	s.t.Logf("valkey writer: %d acknowledged, %d lost, %d unreadable, %d refused, longest outage %.2fs",
		sum.Acked, sum.Lost, sum.Unreadable, sum.Refused, sum.LongestOutageSeconds)
	if sum.Lost != 0 || sum.Unreadable != 0 {
		s.t.Errorf("valkey data safety under chaos: %d acknowledged keys lost (first: %v), %d unreadable", sum.Lost, sum.LostKeys, sum.Unreadable)
	}
	if sum.Acked < 100 {
		s.t.Errorf("only %d valkey writes acknowledged during the chaos run: the writer hardly ran", sum.Acked)
	}
}
