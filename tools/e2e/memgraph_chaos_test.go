package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/json"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
)

// mgChaos is the chaos run's Memgraph part: a 3+2 cluster, every member behind a load
// balancer, written through the coordinators' routing (neo4j://) by the neo4j driver.
type mgChaos struct {
	m     *mglScenario
	w     *mgxWriter
	watch *mglMainWatch
}

func newMgChaos(t *testing.T) *mgChaos {
	m := &mglScenario{t: t, ns: "e2e-chaos-memgraph", name: "chaosmg", coordinators: 3, data: 2}
	t.Cleanup(func() {
		_ = env.client.CoreV1().Namespaces().Delete(context.Background(), m.ns, metav1.DeleteOptions{})
	})
	return &mgChaos{m: m}
}

func (c *mgChaos) product() string  { return "memgraph" }
func (c *mgChaos) operator() string { return "memgraph-operator" }

func (c *mgChaos) create(ctx context.Context) {
	manifest := mgExternalManifest(c.m.ns, c.m.name, "")
	if out, err := kubectlStdin(ctx, manifest, "apply", "-f", "-"); err != nil {
		c.m.t.Fatalf("applying the MemgraphCluster: %v\n%s", err, out)
	}
}

func (c *mgChaos) start(ctx context.Context) {
	c.m.ready(ctx, "memgraph created", nil)
	lbs := c.m.advertised(ctx, "memgraph created")
	c.w = startMgxWriter(ctx, c.m.t, "neo4j://"+lbs[c.m.name+"-external"])
	c.m.t.Cleanup(c.w.stop)
	c.w.waitAcked(ctx, "the memgraph writer starts", 20)
	c.watch = c.m.watchMains(ctx, lbs)
}

func (c *mgChaos) get(ctx context.Context) (*memgraphv1.MemgraphCluster, error) {
	return mgClusterIn(ctx, c.m.ns, c.m.name)
}

func (c *mgChaos) ready(ctx context.Context) bool {
	got, err := c.get(ctx)
	return err == nil && c.m.isReady(got)
}

func (c *mgChaos) selector() string { return "memgraph.com/cluster=" + c.m.name }

func (c *mgChaos) members(ctx context.Context) []string { return podIPs(ctx, c.m.ns, c.selector()) }

func (c *mgChaos) patch(ctx context.Context, spec map[string]any) error {
	b, err := json.Marshal(map[string]any{"spec": spec})
	if err != nil {
		return err
	}
	_, err = env.dyn.Resource(mgcGVR).Namespace(c.m.ns).Patch(ctx, c.m.name, types.MergePatchType, b, metav1.PatchOptions{})
	return err
}

func (c *mgChaos) faults() []chaosFault {
	return []chaosFault{
		{name: "scale", run: func(ctx context.Context, _ *rand.Rand, log *chaosLog) error {
			to := 5 - c.m.data // 2 <-> 3
			if err := c.patch(ctx, map[string]any{"dataInstances": to}); err != nil {
				return err
			}
			c.m.data = to
			log.add("memgraph scaled to %d data instances", to)
			return nil
		}},
		{name: "roll", member: true, once: true, run: func(ctx context.Context, _ *rand.Rand, log *chaosLog) error {
			if err := c.patch(ctx, map[string]any{"image": map[string]any{"tag": "3.12.1"}}); err != nil {
				return err
			}
			log.add("memgraph rolls to 3.12.1")
			return nil
		}},
		{name: "delete-pod", member: true, run: func(ctx context.Context, rng *rand.Rand, log *chaosLog) error {
			return deleteMemberPod(ctx, rng, log, c.m.ns, c.selector())
		}},
		{name: "cut-replica", member: true, run: func(ctx context.Context, rng *rand.Rand, log *chaosLog) error {
			got, err := c.get(ctx)
			if err != nil {
				return err
			}
			list, err := env.client.CoreV1().Pods(c.m.ns).List(ctx, metav1.ListOptions{LabelSelector: c.selector()})
			if err != nil {
				return err
			}
			mainPod := strings.ReplaceAll(got.Status.Main, "_", "-")
			var replicas, all []string
			for _, p := range list.Items {
				if p.Status.PodIP == "" {
					continue
				}
				all = append(all, p.Status.PodIP)
				if strings.HasPrefix(p.Name, c.m.name+"-data-") && p.Name != mainPod {
					replicas = append(replicas, p.Status.PodIP)
				}
			}
			if got.Status.Main == "" || len(replicas) == 0 {
				return fmt.Errorf("no memgraph replica to cut off (MAIN %q)", got.Status.Main)
			}
			cutMember(c.m.t, rng, log, "memgraph replica", replicas[rng.IntN(len(replicas))], all)
			return nil
		}},
	}
}

func (c *mgChaos) finish(ctx context.Context) {
	t := c.m.t
	c.m.ready(ctx, "memgraph after the chaos", nil)
	most := c.watch.stop()
	c.w.stop()
	acked, attempts, failures, gaps := c.w.figures()
	t.Logf("memgraph writer: %d acknowledged of %d attempts, %d failed; longest gaps %v", len(acked), attempts, failures, gaps)
	if most > 1 {
		t.Errorf("the coordinators showed %d MAINs at once during the chaos run", most)
	}
	if len(acked) < 20 {
		t.Errorf("only %d memgraph writes acknowledged during the chaos run: the writer hardly ran", len(acked))
	}
	c.m.readBack(ctx, acked)
}
