package e2e

import (
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/tools/internal/bolt"
	"github.com/opsuite/suite/tools/internal/bolt/boltclient"
)

const (
	mgxNamespace = "e2e-memgraph-external"
	mgxName      = "mgx"
)

// TestMemgraphExternalAccess is issue 23 items 6 and 5 on the local cluster. A 3+2 cluster
// with externalAccessConfig LoadBalancer for both roles gets a LoadBalancer Service per
// member and mgx-external for the coordinators' routing, each given a loopback address of
// the load-balancer pool, and every member is registered with its Service's address as
// bolt_server. From the host, which plays the client outside Kubernetes and dials only
// load-balancer addresses, the neo4j Go driver with neo4j://<mgx-external>:7687 gets a
// routing table whose writer is the MAIN's load-balancer address, and writes there.
//
// A writer through that routing keeps writing, one node per acknowledged auto-commit
// query, while the MAIN's pod is deleted (the coordinators fail over), the MAIN is
// handed to the other instance by hand (DEMOTE, SET INSTANCE TO MAIN), and the cluster
// rolls to a new image; then every acknowledged write is read back from the MAIN and
// counted on each data instance. The figures are logged.
func TestMemgraphExternalAccess(t *testing.T) {
	needRunner(t, "the load balancer forwards to Memgraph pods that run as processes")
	ctx := mgScenario(t)
	x := newMgxScenario(ctx, t)

	lbs := x.advertised(ctx, "created", 5)
	route := x.routingTable(ctx, "created", lbs)
	w := startMgxWriter(ctx, t, "neo4j://"+lbs[mgxName+"-external"])
	t.Cleanup(w.stop)
	w.waitAcked(ctx, "the writer starts", 20)
	if a := w.lastServer(); a != route.Writers[0] {
		t.Errorf("the driver wrote through %s, the routing table's writer is %s", a, route.Writers[0])
	}

	// 1. The MAIN's pod deleted, with every node cordoned so that it stays away longer
	// than the coordinators' down timeout (a pod back within it keeps MAIN, no failover):
	// they promote the replica; the pod comes back as a replica, Ready only once they have
	// given it that role.
	main := x.ready(ctx, "before the MAIN's pod is deleted")
	pod := strings.ReplaceAll(main, "_", "-")
	begin := time.Now()
	uncordon := mgCordonAll(ctx, t)
	if err := env.client.CoreV1().Pods(mgxNamespace).Delete(ctx, pod, metav1.DeleteOptions{}); err != nil {
		uncordon()
		t.Fatal(err)
	}
	w.markNow("MAIN's pod deleted")
	x.waitWriter(ctx, "failover after the MAIN's pod was deleted", lbs, func(m string) bool { return m != "" && m != main })
	t.Logf("MAIN's pod deleted: the coordinators promoted another instance after %s", since(begin))
	uncordon()
	x.ready(ctx, "after the MAIN's pod came back")
	t.Logf("MAIN's pod deleted: Ready again after %s", since(begin))
	lbs = x.advertised(ctx, "after the failover", 5)
	w.waitAcked(ctx, "writes after the failover", w.acked()+20)

	// 2. A failover by hand: DEMOTE the MAIN, SET the other instance TO MAIN.
	main = x.ready(ctx, "before the handover")
	other := mgxName + "_data_0"
	if main == other {
		other = mgxName + "_data_1"
	}
	begin = time.Now()
	w.markNow("handover " + main + " -> " + other)
	x.handOver(ctx, lbs, main, other)
	x.waitWriter(ctx, "handover", lbs, func(m string) bool { return m == other })
	x.ready(ctx, "after the handover")
	t.Logf("handover by hand: Ready again after %s", since(begin))
	w.waitAcked(ctx, "writes after the handover", w.acked()+20)

	// 3. A roll to a new image, every pod restarted one at a time, MAIN moved first.
	begin = time.Now()
	w.markNow("roll")
	patch := `{"spec":{"image":{"tag":"3.12.1"},"probes":{"coordinators":` + mgFastProbes + `,"data":` + mgFastProbes + `}}}`
	if _, err := env.dyn.Resource(mgcGVR).Namespace(mgxNamespace).Patch(ctx, mgxName, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	x.rolled(ctx, "3.12.1")
	t.Logf("roll: Updated and Ready after %s", since(begin))
	lbs = x.advertised(ctx, "after the roll", 5)
	x.routingTable(ctx, "after the roll", lbs)
	w.waitAcked(ctx, "writes after the roll", w.acked()+20)
	w.stop()

	acked, attempts, failures, gaps := w.figures()
	t.Logf("writer through neo4j://%s: %d writes acknowledged of %d attempts, %d failed (first: %s)",
		lbs[mgxName+"-external"], len(acked), attempts, failures, w.firstError())
	for _, g := range gaps {
		t.Logf("  %s", g)
	}
	x.readBack(ctx, lbs, acked)
}

// mgxScenario is the cluster of TestMemgraphExternalAccess.
type mgxScenario struct {
	t *testing.T
}

func newMgxScenario(ctx context.Context, t *testing.T) *mgxScenario {
	t.Helper()
	x := &mgxScenario{t: t}
	manifest := mgExternalManifest(mgxNamespace, mgxName, "")
	t.Cleanup(func() {
		_ = env.client.CoreV1().Namespaces().Delete(context.Background(), mgxNamespace, metav1.DeleteOptions{})
	})
	begin := time.Now()
	if out, err := kubectlStdin(ctx, manifest, "apply", "-f", "-"); err != nil {
		t.Fatalf("applying the cluster: %v\n%s", err, out)
	}
	x.ready(ctx, "created")
	t.Logf("3+2 with external access Ready after %s", since(begin))
	return x
}

func (x *mgxScenario) cluster(ctx context.Context) (*memgraphv1.MemgraphCluster, error) {
	u, err := env.dyn.Resource(mgcGVR).Namespace(mgxNamespace).Get(ctx, mgxName, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	c := &memgraphv1.MemgraphCluster{}
	return c, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, c)
}

// ready waits until the cluster is Ready and Converged at its generation with every pod
// ready, and returns its MAIN.
func (x *mgxScenario) ready(ctx context.Context, step string) string {
	x.t.Helper()
	var c *memgraphv1.MemgraphCluster
	err := poll(ctx, x.t, step+": "+mgxName+" Ready", 6*time.Minute, func(ctx context.Context) (bool, error) {
		got, err := x.cluster(ctx)
		if err != nil {
			return transient(err)
		}
		c = got
		conv := meta.FindStatusCondition(got.Status.Conditions, memgraphv1.ConditionConverged)
		return got.Status.State == memgraphv1.StateReady && conv != nil && conv.Status == metav1.ConditionTrue &&
			conv.ObservedGeneration == got.Generation && got.Status.ReadyDataInstances == 2 && got.Status.ReadyCoordinators == 3, nil
	})
	if err != nil {
		x.diagnose(ctx)
		x.t.Fatalf("%v: %s", err, mgDescribe(c))
	}
	return c.Status.Main
}

// waitWriter waits until the routing table mgx-external answers with names as writer a
// data instance (by its load-balancer address) that satisfies ok: what a neo4j:// client
// is told, which status.main may show later (the operator reads the leader only on a
// complete cluster).
func (x *mgxScenario) waitWriter(ctx context.Context, step string, lbs map[string]string, ok func(string) bool) {
	x.t.Helper()
	byAddr := map[string]string{}
	for svc, a := range lbs {
		if inst, found := strings.CutSuffix(svc, "-external"); found && strings.HasPrefix(inst, mgxName+"-data-") {
			byAddr[a] = strings.ReplaceAll(inst, "-", "_")
		}
	}
	var last string
	err := poll(ctx, x.t, step, 3*time.Minute, func(ctx context.Context) (bool, error) {
		rt, err := routeVia(ctx, lbs[mgxName+"-external"])
		if err != nil {
			last = err.Error()
			return false, nil //nolint:nilerr // retried; the last error is reported
		}
		last = fmt.Sprintf("writers %v", rt.Writers)
		return len(rt.Writers) == 1 && ok(byAddr[rt.Writers[0]]), nil
	})
	if err != nil {
		x.diagnose(ctx)
		x.t.Fatalf("%s: %v (last: %s)", step, err, last)
	}
}

// rolled waits until every pod runs the tag and the cluster is Updated and Ready.
func (x *mgxScenario) rolled(ctx context.Context, tag string) {
	x.t.Helper()
	err := poll(ctx, x.t, "roll to "+tag, 12*time.Minute, func(ctx context.Context) (bool, error) {
		pods, err := env.client.CoreV1().Pods(mgxNamespace).List(ctx, metav1.ListOptions{LabelSelector: "memgraph.com/cluster=" + mgxName})
		if err != nil {
			return transient(err)
		}
		for _, p := range pods.Items {
			if !strings.HasSuffix(p.Spec.Containers[0].Image, ":"+tag) || !podReady(&p) {
				return false, nil
			}
		}
		c, err := x.cluster(ctx)
		if err != nil {
			return transient(err)
		}
		up := meta.FindStatusCondition(c.Status.Conditions, memgraphv1.ConditionUpdated)
		return len(pods.Items) == 5 && up != nil && up.Status == metav1.ConditionTrue && up.ObservedGeneration == c.Generation &&
			c.Status.State == memgraphv1.StateReady, nil
	})
	if err != nil {
		x.diagnose(ctx)
		x.t.Fatalf("roll: %v", err)
	}
}

// advertised waits until every member's Service has a load-balancer address and the
// leader's SHOW INSTANCES, asked through mgx-external from outside, shows each member
// registered with that address as bolt_server (never a pod IP). It returns the addresses
// (host:7687) by Service name.
func (x *mgxScenario) advertised(ctx context.Context, step string, members int) map[string]string {
	x.t.Helper()
	lbs := map[string]string{}
	var last string
	err := poll(ctx, x.t, step+": every member registered at its load-balancer address", 3*time.Minute, func(ctx context.Context) (bool, error) {
		svcs, err := env.client.CoreV1().Services(mgxNamespace).List(ctx, metav1.ListOptions{LabelSelector: "memgraph.com/cluster=" + mgxName})
		if err != nil {
			return transient(err)
		}
		clear(lbs)
		for _, s := range svcs.Items {
			if !strings.HasSuffix(s.Name, "-external") {
				continue
			}
			if len(s.Status.LoadBalancer.Ingress) == 0 {
				last = s.Name + " has no load-balancer address"
				return false, nil
			}
			lbs[s.Name] = net.JoinHostPort(s.Status.LoadBalancer.Ingress[0].IP, "7687")
		}
		if len(lbs) != members+1 {
			last = fmt.Sprintf("%d external Services, want %d", len(lbs), members+1)
			return false, nil
		}
		rows, err := x.showInstances(ctx, lbs[mgxName+"-external"])
		if err != nil {
			last = err.Error()
			return false, nil //nolint:nilerr // retried; the last error is reported
		}
		for name, bolt := range rows {
			svc := strings.ReplaceAll(name, "_", "-") + "-external"
			if id, ok := strings.CutPrefix(name, "coordinator_"); ok {
				svc = mgxName + "-coordinator-" + id + "-external"
			}
			if lbs[svc] != bolt {
				last = fmt.Sprintf("%s is registered at %s, its Service %s has %s", name, bolt, svc, lbs[svc])
				return false, nil
			}
		}
		return len(rows) == members, nil
	})
	if err != nil {
		x.diagnose(ctx)
		x.t.Fatalf("%s: %v (last: %s)", step, err, last)
	}
	x.t.Logf("%s: members registered at %v", step, lbs)
	return maps.Clone(lbs)
}

// showInstances asks a coordinator, at addr, for SHOW INSTANCES: bolt_server by name.
func (x *mgxScenario) showInstances(ctx context.Context, addr string) (map[string]string, error) {
	ctx, cancel := context.WithTimeout(ctx, mgCall)
	defer cancel()
	res, err := boltclient.Query(ctx, addr, boltclient.Options{Timeout: mgCall}, "SHOW INSTANCES")
	if err != nil {
		return nil, fmt.Errorf("SHOW INSTANCES through %s: %w", addr, err)
	}
	name, bolt := res.Column("name"), res.Column("bolt_server")
	if name < 0 || bolt < 0 {
		return nil, fmt.Errorf("SHOW INSTANCES fields %v", res.Fields)
	}
	out := map[string]string{}
	for _, r := range res.Records {
		n, _ := r[name].(string)
		b, _ := r[bolt].(string)
		out[n] = b
	}
	return out, nil
}

// routingTable asks mgx-external for a routing table (the ROUTE message a neo4j:// driver
// sends) and checks it names load-balancer addresses only: the MAIN's as writer, the
// replica's as reader, the coordinators' as routers.
func (x *mgxScenario) routingTable(ctx context.Context, step string, lbs map[string]string) bolt.RoutingTable {
	x.t.Helper()
	known := map[string]bool{}
	for _, a := range lbs {
		known[a] = true
	}
	var rt bolt.RoutingTable
	var last string
	err := poll(ctx, x.t, step+": the routing table names load-balancer addresses", time.Minute, func(ctx context.Context) (bool, error) {
		got, err := routeVia(ctx, lbs[mgxName+"-external"])
		if err != nil {
			last = err.Error()
			return false, nil //nolint:nilerr // retried; the last error is reported
		}
		rt = *got
		last = fmt.Sprintf("%+v", got)
		all := slices.Concat(got.Routers, got.Writers, got.Readers)
		for _, a := range all {
			if !known[a] {
				return false, nil
			}
		}
		return len(got.Writers) == 1 && len(got.Readers) == 1 && len(got.Routers) == 3, nil
	})
	if err != nil {
		x.t.Fatalf("%s: %v (last: %s)", step, err, last)
	}
	c, err := x.cluster(ctx)
	if err != nil {
		x.t.Fatal(err)
	}
	if want := lbs[strings.ReplaceAll(c.Status.Main, "_", "-")+"-external"]; rt.Writers[0] != want {
		x.t.Errorf("%s: the routing table's writer is %s, the MAIN %s's load balancer is %s", step, rt.Writers[0], c.Status.Main, want)
	}
	x.t.Logf("%s: routing table from %s: writer %v, readers %v, routers %v", step, lbs[mgxName+"-external"], rt.Writers, rt.Readers, rt.Routers)
	return rt
}

// handOver moves the MAIN from main to other on a coordinator (any forwards to the
// leader), reached through its load balancer.
func (x *mgxScenario) handOver(ctx context.Context, lbs map[string]string, main, other string) {
	x.t.Helper()
	at := lbs[mgxName+"-coordinator-1-external"]
	err := poll(ctx, x.t, "DEMOTE "+main+", SET "+other+" TO MAIN", time.Minute, func(ctx context.Context) (bool, error) {
		for _, q := range []string{"DEMOTE INSTANCE " + main, "SET INSTANCE " + other + " TO MAIN"} {
			cctx, cancel := context.WithTimeout(ctx, mgCall)
			_, err := boltclient.Query(cctx, at, boltclient.Options{Timeout: mgCall}, q)
			cancel()
			if err != nil && !strings.Contains(err.Error(), "already a replica") {
				x.t.Logf("%s: %v", q, err)
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		x.diagnose(ctx)
		x.t.Fatal(err)
	}
}

// readBack reads the writer's nodes from the MAIN and counts them on every data instance,
// each reached through its load balancer: every acknowledged write must be there.
func (x *mgxScenario) readBack(ctx context.Context, lbs map[string]string, acked []int64) {
	x.t.Helper()
	main := x.ready(ctx, "before the read-back")
	for _, inst := range []string{mgxName + "_data_0", mgxName + "_data_1"} {
		addr := lbs[strings.ReplaceAll(inst, "_", "-")+"-external"]
		var have map[int64]bool
		last := ""
		err := poll(ctx, x.t, "read back on "+inst, time.Minute, func(ctx context.Context) (bool, error) {
			cctx, cancel := context.WithTimeout(ctx, 3*mgCall)
			defer cancel()
			res, err := boltclient.Query(cctx, addr, boltclient.Options{Timeout: 3 * mgCall}, "MATCH (n:E2EExternal) RETURN n")
			if err != nil {
				last = err.Error()
				return false, nil
			}
			have = map[int64]bool{}
			for _, r := range res.Records {
				if n, ok := r[0].(bolt.Node); ok {
					if i, ok := n.Props["i"].(int64); ok {
						have[i] = true
					}
				}
			}
			for _, i := range acked {
				if !have[i] {
					return false, nil // a replica may still be catching up
				}
			}
			return true, nil
		})
		var missing []int64
		for _, i := range acked {
			if !have[i] {
				missing = append(missing, i)
			}
		}
		role := "replica"
		if inst == main {
			role = "MAIN"
		}
		x.t.Logf("read back on %s (%s, through %s): %d nodes, %d of %d acknowledged writes missing", inst, role, addr, len(have), len(missing), len(acked))
		if err != nil || len(missing) > 0 {
			x.t.Errorf("%s lost %d acknowledged writes (first: %v; last error: %s)", inst, len(missing), missing[:min(len(missing), 10)], last)
		}
	}
}

func (x *mgxScenario) diagnose(ctx context.Context) {
	if out, err := kubectl(ctx, "get", "mgc,sts,pods,svc", "-n", mgxNamespace, "-o", "wide"); err == nil {
		x.t.Logf("%s", out)
	}
	if out, err := kubectl(ctx, "get", "events", "-n", mgxNamespace, "--sort-by=.lastTimestamp"); err == nil {
		lines := strings.Split(strings.TrimSpace(out), "\n")
		x.t.Logf("%s", strings.Join(lines[max(0, len(lines)-30):], "\n"))
	}
}

// mgExternalManifest is a namespace, a license Secret and a 3+2 MemgraphCluster in it with
// every member behind a load balancer and fast probes; extra adds lines to its spec.
func mgExternalManifest(ns, name, extra string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: %[1]s
---
apiVersion: v1
kind: Secret
metadata:
  name: %[2]s-license
  namespace: %[1]s
stringData:
  MEMGRAPH_ENTERPRISE_LICENSE: e2e-license
  MEMGRAPH_ORGANIZATION_NAME: e2e-organization
---
apiVersion: memgraph.com/v1alpha1
kind: MemgraphCluster
metadata:
  name: %[2]s
  namespace: %[1]s
spec:
  coordinators: 3
  dataInstances: 2
  secrets: {name: %[2]s-license}
  externalAccessConfig:
    coordinator: {serviceType: LoadBalancer}
    dataInstance: {serviceType: LoadBalancer}
  probes:
    coordinators: %[3]s
    data: %[3]s
%[4]s`, ns, name, mgFastProbes, extra)
}

// routeVia asks the coordinators' routing at addr for a routing table, as a neo4j://
// driver does first.
func routeVia(ctx context.Context, addr string) (*bolt.RoutingTable, error) {
	ctx, cancel := context.WithTimeout(ctx, mgCall)
	defer cancel()
	cl, err := boltclient.Dial(ctx, addr, boltclient.Options{Timeout: mgCall})
	if err != nil {
		return nil, err
	}
	defer func() { _ = cl.Close() }()
	return cl.Route(ctx)
}
