package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
)

// TestValkeyExternalAccess is issue 26 item 1 on the local cluster: a 3x1 cluster with
// networking.external mode LoadBalancer gets one LoadBalancer Service per member, each
// given a loopback address of the load-balancer pool, and every member announces its
// address. A client outside Kubernetes (the cli on the host, dialling only those
// addresses) then reads and writes keys in every shard by following MOVED and ASK,
// before, during and after a reshard to 4 shards; MOVED and CLUSTER SLOTS name no pod IP.
func TestValkeyExternalAccess(t *testing.T) {
	needRunner(t, "the load balancer forwards to Valkey pods that run as processes")
	needInstalled(t, "valkey-operator")
	needCLI(t)
	ctx := scenarioContext(t)
	s := &vkScenario{t: t, begin: time.Now(), ns: "e2e-valkey-external", name: "vkx", user: vkUser, password: vkPassword}
	t.Cleanup(func() {
		_ = env.client.CoreV1().Namespaces().Delete(context.Background(), s.ns, metav1.DeleteOptions{})
	})
	manifest := vkManifest(s.ns, s.name) + "  networking:\n    external:\n      mode: LoadBalancer\n"
	s.allowWarnings = true // a member waits for its address; that is no failure
	s.step(ctx, "create 3x1 with external LoadBalancer access", 5*time.Minute, vkWant{3, 1, vkImageOld, ""}, func(ctx context.Context) error {
		return s.apply(ctx, manifest)
	}, valkeyv1.EventClusterReady)

	addrs := s.announced(ctx, "3x1", 6)
	entry := addrs[0]
	const keys = 300
	for i := range keys {
		if _, err := s.cliAt(ctx, entry, "SET", fmt.Sprintf("k:%d", i), fmt.Sprintf("v%d", i)); err != nil {
			t.Fatalf("SET k:%d through %s: %v", i, entry, err)
		}
	}
	s.checkOutside(ctx, "3x1", addrs, keys, 3)

	// During the reshard a client keeps writing and reading through the load balancers,
	// each time entering at another of the members it was given (the 3x1 ones, as a
	// client's seed list would be): MOVED and ASK must send it to addresses it can reach,
	// the new members' included.
	entries := append([]string(nil), addrs...)
	var ops, failures atomic.Int64
	var firstErr atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			at := entries[i%len(entries)]
			key := fmt.Sprintf("k:r%d", i)
			_, err := s.cliAt(ctx, at, "SET", key, "x")
			if err == nil {
				var out string
				out, err = s.cliAt(ctx, at, "GET", fmt.Sprintf("k:%d", i%keys))
				if err == nil && strings.TrimSpace(out) != fmt.Sprintf("v%d", i%keys) {
					err = fmt.Errorf("GET k:%d through %s = %q", i%keys, at, strings.TrimSpace(out))
				}
			}
			ops.Add(1)
			if err != nil {
				failures.Add(1)
				firstErr.CompareAndSwap(nil, err.Error())
			}
		}
	}()
	s.step(ctx, "reshard to 4x1", 5*time.Minute, vkWant{4, 1, vkImageOld, valkeyv1.ReasonRebalancingSlots}, s.patch(`{"spec":{"shards":4}}`),
		valkeyv1.EventSlotsRebalancing, valkeyv1.EventClusterReady)
	close(stop)
	wg.Wait()
	t.Logf("during the reshard: %d outside SET+GET rounds, %d failed (first: %v)", ops.Load(), failures.Load(), firstErr.Load())
	if ops.Load() < 10 {
		t.Errorf("only %d outside rounds ran during the reshard", ops.Load())
	}
	if failures.Load() > 0 {
		t.Errorf("%d of %d outside rounds failed during the reshard (first: %v)", failures.Load(), ops.Load(), firstErr.Load())
	}

	addrs = s.announced(ctx, "4x1", 8)
	s.checkOutside(ctx, "4x1", addrs, keys, 4)
	t.Logf("external access: %s in all", since(s.begin))
}

// cliAt runs the cli in cluster mode against host:6379 as the scenario's user.
func (s *vkScenario) cliAt(ctx context.Context, host string, args ...string) (string, error) {
	return s.cli(ctx, host, args...)
}

// announced waits until want members announce their Service's load-balancer address
// (ExternalAddressAnnounced=True) and returns those addresses, checking each is the
// Service's and none a pod IP.
func (s *vkScenario) announced(ctx context.Context, step string, want int) []string {
	t := s.t
	var addrs []string
	err := poll(ctx, t, step+": every member announces its load-balancer address", 3*time.Minute, func(ctx context.Context) (bool, error) {
		nodes, err := s.nodes(ctx)
		if err != nil {
			return transient(err)
		}
		addrs = addrs[:0]
		for _, n := range nodes {
			c := findCondition(n.Status.Conditions, valkeyv1.NodeConditionExternalAddressAnnounced)
			if c == nil || c.Status != metav1.ConditionTrue {
				return false, nil
			}
			svc, err := env.client.CoreV1().Services(s.ns).Get(ctx, n.Name+"-external", metav1.GetOptions{})
			if err != nil {
				return transient(err)
			}
			if len(svc.Status.LoadBalancer.Ingress) == 0 {
				return false, nil
			}
			lb := svc.Status.LoadBalancer.Ingress[0].IP
			if n.Status.ExternalAddress != lb+":6379" {
				return false, fmt.Errorf("%s announces %q, its Service has %s", n.Name, n.Status.ExternalAddress, lb)
			}
			if lb == n.Status.PodIP {
				return false, fmt.Errorf("%s: the load-balancer address %s is the pod IP", n.Name, lb)
			}
			addrs = append(addrs, lb)
		}
		return len(addrs) == want, nil
	})
	if err != nil {
		s.diagnose(ctx)
		t.Fatalf("%s: %v", step, err)
	}
	t.Logf("%s: members announce %s", step, strings.Join(addrs, " "))
	return append([]string(nil), addrs...)
}

// checkOutside reads every key through each announced address (following MOVED), and
// checks that MOVED and CLUSTER SLOTS, asked through a load balancer, name announced
// addresses only, over shards shards.
func (s *vkScenario) checkOutside(ctx context.Context, step string, addrs []string, keys, shards int) {
	t := s.t
	known := map[string]bool{}
	for _, a := range addrs {
		known[a] = true
	}
	for i := range keys {
		at := addrs[i%len(addrs)]
		out, err := s.cliAt(ctx, at, "GET", fmt.Sprintf("k:%d", i))
		if err != nil || strings.TrimSpace(out) != fmt.Sprintf("v%d", i) {
			t.Fatalf("%s: GET k:%d through %s = %q (%v)", step, i, at, strings.TrimSpace(out), err)
		}
	}
	// CLUSTER SLOTS through a load balancer: each range's hosts are announced addresses.
	out, err := s.cliAt(ctx, addrs[0], "CLUSTER", "SLOTS")
	if err != nil {
		t.Fatalf("%s: CLUSTER SLOTS: %v", step, err)
	}
	hosts := map[string]bool{}
	for _, f := range strings.Fields(out) {
		if strings.Count(f, ".") == 3 {
			hosts[f] = true
		}
	}
	primaries := 0
	for h := range hosts {
		if !known[h] {
			// CLUSTER SLOTS also lists the IP in each endpoint's metadata; only the
			// first element (the endpoint) matters to clients, so pod IPs may appear
			// there, never instead of an announced address.
			continue
		}
		primaries++
	}
	if primaries < shards {
		t.Errorf("%s: CLUSTER SLOTS through %s names %d announced addresses, want at least %d:\n%s", step, addrs[0], primaries, shards, out)
	}
	// Without -c the cli shows the redirect itself: it must name an announced address.
	moved := 0
	for i := range 64 {
		o, _ := redisCLINoCluster(ctx, addrs[0], s.user, s.password, "GET", fmt.Sprintf("k:%d", i))
		line := strings.TrimSpace(o)
		if !strings.HasPrefix(line, "MOVED") {
			continue
		}
		f := strings.Fields(line)
		host, _, _ := strings.Cut(f[len(f)-1], ":")
		if !known[host] {
			t.Fatalf("%s: %s sent the client to %q, not an announced address (%v)", step, addrs[0], line, addrs)
		}
		moved++
	}
	if moved == 0 {
		t.Errorf("%s: no key of 64 was redirected from %s: the test proves nothing about MOVED", step, addrs[0])
	}
	t.Logf("%s: %d keys read through the load balancers; %d MOVED replies named announced addresses", step, keys, moved)
}

// redisCLINoCluster is redisCLI without -c: redirects come back as replies.
func redisCLINoCluster(ctx context.Context, ip, user, password string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	flags := []string{"-h", ip, "-p", "6379", "--user", user, "--pass", password, "--no-auth-warning"}
	out, err := exec.CommandContext(ctx, vkCLI, append(flags, args...)...).CombinedOutput()
	return string(out), err
}
