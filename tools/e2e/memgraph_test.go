package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/tools/internal/bolt"
	"github.com/opsuite/suite/tools/internal/bolt/boltclient"
)

var (
	mgcGVR = schema.GroupVersionResource{Group: "memgraph.com", Version: "v1alpha1", Resource: "memgraphclusters"}
	mgbGVR = schema.GroupVersionResource{Group: "memgraph.com", Version: "v1alpha1", Resource: "memgraphbackups"}
)

// The sample's cluster, as deploy/samples/memgraph.yaml names it.
const (
	mgNamespace = "default"
	mgName      = "memgraph-demo"
)

// TestMemgraphSample applies deploy/samples/memgraph.yaml verbatim (3 coordinators, 2
// data instances, the license Secret, Bolt auth from the Secret spec.auth names) and waits
// until the operator reports it Ready with exactly one MAIN among the data instances and
// one Raft leader among the coordinators, every member registered, and a steady cluster
// that the operator no longer writes to. Every Bolt check logs in with the sample's admin
// user; the data instances refuse a client without it.
func TestMemgraphSample(t *testing.T) {
	ctx := mgScenario(t)
	sample := filepath.Join(env.root, "deploy", "samples", "memgraph.yaml")
	begin := time.Now()
	out, err := kubectl(ctx, "apply", "-f", sample)
	t.Logf("%s", strings.TrimSpace(out))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if out, err := kubectl(context.Background(), "delete", "-f", sample, "--wait=false"); err != nil {
			t.Logf("deleting the sample: %v\n%s", err, out)
		}
	})

	var c *memgraphv1.MemgraphCluster
	var states []string
	err = poll(ctx, t, "MemgraphCluster "+mgName+" Ready", 6*time.Minute, func(ctx context.Context) (bool, error) {
		got, err := mgCluster(ctx)
		if err != nil {
			return transient(err)
		}
		c = got
		line := mgDescribe(got)
		if len(states) == 0 || states[len(states)-1] != line {
			states = append(states, line)
		}
		ready := meta.FindStatusCondition(got.Status.Conditions, memgraphv1.ConditionReady)
		converged := meta.FindStatusCondition(got.Status.Conditions, memgraphv1.ConditionConverged)
		return got.Status.State == memgraphv1.StateReady && ready != nil && ready.ObservedGeneration == got.Generation &&
			converged != nil && converged.Status == metav1.ConditionTrue, nil
	})
	t.Logf("states seen: %s", strings.Join(states, " -> "))
	if err != nil {
		mgDiagnose(ctx, t)
		t.Fatalf("the sample did not become Ready: %v", err)
	}
	ready := time.Now()
	t.Logf("time to Ready for 3+2: %s", since(begin))
	wantObjectMetrics(ctx, t, "memgraph-operator", mgNamespace, mgName, "memgraph_operator_cluster_state", "memgraph_operator_registrations_total")

	// One MAIN (a data instance of the sample), one leader (a coordinator), all registered.
	if !regexp.MustCompile(`^memgraph_demo_data_[01]$`).MatchString(c.Status.Main) {
		t.Errorf("status.main %q, want one of memgraph_demo_data_0, memgraph_demo_data_1", c.Status.Main)
	}
	if !regexp.MustCompile(`^coordinator_[123]$`).MatchString(c.Status.Leader) {
		t.Errorf("status.leader %q, want one of coordinator_1..3", c.Status.Leader)
	}
	if c.Status.Coordinators != 3 || c.Status.DataInstances != 2 {
		t.Errorf("registered %d coordinators and %d data instances, want 3 and 2", c.Status.Coordinators, c.Status.DataInstances)
	}
	// The nodes are the host: the node agent (not allowed to raise sysctls here) reports
	// the host's vm.max_map_count against Memgraph's 262144.
	if raw, err := os.ReadFile("/proc/sys/vm/max_map_count"); err == nil {
		host, _ := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
		want := metav1.ConditionFalse
		if host >= 262144 {
			want = metav1.ConditionTrue
		}
		// The members spread over several nodes (one per host where there are nodes
		// enough), and an agent still starting when the cluster came up leaves its node
		// Unknown (NodeAgentUnavailable) until the operator asks again: SysctlRetry (1 min)
		// plus up to one resync (30 s).
		var got *metav1.Condition
		_ = poll(ctx, t, "NodesPrepared="+string(want), 150*time.Second, func(ctx context.Context) (bool, error) {
			cur, err := mgCluster(ctx)
			if err != nil {
				return transient(err)
			}
			got = meta.FindStatusCondition(cur.Status.Conditions, memgraphv1.ConditionNodesPrepared)
			return got != nil && got.Status == want, nil
		})
		if got == nil || got.Status != want {
			t.Errorf("NodesPrepared %+v, want %s with the host's vm.max_map_count at %d", got, want, host)
		} else {
			t.Logf("NodesPrepared=%s %s: %s", got.Status, got.Reason, got.Message)
		}
	}
	if out, err := kubectl(ctx, "wait", "--for=condition=Ready", "mgc/"+mgName, "-n", mgNamespace, "--timeout=30s"); err != nil {
		t.Errorf("kubectl wait --for=condition=Ready: %v\n%s", err, out)
	}
	pods, err := env.client.CoreV1().Pods(mgNamespace).List(ctx, metav1.ListOptions{LabelSelector: "memgraph.com/cluster=" + mgName})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range pods.Items {
		if podReady(&p) {
			names = append(names, p.Name)
		}
	}
	if want := "memgraph-demo-coordinator-1 memgraph-demo-coordinator-2 memgraph-demo-coordinator-3 memgraph-demo-data-0 memgraph-demo-data-1"; strings.Join(names, " ") != want {
		t.Errorf("ready pods %v, want %s", names, want)
	}

	// Bolt auth: the operator registered the members with the sample's admin user (it is
	// Ready); every data instance refuses a client without it or with a wrong password.
	mgAuth = mgCredentials(ctx, t, c)
	mgCheckAuth(ctx, t)

	// The data plane as the coordinators and the data instances themselves report it.
	plane := &mgPlane{}
	plane.check(ctx, t, "sample Ready", 3, 2)
	plane.write(ctx, t, "steady")

	// Steady: resyncs keep re-reading SHOW INSTANCES, and write nothing anywhere.
	rv := c.ResourceVersion
	stsRV := map[string]string{}
	for _, n := range []string{"memgraph-demo-coordinator", "memgraph-demo-data"} {
		s, err := env.client.AppsV1().StatefulSets(mgNamespace).Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		stsRV[n] = s.ResourceVersion
	}
	// Longer than the operator's 30 s resync since Ready: at least one resync pass ran.
	if d := 35*time.Second - time.Since(ready); d > 0 {
		time.Sleep(d)
	}
	if got, err := mgCluster(ctx); err != nil || got.ResourceVersion != rv {
		t.Errorf("the MemgraphCluster changed while steady (err %v): %s", err, mgDescribe(got))
	}
	for n, v := range stsRV {
		if s, err := env.client.AppsV1().StatefulSets(mgNamespace).Get(ctx, n, metav1.GetOptions{}); err != nil || s.ResourceVersion != v {
			t.Errorf("StatefulSet %s changed while steady (err %v)", n, err)
		}
	}
	evs, err := env.client.EventsV1().Events(mgNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var ran []string
	for _, e := range evs.Items {
		if e.Regarding.Kind == "MemgraphCluster" && e.Regarding.Name == mgName && strings.HasPrefix(e.Note, "Ran ") {
			ran = append(ran, fmt.Sprintf("%s %s: %s", e.CreationTimestamp.Format(time.TimeOnly), e.Reason, e.Note))
		}
	}
	t.Logf("registration events:\n  %s", strings.Join(ran, "\n  "))
	if len(ran) == 0 {
		t.Error("no registration command was reported in events")
	}
	for _, args := range [][]string{
		{"get", "mgc", mgName, "-n", mgNamespace, "-o", "wide"},
		{"get", "mgc", mgName, "-n", mgNamespace, "-o", `jsonpath={range .status.conditions[*]}{.type}={.status} {.reason}{"\n"}{end}`},
	} {
		out, err := kubectl(ctx, args...)
		if err != nil {
			t.Errorf("kubectl %v: %v", args, err)
		}
		t.Logf("kubectl %s:\n%s", strings.Join(args, " "), out)
	}
	plane.check(ctx, t, "steady", 3, 2)

	// A new image rolls every pod, one at a time, MAIN and leadership moved off first. The
	// same change shortens the probes (the defaults wait 5 s between readiness probes of
	// each new pod, and 10 s between startup probes on a real kubelet), so this roll and
	// every later step run with fast ones.
	before := map[string]string{}
	list, err := env.client.CoreV1().Pods(mgNamespace).List(ctx, metav1.ListOptions{LabelSelector: "memgraph.com/cluster=" + mgName})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range list.Items {
		before[p.Name] = string(p.UID)
	}
	plane.write(ctx, t, "roll")
	watch := watchMain(ctx)
	mgScale(ctx, t, "roll the image to 3.12.1 with fast probes", `{"spec":{"image":{"tag":"3.12.1"},"probes":{"coordinators":`+mgFastProbes+`,"data":`+mgFastProbes+`}}}`, 3, 2, 10*time.Minute)
	err = poll(ctx, t, "Updated=True", 10*time.Minute, func(ctx context.Context) (bool, error) {
		c, err := mgCluster(ctx)
		if err != nil {
			return transient(err)
		}
		u := meta.FindStatusCondition(c.Status.Conditions, memgraphv1.ConditionUpdated)
		return c.Status.State == memgraphv1.StateReady && u != nil && u.Status == metav1.ConditionTrue && u.ObservedGeneration == c.Generation, nil
	})
	watch.stop(t, "the roll (one planned handover)")
	if err != nil {
		mgDiagnose(ctx, t)
		t.Fatalf("the roll did not finish: %v", err)
	}
	list, err = env.client.CoreV1().Pods(mgNamespace).List(ctx, metav1.ListOptions{LabelSelector: "memgraph.com/cluster=" + mgName})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range list.Items {
		if before[p.Name] == string(p.UID) {
			t.Errorf("pod %s kept its UID through the roll", p.Name)
		}
		if img := p.Spec.Containers[0].Image; img != "memgraph/memgraph:3.12.1" {
			t.Errorf("pod %s runs %s", p.Name, img)
		}
	}
	c, _ = mgCluster(ctx)
	t.Logf("after the roll: %s", mgDescribe(c))
	mgRollEvents(ctx, t)
	plane.check(ctx, t, "roll", 3, 2)

	// Scale both roles up and back down: the retiring members leave the cluster before
	// their StatefulSet shrinks, and their claims stay (whenScaled: Retain by default).
	// Before each shrink, the member to retire is made the hard case: the MAIN parked on
	// the retiring data instance (the operator must hand it over first), Raft leadership
	// forced onto a retiring coordinator (it must be yielded, never removed).
	for _, s := range []struct {
		name, patch        string
		coordinators, data int32
		before             func()
		// ran is the command the step needs the operator to run; moved checks that the
		// retiring member's role went to a survivor.
		ran   string
		moved func() string
	}{
		{name: "data 2 -> 3", patch: `{"spec":{"dataInstances":3}}`, coordinators: 3, data: 3},
		{name: "data 3 -> 2", patch: `{"spec":{"dataInstances":2}}`, coordinators: 3, data: 2,
			before: func() { mgParkMain(ctx, t, 3, "memgraph_demo_data_2") }, ran: "DEMOTE INSTANCE memgraph_demo_data_2",
			moved: func() string {
				c, err := mgCluster(ctx)
				if err != nil || (c.Status.Main != "memgraph_demo_data_0" && c.Status.Main != "memgraph_demo_data_1") {
					return fmt.Sprintf("the MAIN was not handed over to a surviving data instance: %s (err %v)", mgDescribe(c), err)
				}
				return ""
			}},
		{name: "coordinators 3 -> 5", patch: `{"spec":{"coordinators":5}}`, coordinators: 5, data: 2},
		{name: "coordinators 5 -> 3", patch: `{"spec":{"coordinators":3}}`, coordinators: 3, data: 2,
			before: func() { mgForceLeader(ctx, t, 5, 2, "coordinator_4", "coordinator_5") }, ran: "YIELD LEADERSHIP",
			moved: func() string {
				if leader, _, why := mgLeaderView(ctx, 3); !slices.Contains([]string{"coordinator_1", "coordinator_2", "coordinator_3"}, leader) {
					return fmt.Sprintf("the leader is %q, not a surviving coordinator (%s)", leader, why)
				}
				return ""
			}},
	} {
		if s.before != nil {
			s.before()
		}
		plane.write(ctx, t, s.name)
		begin := time.Now()
		w := watchMain(ctx)
		mgScale(ctx, t, s.name, s.patch, s.coordinators, s.data, 4*time.Minute)
		w.stop(t, s.name)
		plane.check(ctx, t, s.name, int(s.coordinators), int(s.data))
		if s.moved != nil {
			if why := s.moved(); why != "" {
				t.Errorf("%s: %s", s.name, why)
			}
			// Events of one reason fold into a series that keeps its first note, so the
			// command is looked for, not required, among them.
			t.Logf("%s: events naming %s: %q", s.name, s.ran, mgRanSince(ctx, t, begin, s.ran))
		}
	}
	for _, pvc := range []string{"lib-memgraph-demo-data-2", "log-memgraph-demo-data-2", "lib-memgraph-demo-coordinator-5"} {
		if _, err := env.client.CoreV1().PersistentVolumeClaims(mgNamespace).Get(ctx, pvc, metav1.GetOptions{}); err != nil {
			t.Errorf("claim %s of a retired member: %v (whenScaled Retain keeps it)", pvc, err)
		}
	}

	// The MAIN's pod deleted while it cannot come back at once (every node cordoned: the
	// local runner would otherwise restart it within the coordinators' 5 s down timeout, and
	// it would simply resume as MAIN): the coordinators fail over to the replica; the pod,
	// once it may run again, comes back as a replica, and the cluster is Ready again.
	plane.write(ctx, t, "MAIN pod deleted")
	c, err = mgCluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	oldMain := c.Status.Main
	mainPod := strings.ReplaceAll(oldMain, "_", "-")
	victim, err := env.client.CoreV1().Pods(mgNamespace).Get(ctx, mainPod, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the MAIN %s has no pod %s: %v", oldMain, mainPod, err)
	}
	uncordon := mgCordonAll(ctx, t)
	t.Cleanup(uncordon)
	watch = watchMain(ctx)
	deleted := time.Now()
	if err := env.client.CoreV1().Pods(mgNamespace).Delete(ctx, mainPod, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var newMain string
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, false, func(ctx context.Context) (bool, error) {
		_, rows, why := mgLeaderView(ctx, 3)
		if why != "" {
			return false, nil
		}
		for _, r := range rows {
			if r.Role == "main" && r.Name != oldMain && r.Health == "up" {
				newMain = r.Name
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		uncordon()
		watch.stop(t, "the MAIN pod's deletion")
		mgDiagnose(ctx, t)
		t.Fatalf("no failover from %s after its pod was deleted: %v", oldMain, err)
	}
	t.Logf("the coordinators failed over from %s to %s %s after the pod's deletion", oldMain, newMain, since(deleted))
	mgScale(ctx, t, "the deleted MAIN's pod back", "", 3, 2, 4*time.Minute, func(context.Context) error {
		uncordon()
		return nil
	})
	watch.stop(t, "the MAIN pod's deletion (failover by the coordinators)")
	if p, err := env.client.CoreV1().Pods(mgNamespace).Get(ctx, mainPod, metav1.GetOptions{}); err != nil || p.UID == victim.UID {
		t.Errorf("pod %s was not replaced (err %v)", mainPod, err)
	}
	c, _ = mgCluster(ctx)
	t.Logf("after the MAIN's pod went: %s", mgDescribe(c))
	if c == nil || c.Status.Main != newMain {
		t.Errorf("status.main after the failover: %s, want %s", mgDescribe(c), newMain)
	}
	plane.check(ctx, t, "MAIN pod deleted", 3, 2)

	// A registration wiped by hand: a replica unregistered on the leader (no watch event
	// tells the operator); its resync registers it again, and the replica catches up with
	// what the MAIN took while it was out.
	plane.write(ctx, t, "registration wiped")
	leader, rows, why := mgLeaderView(ctx, 3)
	if why != "" {
		t.Fatal(why)
	}
	var main, replica string
	for _, r := range rows {
		switch r.Role {
		case "main":
			main = r.Name
		case "replica":
			replica = r.Name
		}
	}
	wiped := time.Now()
	if _, err := mgRun(ctx, mgPod(leader), "UNREGISTER INSTANCE "+replica); err != nil {
		t.Fatalf("UNREGISTER INSTANCE %s on the leader %s: %v", replica, leader, err)
	}
	t.Logf("unregistered %s on the leader %s", replica, leader)
	plane.writeTo(ctx, t, main, "while "+replica+" was unregistered")
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, false, func(ctx context.Context) (bool, error) {
		_, rows, why := mgLeaderView(ctx, 3)
		return why == "" && slices.ContainsFunc(rows, func(r mgInstance) bool { return r.Name == replica }), nil
	})
	if err != nil {
		mgDiagnose(ctx, t)
		t.Fatalf("%s was not registered again: %v", replica, err)
	}
	t.Logf("the operator registered %s again after %s", replica, since(wiped))
	plane.check(ctx, t, "registration wiped", 3, 2)

	// The operator killed right after a scale-down begins, with the MAIN on the retiring
	// instance (a handover of three commands): its successor finishes the retirement from
	// the live StatefulSet and the data plane.
	plane.write(ctx, t, "data 2 -> 3 again")
	mgScale(ctx, t, "data 2 -> 3 again", `{"spec":{"dataInstances":3}}`, 3, 3, 4*time.Minute)
	plane.check(ctx, t, "data 2 -> 3 again", 3, 3)
	mgParkMain(ctx, t, 3, "memgraph_demo_data_2")
	plane.write(ctx, t, "operator killed mid-retirement")
	mgScale(ctx, t, "data 3 -> 2 with the operator killed", `{"spec":{"dataInstances":2}}`, 3, 2, 4*time.Minute, func(ctx context.Context) error {
		ops, err := env.client.CoreV1().Pods(serviceByName("memgraph-operator").namespace()).List(ctx, metav1.ListOptions{LabelSelector: selector("memgraph-operator")})
		if err != nil {
			return err
		}
		for _, p := range ops.Items {
			t.Logf("deleting operator pod %s", p.Name)
			if err := env.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
				return err
			}
		}
		return nil
	})
	plane.check(ctx, t, "operator killed mid-retirement", 3, 2)
	if c, err := mgCluster(ctx); err != nil || c.Status.Main == "memgraph_demo_data_2" || c.Status.Main == "" {
		t.Errorf("after the retirement with the operator killed: %s (err %v)", mgDescribe(c), err)
	}

	// The same retirement with kube-apiserver and etcd stopped for 20 s as soon as the
	// operator demoted the MAIN: the operator loses its lease and restarts; it finishes
	// the retirement from what the coordinators and the API show.
	plane.write(ctx, t, "data 2 -> 3 before the outage")
	mgScale(ctx, t, "data 2 -> 3 before the outage", `{"spec":{"dataInstances":3}}`, 3, 3, 4*time.Minute)
	plane.check(ctx, t, "data 2 -> 3 before the outage", 3, 3)
	mgParkMain(ctx, t, 3, "memgraph_demo_data_2")
	plane.write(ctx, t, "control plane restarted mid-retirement")
	mgScale(ctx, t, "data 3 -> 2 with the control plane restarted", `{"spec":{"dataInstances":2}}`, 3, 2, 5*time.Minute, func(ctx context.Context) error {
		// Polled fast: the handover takes a moment, and the outage should find the
		// retirement in the middle (the StatefulSet not yet lowered).
		err := pollEvery(ctx, 50*time.Millisecond, 2*time.Minute, func(ctx context.Context) (bool, error) {
			_, rows, _ := mgLeaderView(ctx, 3)
			for _, r := range rows {
				if r.Role == "main" && r.Name != "memgraph_demo_data_2" {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return err
		}
		return controlPlaneOutage(ctx, t, 20*time.Second)
	})
	plane.check(ctx, t, "control plane restarted mid-retirement", 3, 2)
	if c, err := mgCluster(ctx); err != nil || c.Status.Main == "memgraph_demo_data_2" || c.Status.Main == "" {
		t.Errorf("after the retirement with the control plane restarted: %s (err %v)", mgDescribe(c), err)
	}

	// The MAIN cut off from the coordinators, a client writing to it all along.
	mgPartitionMain(ctx, t, plane)
	// The operator cut off from the MAIN, then from every member, a client writing all along.
	mgCutOperatorOff(ctx, t, plane)
}

// mgParkMain makes instance the MAIN, as an administrator could on the leader: DEMOTE
// the MAIN, then SET the instance TO MAIN (retried when the operator or the coordinators
// chose another MAIN in between), and waits until the cluster is Ready with it.
func mgParkMain(ctx context.Context, t *testing.T, coordinators int, instance string) {
	t.Helper()
	begin := time.Now()
	var last string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		leader, rows, why := mgLeaderView(ctx, coordinators)
		if why != "" {
			last = why
			return false, nil
		}
		main := ""
		for _, r := range rows {
			if r.Role == "main" {
				main = r.Name
			}
		}
		if main == instance {
			return true, nil
		}
		// A refusal (the operator or the coordinators moved first) is looked at again.
		var queries []string
		if main != "" {
			queries = append(queries, "DEMOTE INSTANCE "+main)
		}
		for _, q := range append(queries, "SET INSTANCE "+instance+" TO MAIN") {
			if _, err := mgRun(ctx, mgPod(leader), q); err != nil {
				last = q + ": " + err.Error()
				break
			}
		}
		return false, nil
	})
	if err != nil {
		mgDiagnose(ctx, t)
		t.Fatalf("parking the MAIN on %s: %v (last: %s)", instance, err, last)
	}
	t.Logf("the MAIN parked on %s by hand in %s", instance, since(begin))
	// No watch event tells the operator: its next resync (30 s) sees the new MAIN, and
	// leaves it where it is.
	var c *memgraphv1.MemgraphCluster
	err = poll(ctx, t, "status.main "+instance+" and Ready", time.Minute, func(ctx context.Context) (bool, error) {
		var err error
		if c, err = mgCluster(ctx); err != nil {
			return transient(err)
		}
		return c.Status.Main == instance && c.Status.State == memgraphv1.StateReady, nil
	})
	if err != nil {
		mgDiagnose(ctx, t)
		t.Fatalf("%v: %s", err, mgDescribe(c))
	}
}

// mgForceLeader moves Raft leadership onto one of want. A YIELD hands it to a caught-up
// follower the coordinators pick (the simulator: the first in configuration order), so
// leaders in the way are taken down first, their pods deleted with every node cordoned
// (at most two of five, keeping the quorum), then YIELD; the pods come back and the
// cluster is Ready again at coordinators+data before it returns.
func mgForceLeader(ctx context.Context, t *testing.T, coordinators, data int32, want ...string) {
	t.Helper()
	begin := time.Now()
	uncordon := mgCordonAll(ctx, t)
	defer uncordon()
	awaitNewLeader := func(old string) string {
		t.Helper()
		var leader, why string
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			leader, _, why = mgLeaderView(ctx, int(coordinators))
			return why == "" && leader != old, nil
		})
		if err != nil {
			mgDiagnose(ctx, t)
			t.Fatalf("no leader other than %s: %v (%s)", old, err, why)
		}
		return leader
	}
	leader := awaitNewLeader("")
	var steps []string
	deleted := 0
	for attempt := 0; !slices.Contains(want, leader); attempt++ {
		if attempt == 8 {
			t.Fatalf("leadership not moved onto %v: %s", want, strings.Join(steps, "; "))
		}
		if deleted < 2 {
			if err := env.client.CoreV1().Pods(mgNamespace).Delete(ctx, mgPod(leader), metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
				t.Fatal(err)
			}
			deleted++
			steps = append(steps, "deleted the leader "+leader+"'s pod")
		} else {
			if _, err := mgRun(ctx, mgPod(leader), "YIELD LEADERSHIP"); err != nil {
				t.Logf("YIELD LEADERSHIP on %s: %v", leader, err)
			}
			steps = append(steps, "YIELD LEADERSHIP on "+leader)
		}
		leader = awaitNewLeader(leader)
		steps = append(steps, "leader "+leader)
	}
	mgScale(ctx, t, "leadership on "+leader, "", coordinators, data, 4*time.Minute, func(context.Context) error {
		uncordon()
		return nil
	})
	now, _, why := mgLeaderView(ctx, int(coordinators))
	if !slices.Contains(want, now) {
		t.Fatalf("leadership moved from %s to %q once the coordinators were back (%s)", leader, now, why)
	}
	t.Logf("leadership forced onto %s in %s: %s", now, since(begin), strings.Join(steps, "; "))
}

// mgRanSince lists the operator's "Ran ..." events about the sample since begin that name
// command.
func mgRanSince(ctx context.Context, t *testing.T, begin time.Time, command string) []string {
	t.Helper()
	evs, err := env.client.EventsV1().Events(mgNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs.Items {
		at := e.EventTime.Time
		if at.IsZero() {
			at = e.CreationTimestamp.Time
		}
		// Event times have microseconds, creation timestamps only seconds.
		if e.Regarding.Kind == "MemgraphCluster" && e.Regarding.Name == mgName && !at.Before(begin.Add(-time.Second)) &&
			strings.HasPrefix(e.Note, "Ran ") && strings.Contains(e.Note, command) {
			out = append(out, at.Format("15:04:05.000")+" "+e.Note)
		}
	}
	slices.Sort(out)
	return out
}

// mgFastProbes are one role's probes for the e2e: a period of one second (the defaults'
// 5 s readiness period was most of each rolled pod's time).
const mgFastProbes = `{"readiness":{"periodSeconds":1,"timeoutSeconds":1,"failureThreshold":3},` +
	`"liveness":{"periodSeconds":1,"timeoutSeconds":1,"failureThreshold":30},` +
	`"startup":{"periodSeconds":1,"timeoutSeconds":1,"failureThreshold":600}}`

// mgCordonAll marks every node unschedulable and returns what undoes it (idempotent).
func mgCordonAll(ctx context.Context, t *testing.T) func() {
	t.Helper()
	nodes, err := env.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	set := func(ctx context.Context, name string, v bool) error {
		_, err := env.client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, fmt.Appendf(nil, `{"spec":{"unschedulable":%t}}`, v), metav1.PatchOptions{})
		return err
	}
	var cordoned []string
	for _, n := range nodes.Items {
		if n.Spec.Unschedulable {
			continue
		}
		if err := set(ctx, n.Name, true); err != nil {
			t.Fatalf("cordoning %s: %v", n.Name, err)
		}
		cordoned = append(cordoned, n.Name)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			for _, n := range cordoned {
				if err := set(context.Background(), n, false); err != nil {
					t.Errorf("uncordoning %s: %v", n, err)
				}
			}
		})
	}
}

// mgRollEvents logs the roll's pod deletions and handovers with their times.
func mgRollEvents(ctx context.Context, t *testing.T) {
	t.Helper()
	evs, err := env.client.EventsV1().Events(mgNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Logf("events: %v", err)
		return
	}
	var roll []string
	for _, e := range evs.Items {
		if e.Regarding.Kind == "MemgraphCluster" && e.Regarding.Name == mgName && (strings.HasPrefix(e.Note, "Deleted pod") || strings.Contains(e.Note, "DEMOTE") || strings.Contains(e.Note, "YIELD")) {
			at := e.EventTime.Time
			if at.IsZero() {
				at = e.CreationTimestamp.Time
			}
			roll = append(roll, fmt.Sprintf("%s %s", at.Format("15:04:05.000"), e.Note))
		}
	}
	slices.Sort(roll)
	t.Logf("roll events:\n  %s", strings.Join(roll, "\n  "))
}

// mgScale patches the sample (unless patch is empty), runs the extra changes, and waits
// until it is Ready and Converged at the given counts: the registered counts, the
// StatefulSets' replicas and their ready pods all agree.
func mgScale(ctx context.Context, t *testing.T, name, patch string, coordinators, data int32, timeout time.Duration, also ...func(context.Context) error) {
	t.Helper()
	begin := time.Now()
	if patch != "" {
		if out, err := kubectl(ctx, "patch", "mgc", mgName, "-n", mgNamespace, "--type", "merge", "-p", patch); err != nil {
			t.Fatalf("%s: %v\n%s", name, err, out)
		}
	}
	for _, change := range also {
		if err := change(ctx); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	var states []string
	// Polled faster than poll's second: each step's time is logged as a benchmark.
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		c, err := mgCluster(ctx)
		if err != nil {
			return transient(err)
		}
		line := mgDescribe(c) + fmt.Sprintf(" registered %d+%d", c.Status.Coordinators, c.Status.DataInstances)
		if len(states) == 0 || states[len(states)-1] != line {
			states = append(states, line)
		}
		converged := meta.FindStatusCondition(c.Status.Conditions, memgraphv1.ConditionConverged)
		if c.Status.State != memgraphv1.StateReady || converged == nil || converged.Status != metav1.ConditionTrue ||
			converged.ObservedGeneration != c.Generation || c.Status.Coordinators != coordinators || c.Status.DataInstances != data {
			return false, nil
		}
		for sts, want := range map[string]int32{"memgraph-demo-coordinator": coordinators, "memgraph-demo-data": data} {
			s, err := env.client.AppsV1().StatefulSets(mgNamespace).Get(ctx, sts, metav1.GetOptions{})
			if err != nil {
				return transient(err)
			}
			if *s.Spec.Replicas != want || s.Status.ReadyReplicas != want {
				return false, nil
			}
		}
		return true, nil
	})
	t.Logf("%s: states seen: %s", name, strings.Join(states, " -> "))
	if err != nil {
		mgDiagnose(ctx, t)
		t.Fatalf("%s: %v", name, err)
	}
	t.Logf("%s: Ready and Converged after %s", name, since(begin))
}

// mgScenario checks what a Memgraph scenario needs (the process runner, the operator's
// release) and returns its scenarioContext.
func mgScenario(t *testing.T) context.Context {
	t.Helper()
	needRunner(t, "memgraph/memgraph pods run as bin/memgraph-sim processes")
	needInstalled(t, "memgraph-operator")
	return scenarioContext(t)
}

func mgCluster(ctx context.Context) (*memgraphv1.MemgraphCluster, error) {
	return mgClusterNamed(ctx, mgName)
}

// mgClusterNamed reads MemgraphCluster name in mgNamespace.
func mgClusterNamed(ctx context.Context, name string) (*memgraphv1.MemgraphCluster, error) {
	return mgClusterIn(ctx, mgNamespace, name)
}

// mgClusterIn reads MemgraphCluster name in ns.
func mgClusterIn(ctx context.Context, ns, name string) (*memgraphv1.MemgraphCluster, error) {
	u, err := env.dyn.Resource(mgcGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	var c memgraphv1.MemgraphCluster
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &c); err != nil {
		return nil, err
	}
	return &c, nil
}

func mgDescribe(c *memgraphv1.MemgraphCluster) string {
	if c == nil {
		return "<none>"
	}
	s := fmt.Sprintf("%s main=%q leader=%q", c.Status.State, c.Status.Main, c.Status.Leader)
	for _, t := range []string{memgraphv1.ConditionReady, memgraphv1.ConditionConverged} {
		if cond := meta.FindStatusCondition(c.Status.Conditions, t); cond != nil {
			s += fmt.Sprintf(" (%s %s %s)", t, cond.Status, cond.Reason)
		}
	}
	return s
}

// mgDiagnose logs what a failed wait needs: the cluster's conditions, its pods and events,
// and the operator's pods.
func mgDiagnose(ctx context.Context, t *testing.T) {
	t.Helper()
	if out, err := kubectl(ctx, "get", "mgc,sts,pods,pvc", "-n", mgNamespace, "-o", "wide"); err == nil {
		t.Logf("objects:\n%s", out)
	}
	if c, err := mgCluster(ctx); err == nil {
		for _, cond := range c.Status.Conditions {
			t.Logf("condition %s=%s %s: %s", cond.Type, cond.Status, cond.Reason, cond.Message)
		}
	}
	pods, err := env.client.CoreV1().Pods(mgNamespace).List(ctx, metav1.ListOptions{LabelSelector: "memgraph.com/cluster=" + mgName})
	if err == nil {
		for i := range pods.Items {
			p := &pods.Items[i]
			if p.Status.Phase != corev1.PodRunning || !podReady(p) {
				t.Logf("pod %s %s:\n%s", p.Name, p.Status.Phase, podLogTail(p, 20))
			}
		}
	}
	diagnose(ctx, t, serviceByName("memgraph-operator"))
}

// The data plane, checked independently of the operator: over Bolt, straight to the pods
// (their addresses are reachable from the suite on the local cluster).

const (
	mgBoltPort = "7687"
	// mgCall bounds one Bolt call of the checks.
	mgCall = 5 * time.Second
)

// mgPodBolt is a pod's Bolt address ("" while it has no address or is going).
func mgPodBolt(ctx context.Context, pod string) (string, error) {
	p, err := env.client.CoreV1().Pods(mgNamespace).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	if p.Status.PodIP == "" || p.DeletionTimestamp != nil {
		return "", fmt.Errorf("pod %s has no address", pod)
	}
	if !direct(p) {
		return "", fmt.Errorf("pod %s (%s) is not reachable from the suite", pod, p.Status.PodIP)
	}
	return net.JoinHostPort(p.Status.PodIP, mgBoltPort), nil
}

// mgAuth is the admin user every Bolt client of the checks logs in with: the sample's,
// read from the Secret its spec.auth names (mgCredentials).
var mgAuth boltclient.Options

// mgRun runs one query on a pod over Bolt, logged in as mgAuth.
func mgRun(ctx context.Context, pod, query string) (*boltclient.Result, error) {
	addr, err := mgPodBolt(ctx, pod)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, mgCall)
	defer cancel()
	return boltclient.Query(ctx, addr, mgLogin(mgCall), query)
}

// mgLogin is mgAuth with a call timeout.
func mgLogin(timeout time.Duration) boltclient.Options {
	o := mgAuth
	o.Timeout = timeout
	return o
}

// mgCredentials reads the admin user of the Secret the cluster's spec.auth names (the
// keys default as the API does).
func mgCredentials(ctx context.Context, t *testing.T, c *memgraphv1.MemgraphCluster) boltclient.Options {
	t.Helper()
	a := c.Spec.Auth
	if a == nil {
		t.Fatal("the sample runs without Bolt auth (spec.auth): a production HA cluster should not accept anonymous clients")
	}
	userKey, passKey := a.UserKey, a.PasswordKey
	if userKey == "" {
		userKey = memgraphv1.DefaultAuthUserKey
	}
	if passKey == "" {
		passKey = memgraphv1.DefaultAuthPasswordKey
	}
	s, err := env.client.CoreV1().Secrets(mgNamespace).Get(ctx, a.SecretName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("spec.auth's Secret: %v", err)
	}
	user, pass := string(s.Data[userKey]), string(s.Data[passKey])
	if user == "" || pass == "" {
		t.Fatalf("Secret %s has no user (%q) or no password (%q)", a.SecretName, userKey, passKey)
	}
	t.Logf("Bolt clients log in as %q (Secret %s keys %s, %s)", user, a.SecretName, userKey, passKey)
	return boltclient.Options{Username: user, Password: pass}
}

// mgCheckAuth: every data instance accepts the admin user and refuses a client without
// credentials and one with a wrong password (Memgraph's Unauthenticated FAILURE). The
// coordinators store no users (Memgraph keeps users on the data instances only) and the
// simulator's accept any login, as Memgraph's do: what a coordinator answers to a client
// without credentials is logged, not asserted.
func mgCheckAuth(ctx context.Context, t *testing.T) {
	t.Helper()
	for _, pod := range []string{mgName + "-data-0", mgName + "-data-1", mgName + "-coordinator-1"} {
		coordinator := strings.Contains(pod, "-coordinator-")
		addr, err := mgPodBolt(ctx, pod)
		if err != nil {
			t.Fatal(err)
		}
		for _, try := range []struct {
			name string
			o    boltclient.Options
		}{
			{"no credentials", boltclient.Options{Timeout: mgCall}},
			{"a wrong password", boltclient.Options{Username: mgAuth.Username, Password: mgAuth.Password + "-wrong", Timeout: mgCall}},
		} {
			dctx, cancel := context.WithTimeout(ctx, mgCall)
			c, err := boltclient.Dial(dctx, addr, try.o)
			cancel()
			switch f, refused := errors.AsType[*bolt.Failure](err); {
			case err == nil && coordinator:
				_ = c.Close()
				t.Logf("%s accepts a Bolt client with %s (coordinators store no users)", pod, try.name)
			case err == nil:
				_ = c.Close()
				t.Errorf("%s accepted a Bolt client with %s", pod, try.name)
			case !refused || f.Code != bolt.CodeUnauthenticated:
				t.Errorf("%s refused a client with %s with %v, want %s", pod, try.name, err, bolt.CodeUnauthenticated)
			default:
				t.Logf("%s refused a client with %s: %v", pod, try.name, err)
			}
		}
		dctx, cancel := context.WithTimeout(ctx, mgCall)
		c, err := boltclient.Dial(dctx, addr, mgLogin(mgCall))
		cancel()
		if err != nil {
			t.Errorf("%s refused the admin user %q: %v", pod, mgAuth.Username, err)
			continue
		}
		_ = c.Close()
	}
}

// mgPod is the pod of a SHOW INSTANCES name: coordinator_<n> runs in <cluster>-coordinator-<n>,
// a data instance's name is its pod's with '_' for '-'.
func mgPod(instance string) string {
	if id, ok := strings.CutPrefix(instance, "coordinator_"); ok {
		return mgName + "-coordinator-" + id
	}
	return strings.ReplaceAll(instance, "_", "-")
}

// mgInstance is one row of SHOW INSTANCES.
type mgInstance struct{ Name, Health, Role string }

func mgInstances(res *boltclient.Result) ([]mgInstance, error) {
	name, health, role := res.Column("name"), res.Column("health"), res.Column("role")
	if name < 0 || health < 0 || role < 0 {
		return nil, fmt.Errorf("SHOW INSTANCES has fields %v, want name, health and role", res.Fields)
	}
	var out []mgInstance
	for _, r := range res.Records {
		if len(r) != len(res.Fields) {
			return nil, fmt.Errorf("SHOW INSTANCES row %v has %d values for %d fields", r, len(r), len(res.Fields))
		}
		s := func(i int) string { v, _ := r[i].(string); return v }
		out = append(out, mgInstance{Name: s(name), Health: s(health), Role: s(role)})
	}
	return out, nil
}

// mgLeaderView asks SHOW INSTANCES of every coordinator pod and returns the answer of the
// one that names itself leader (coordinator_<n> runs in pod memgraph-demo-coordinator-<n>); why says
// what is wrong when there is not exactly one such coordinator.
func mgLeaderView(ctx context.Context, coordinators int) (leader string, rows []mgInstance, why string) {
	var leaders, problems []string
	for id := 1; id <= coordinators; id++ {
		self := fmt.Sprintf("coordinator_%d", id)
		res, err := mgRun(ctx, fmt.Sprintf("%s-coordinator-%d", mgName, id), "SHOW INSTANCES")
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", self, err))
			continue
		}
		got, err := mgInstances(res)
		if err != nil {
			return "", nil, err.Error()
		}
		for _, r := range got {
			if r.Name == self && r.Role == "leader" {
				leaders = append(leaders, self)
				leader, rows = self, got
			}
		}
	}
	if len(leaders) != 1 {
		return "", nil, fmt.Sprintf("coordinators naming themselves leader: %v (%s)", leaders, strings.Join(problems, "; "))
	}
	return leader, rows, ""
}

// mgMembershipProblem checks the leader's view: exactly the expected members, all up,
// exactly one leader and one MAIN; it returns the MAIN and what is wrong ("" when right).
func mgMembershipProblem(rows []mgInstance, coordinators, data int) (main, why string) {
	return mgMembershipProblemOf(mgName, rows, coordinators, data)
}

// mgMembershipProblemOf is mgMembershipProblem for the MemgraphCluster named cluster.
func mgMembershipProblemOf(cluster string, rows []mgInstance, coordinators, data int) (main, why string) {
	var want, got []string
	for id := 1; id <= coordinators; id++ {
		want = append(want, fmt.Sprintf("coordinator_%d", id))
	}
	for i := range data {
		want = append(want, fmt.Sprintf("%s_data_%d", strings.ReplaceAll(cluster, "-", "_"), i))
	}
	roles := map[string][]string{}
	var down []string
	for _, r := range rows {
		got = append(got, r.Name)
		roles[r.Role] = append(roles[r.Role], r.Name)
		if r.Health != "up" {
			down = append(down, r.Name+" "+r.Health)
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	switch {
	case !slices.Equal(got, want):
		return "", fmt.Sprintf("registered %v, want %v", got, want)
	case len(roles["leader"]) != 1 || len(roles["main"]) != 1:
		return "", fmt.Sprintf("leaders %v and MAINs %v, want one each", roles["leader"], roles["main"])
	case len(roles["replica"]) != data-1 || len(roles["follower"]) != coordinators-1:
		return "", fmt.Sprintf("replicas %v, followers %v", roles["replica"], roles["follower"])
	case len(down) > 0:
		return "", fmt.Sprintf("not up: %v", down)
	}
	return roles["main"][0], ""
}

// mgPlane tracks the nodes written through the MAIN, to be found on every data instance.
type mgPlane struct {
	written int64
	// members is the expected membership, set by each check.
	coordinators, data int
}

// view waits until the leader's SHOW INSTANCES shows the expected membership and returns
// the MAIN and the replicas.
func (p *mgPlane) view(ctx context.Context, t *testing.T, step string) (main string, replicas []string) {
	t.Helper()
	var why string
	begin := time.Now()
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var rows []mgInstance
		_, rows, why = mgLeaderView(ctx, p.coordinators)
		if why != "" {
			return false, nil
		}
		if main, why = mgMembershipProblem(rows, p.coordinators, p.data); why != "" {
			return false, nil
		}
		replicas = nil
		for _, r := range rows {
			if r.Role == "replica" {
				replicas = append(replicas, r.Name)
			}
		}
		return true, nil
	})
	if err != nil {
		mgDiagnose(ctx, t)
		t.Fatalf("%s: the leader's SHOW INSTANCES: %s (%v)", step, why, err)
	}
	if d := time.Since(begin); d > time.Second {
		t.Logf("%s: SHOW INSTANCES right after %s", step, since(begin))
	}
	return main, replicas
}

// write creates one node through the MAIN (the leader's SHOW INSTANCES names it).
func (p *mgPlane) write(ctx context.Context, t *testing.T, step string) {
	t.Helper()
	main, _ := p.view(ctx, t, "before "+step)
	p.writeTo(ctx, t, main, step)
}

func (p *mgPlane) writeTo(ctx context.Context, t *testing.T, main, step string) {
	t.Helper()
	q := fmt.Sprintf("CREATE (:E2E {step: %q})", step)
	// A MAIN that just (re)started refuses writes until the coordinators have confirmed it:
	// the refusal says to retry; how long it lasted is logged.
	begin := time.Now()
	var err error
	for {
		if _, err = mgRun(ctx, mgPod(main), q); err == nil || !strings.Contains(err.Error(), "please retry") || time.Since(begin) > 30*time.Second {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil && strings.Contains(err.Error(), "SYNC replica has not confirmed") && !strings.Contains(err.Error(), "STRICT_SYNC") {
		// Memgraph commits on the MAIN all the same; the replica must catch up (check).
		t.Logf("%s: the MAIN %s committed the write but a SYNC replica did not confirm it: %v", step, main, err)
		err = nil
	}
	if err != nil {
		t.Fatalf("%s on the MAIN %s: %v", q, main, err)
	}
	if d := time.Since(begin); d > time.Second {
		t.Logf("%s: the MAIN %s took the write after %s of refusals", step, main, since(begin))
	}
	p.written++
}

// check runs after a step: the membership is right, and the MAIN and every replica hold
// every node written so far (SYNC replication: equal counts, none lost).
func (p *mgPlane) check(ctx context.Context, t *testing.T, step string, coordinators, data int) {
	t.Helper()
	p.coordinators, p.data = coordinators, data
	main, replicas := p.view(ctx, t, step)
	counts := map[string]int64{}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		ok := true
		for _, inst := range append([]string{main}, replicas...) {
			res, err := mgRun(ctx, mgPod(inst), "MATCH (n:E2E) RETURN count(n)")
			counts[inst] = -1
			if err == nil && len(res.Records) == 1 && len(res.Records[0]) == 1 {
				counts[inst], _ = res.Records[0][0].(int64)
			}
			ok = ok && counts[inst] == p.written
		}
		return ok, nil
	})
	if err != nil {
		t.Fatalf("%s: nodes written through the MAIN: %d; counted on MAIN %s and replicas %v: %v (-1: no answer)", step, p.written, main, replicas, counts)
	}
	t.Logf("%s: main=%s, %d nodes on the MAIN and each of %d replicas", step, main, p.written, len(replicas))
}

// mainWatch polls SHOW REPLICATION ROLE on every data pod in a tight loop and records the
// windows in which no data instance answered MAIN.
type mainWatch struct {
	cancel context.CancelFunc
	done   chan struct{}
	// set by the loop, read after done
	gaps, twos       []time.Duration
	rounds           int
	maxRound, lasted time.Duration
}

func watchMain(ctx context.Context) *mainWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &mainWatch{cancel: cancel, done: make(chan struct{})}
	go w.loop(ctx)
	return w
}

func (w *mainWatch) loop(ctx context.Context) {
	defer close(w.done)
	clients := map[string]*boltclient.Client{}
	defer func() {
		for _, c := range clients {
			_ = c.Close()
		}
	}()
	var addrs []string
	var listed time.Time
	var gapStart, twoStart time.Time
	begin := time.Now()
	for ctx.Err() == nil {
		// Pods come back with new addresses: list them often, query them far more often.
		if time.Since(listed) > 300*time.Millisecond {
			list, err := env.client.CoreV1().Pods(mgNamespace).List(ctx, metav1.ListOptions{LabelSelector: "memgraph.com/cluster=" + mgName + ",app.kubernetes.io/component=data"})
			if err == nil {
				addrs = addrs[:0]
				for i := range list.Items {
					if ip := list.Items[i].Status.PodIP; ip != "" {
						addrs = append(addrs, net.JoinHostPort(ip, mgBoltPort))
					}
				}
				listed = time.Now()
			}
		}
		round := time.Now()
		mains := 0
		for _, a := range addrs {
			c := clients[a]
			if c == nil {
				dctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
				var err error
				c, err = boltclient.Dial(dctx, a, mgLogin(200*time.Millisecond))
				cancel()
				if err != nil {
					continue
				}
				clients[a] = c
			}
			res, err := c.Run(ctx, "SHOW REPLICATION ROLE", nil)
			if err != nil {
				_ = c.Close()
				delete(clients, a)
				continue
			}
			if len(res.Records) == 1 && len(res.Records[0]) == 1 && res.Records[0][0] == "main" {
				mains++
			}
		}
		if ctx.Err() != nil {
			break
		}
		w.rounds++
		w.maxRound = max(w.maxRound, time.Since(round))
		switch {
		case mains == 0 && gapStart.IsZero():
			gapStart = round
		case mains > 0 && !gapStart.IsZero():
			w.gaps = append(w.gaps, time.Since(gapStart))
			gapStart = time.Time{}
		}
		switch {
		case mains > 1 && twoStart.IsZero():
			twoStart = round
		case mains <= 1 && !twoStart.IsZero():
			w.twos = append(w.twos, time.Since(twoStart))
			twoStart = time.Time{}
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !gapStart.IsZero() {
		w.gaps = append(w.gaps, -time.Since(gapStart)) // still open: negative
	}
	w.lasted = time.Since(begin)
}

// stop ends the watch and logs what it saw (timings are logged, never asserted).
func (w *mainWatch) stop(t *testing.T, what string) {
	t.Helper()
	w.cancel()
	<-w.done
	list := func(ds []time.Duration) string {
		var out []string
		for _, g := range ds {
			if g < 0 {
				out = append(out, fmt.Sprintf("%s (still open)", -g))
				continue
			}
			out = append(out, g.Round(time.Millisecond).String())
		}
		return "[" + strings.Join(out, " ") + "]"
	}
	// Two answers of MAIN in one round can be a handover between two reads of the round,
	// or a restarted old MAIN that restored its role before the coordinators demoted it.
	t.Logf("MAIN-less windows during %s: %s; windows with two data instances answering MAIN: %s (%d polling rounds over %s, slowest round %s)",
		what, list(w.gaps), list(w.twos), w.rounds, w.lasted.Round(time.Second), w.maxRound.Round(time.Millisecond))
}
