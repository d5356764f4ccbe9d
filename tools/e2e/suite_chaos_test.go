// The chaos run sits after e2e_test.go (TestInstall) and before z_rbac_audit_test.go: go test runs
// a package's tests in the order of its files.

package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
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

// chaosTarget is one product's part of the chaos run: its cluster, its writer, its faults
// and what it checks at the end.
type chaosTarget interface {
	// product names it in the fault log ("valkey", ...).
	product() string
	// operator is the release of its operator.
	operator() string
	// create applies its cluster and returns without waiting: every product's cluster
	// converges at once.
	create(ctx context.Context)
	// start waits until the cluster is Ready and starts its writer.
	start(ctx context.Context)
	// ready says whether the cluster is Ready at its spec now.
	ready(ctx context.Context) bool
	// members are the addresses of its data-plane pods now (none for a product without
	// one).
	members(ctx context.Context) []string
	// faults are its own faults.
	faults() []chaosFault
	// finish waits until the cluster is Ready at its last spec, stops the writer and checks
	// that every acknowledged write reads back.
	finish(ctx context.Context)
}

// chaosFault is one kind of fault. One that takes a member away (a pod deleted, a member
// cut off, a roll) is injected only while its product is Ready, as a PodDisruptionBudget
// lets an eviction through only while enough members serve; the others at any moment.
type chaosFault struct {
	name   string
	member bool
	// once: at most once a run (a roll to a new image).
	once bool
	run  func(ctx context.Context, rng *rand.Rand, log *chaosLog) error
}

// TestChaos is the chaos run of issue "Faults across the suite", item 4: the four products
// at once on the local cluster, each under its writer (Valkey: a 3x1 ValkeyCluster and its
// writer; Memgraph: a 3+2 MemgraphCluster written through the coordinators' routing;
// VeltrixDB: 3 members on disks the node agents prepare, written through every member;
// Vald: a ValdOperatorRelease of two clusters, the Vald Helm Operator played by the test),
// while a seeded loop injects, at random, for CHAOS_DURATION:
//
//   - an operator's pod killed (grace period 0), or a node agent's, at any moment;
//   - the control plane (kube-apiserver and etcd) stopped for 15 s, at most once a run;
//   - the operators cut off from one product's members for 5 to 10 s;
//   - a product scaled one way or the other (Valkey 3 <-> 4 shards, Memgraph 2 <-> 3 data
//     instances, VeltrixDB 3 <-> 4 members, Vald's general pool 2 <-> 3), at any moment;
//   - while its product is Ready: a member's pod deleted, a member cut off from the others
//     for 5 to 10 s, or (once) a roll to another image.
//
// At the end every cluster is Ready at its last spec, every acknowledged write reads back,
// Memgraph never showed two MAINs, the ValdReleases are those of the last spec, and no disk
// of any node was formatted that the VeltrixDB cluster did not ask for. The seed and the
// fault log are printed; CHAOS_SEED=<seed> replays the same choices (the timing of a
// shared machine still differs).
func TestChaos(t *testing.T) {
	needRunner(t, "the writers and the faults reach the pods at their addresses")
	needInstalled(t, "valkey-operator", "memgraph-operator", "veltrix-operator", "vald-operator", "node-agent")
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

	disks := watchDisks(ctx, t, vxChaosName)
	targets := []chaosTarget{newVkChaos(t), newMgChaos(t), newVxChaos(t), newVdChaos(t)}
	for _, c := range targets {
		c.create(ctx)
	}
	for _, c := range targets {
		c.start(ctx)
	}
	log.begin = time.Now()
	log.add("every product Ready and written to; faults begin")

	counts := map[string]int{}
	done := map[string]bool{}
	outage := false
	for time.Since(log.begin) < duration {
		type pick struct {
			name string
			run  func(ctx context.Context, rng *rand.Rand, log *chaosLog) error
		}
		var picks []pick
		picks = append(picks, pick{"kill-operator", killOperator(targets)}, pick{"kill-agent", killAgent}, pick{"cut-operators", cutOperators(t, targets)})
		if !outage {
			picks = append(picks, pick{"control-plane", func(ctx context.Context, _ *rand.Rand, log *chaosLog) error {
				outage = true
				log.add("control plane stopped for 15 s")
				if err := controlPlaneOutage(ctx, t, 15*time.Second); err != nil {
					t.Fatalf("control-plane outage: %v", err)
				}
				log.add("control plane back")
				return nil
			}})
		}
		for _, c := range targets {
			ready := c.ready(ctx)
			for _, f := range c.faults() {
				name := c.product() + "/" + f.name
				if (f.member && !ready) || (f.once && done[name]) {
					continue
				}
				picks = append(picks, pick{name, f.run})
			}
		}
		p := picks[rng.IntN(len(picks))]
		counts[p.name]++
		done[p.name] = true
		if err := p.run(ctx, rng, log); err != nil {
			log.add("%s: %v (the API may be restarting)", p.name, err)
		}
		time.Sleep(time.Duration(2000+rng.IntN(4000)) * time.Millisecond)
	}
	log.add("faults stopped: %v", counts)

	for _, c := range targets {
		c.finish(ctx)
	}
	disks.check(ctx)
	if len(log.lines) < 4 {
		t.Errorf("only %d faults in %s: the loop hardly ran", len(log.lines)-2, duration)
	}
	t.Logf("chaos: faults %v; seed %d", counts, seed)
}

// killOperator kills one product's operator pods (grace period 0).
func killOperator(targets []chaosTarget) func(ctx context.Context, rng *rand.Rand, log *chaosLog) error {
	return func(ctx context.Context, rng *rand.Rand, log *chaosLog) error {
		op := targets[rng.IntN(len(targets))].operator()
		ps, err := pods(ctx, serviceByName(op))
		if err != nil {
			return err
		}
		for _, p := range ps {
			if err := env.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
				log.add("killing %s pod %s: %v", op, p.Name, err)
				continue
			}
			log.add("killed %s pod %s", op, p.Name)
		}
		return nil
	}
}

// killAgent kills the node agent of one node (grace period 0); its DaemonSet starts it
// again.
func killAgent(ctx context.Context, rng *rand.Rand, log *chaosLog) error {
	ps, err := pods(ctx, serviceByName("node-agent"))
	if err != nil || len(ps) == 0 {
		return fmt.Errorf("no node agent pod to kill (%w)", err)
	}
	p := ps[rng.IntN(len(ps))]
	if err := env.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		return err
	}
	log.add("killed node agent %s on %s", p.Name, p.Spec.NodeName)
	return nil
}

// cutOperators cuts the operators (the charts' user) off from one product's members for
// 5 to 10 s.
func cutOperators(t *testing.T, targets []chaosTarget) func(ctx context.Context, rng *rand.Rand, log *chaosLog) error {
	return func(ctx context.Context, rng *rand.Rand, log *chaosLog) error {
		var withMembers []chaosTarget
		for _, c := range targets {
			if len(c.members(ctx)) > 0 {
				withMembers = append(withMembers, c)
			}
		}
		if len(withMembers) == 0 {
			return fmt.Errorf("no product has members to cut off")
		}
		c := withMembers[rng.IntN(len(withMembers))]
		addrs := c.members(ctx)
		d := time.Duration(5+rng.IntN(6)) * time.Second
		cut := partitionUser(t, operatorUser(ctx, t, c.operator()), addrs, d)
		log.add("operators cut off from %s's %d members for %s", c.product(), len(addrs), d)
		time.Sleep(d)
		log.add("operators' cut from %s healed after %s", c.product(), cut.Heal().Round(100*time.Millisecond))
		return nil
	}
}

// cutMember cuts victim off from every other address in all for 5 to 10 s.
func cutMember(t *testing.T, rng *rand.Rand, log *chaosLog, what, victim string, all []string) {
	others := slices.DeleteFunc(slices.Clone(all), func(ip string) bool { return ip == victim })
	d := time.Duration(5+rng.IntN(6)) * time.Second
	cut := partitionPods(t, victim, others, d)
	log.add("%s %s cut off from %d members for %s", what, victim, len(others), d)
	time.Sleep(d)
	log.add("partition of %s healed after %s", victim, cut.Heal().Round(100*time.Millisecond))
}

// deleteMemberPod deletes one of the pods the selector names in ns, as an eviction does.
func deleteMemberPod(ctx context.Context, rng *rand.Rand, log *chaosLog, ns, sel string) error {
	list, err := env.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return err
	}
	if len(list.Items) == 0 {
		return fmt.Errorf("no pod of %s in %s", sel, ns)
	}
	p := list.Items[rng.IntN(len(list.Items))]
	if err := env.client.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
		return err
	}
	log.add("deleted pod %s/%s (%s)", ns, p.Name, p.Status.PodIP)
	return nil
}

// podIPs are the addresses of the running pods the selector names in ns.
func podIPs(ctx context.Context, ns, sel string) []string {
	list, err := env.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil
	}
	var ips []string
	for _, p := range list.Items {
		if p.Status.PodIP != "" && p.DeletionTimestamp == nil {
			ips = append(ips, p.Status.PodIP)
		}
	}
	return ips
}
