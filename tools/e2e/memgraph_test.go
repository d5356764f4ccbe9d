package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
)

var mgcGVR = schema.GroupVersionResource{Group: "memgraph.com", Version: "v1alpha1", Resource: "memgraphclusters"}

// The sample's cluster, as deploy/samples/memgraph.yaml names it.
const (
	mgNamespace = "default"
	mgName      = "demo"
)

// TestMemgraphSample applies deploy/samples/memgraph.yaml verbatim (3 coordinators, 2
// data instances, the license Secret) and waits until the operator reports it Ready with
// exactly one MAIN among the data instances and one Raft leader among the coordinators,
// every member registered, and a steady cluster that the operator no longer writes to.
func TestMemgraphSample(t *testing.T) {
	needRunner(t, "memgraph/memgraph pods run as bin/memgraph-sim processes")
	needInstalled(t, "memgraph-operator")
	ctx := t.Context()
	if d, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Add(-time.Minute))
		defer cancel()
	}
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
	err = poll(ctx, t, "MemgraphCluster demo Ready", 6*time.Minute, func(ctx context.Context) (bool, error) {
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
	t.Logf("time to Ready for 3+2: %s", since(begin))

	// One MAIN (a data instance of the sample), one leader (a coordinator), all registered.
	if !regexp.MustCompile(`^demo_data_[01]$`).MatchString(c.Status.Main) {
		t.Errorf("status.main %q, want one of demo_data_0, demo_data_1", c.Status.Main)
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
		got := meta.FindStatusCondition(c.Status.Conditions, memgraphv1.ConditionNodesPrepared)
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
	if want := "demo-coordinator-1 demo-coordinator-2 demo-coordinator-3 demo-data-0 demo-data-1"; strings.Join(names, " ") != want {
		t.Errorf("ready pods %v, want %s", names, want)
	}

	// Steady: resyncs keep re-reading SHOW INSTANCES, and write nothing anywhere.
	rv := c.ResourceVersion
	stsRV := map[string]string{}
	for _, n := range []string{"demo-coordinator", "demo-data"} {
		s, err := env.client.AppsV1().StatefulSets(mgNamespace).Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		stsRV[n] = s.ResourceVersion
	}
	time.Sleep(40 * time.Second)
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

	// Scale both roles up and back down: the retiring members leave the cluster before
	// their StatefulSet shrinks, and their claims stay (whenScaled: Retain by default).
	mgScale(ctx, t, "data 2 -> 3", `{"spec":{"dataInstances":3}}`, 3, 3, 4*time.Minute)
	mgScale(ctx, t, "data 3 -> 2", `{"spec":{"dataInstances":2}}`, 3, 2, 4*time.Minute)
	mgScale(ctx, t, "coordinators 3 -> 5", `{"spec":{"coordinators":5}}`, 5, 2, 4*time.Minute)
	mgScale(ctx, t, "coordinators 5 -> 3", `{"spec":{"coordinators":3}}`, 3, 2, 4*time.Minute)
	for _, pvc := range []string{"lib-demo-data-2", "log-demo-data-2", "lib-demo-coordinator-5"} {
		if _, err := env.client.CoreV1().PersistentVolumeClaims(mgNamespace).Get(ctx, pvc, metav1.GetOptions{}); err != nil {
			t.Errorf("claim %s of a retired member: %v (whenScaled Retain keeps it)", pvc, err)
		}
	}

	// A new image rolls every pod, one at a time, MAIN and leadership moved off first.
	before := map[string]string{}
	list, err := env.client.CoreV1().Pods(mgNamespace).List(ctx, metav1.ListOptions{LabelSelector: "memgraph.com/cluster=" + mgName})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range list.Items {
		before[p.Name] = string(p.UID)
	}
	// Five pods one at a time, each restarted, ready and re-registered before the next.
	mgScale(ctx, t, "roll the image to 3.12.1", `{"spec":{"image":{"tag":"3.12.1"}}}`, 3, 2, 10*time.Minute)
	err = poll(ctx, t, "Updated=True", 10*time.Minute, func(ctx context.Context) (bool, error) {
		c, err := mgCluster(ctx)
		if err != nil {
			return transient(err)
		}
		u := meta.FindStatusCondition(c.Status.Conditions, memgraphv1.ConditionUpdated)
		return c.Status.State == memgraphv1.StateReady && u != nil && u.Status == metav1.ConditionTrue && u.ObservedGeneration == c.Generation, nil
	})
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
	evs, err = env.client.EventsV1().Events(mgNamespace).List(ctx, metav1.ListOptions{})
	if err == nil {
		var roll []string
		for _, e := range evs.Items {
			if e.Regarding.Kind == "MemgraphCluster" && e.Regarding.Name == mgName && (strings.HasPrefix(e.Note, "Deleted pod") || strings.Contains(e.Note, "DEMOTE") || strings.Contains(e.Note, "YIELD")) {
				roll = append(roll, fmt.Sprintf("%s %s", e.CreationTimestamp.Format(time.TimeOnly), e.Note))
			}
		}
		t.Logf("roll events:\n  %s", strings.Join(roll, "\n  "))
	}

	// The MAIN's pod deleted: the coordinators fail over, the pod comes back as a replica,
	// the operator re-registers what is missing and the cluster is Ready again.
	c, err = mgCluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mainPod := strings.ReplaceAll(c.Status.Main, "_", "-")
	victim, err := env.client.CoreV1().Pods(mgNamespace).Get(ctx, mainPod, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the MAIN %s has no pod %s: %v", c.Status.Main, mainPod, err)
	}
	mgScale(ctx, t, "delete the MAIN's pod "+mainPod, "", 3, 2, 4*time.Minute, func(ctx context.Context) error {
		if err := env.client.CoreV1().Pods(mgNamespace).Delete(ctx, mainPod, metav1.DeleteOptions{}); err != nil {
			return err
		}
		// Until the old pod is gone the cluster still looks Ready.
		return poll(ctx, t, "pod "+mainPod+" replaced", 2*time.Minute, func(ctx context.Context) (bool, error) {
			p, err := env.client.CoreV1().Pods(mgNamespace).Get(ctx, mainPod, metav1.GetOptions{})
			if err != nil {
				return transient(err)
			}
			return p.UID != victim.UID, nil
		})
	})
	if p, err := env.client.CoreV1().Pods(mgNamespace).Get(ctx, mainPod, metav1.GetOptions{}); err != nil || p.UID == victim.UID {
		t.Errorf("pod %s was not replaced (err %v)", mainPod, err)
	}
	c, _ = mgCluster(ctx)
	t.Logf("after the MAIN's pod went: %s", mgDescribe(c))

	// The operator killed right after a scale-down begins: its successor finishes the
	// retirement from the live StatefulSet.
	mgScale(ctx, t, "data 2 -> 3 again", `{"spec":{"dataInstances":3}}`, 3, 3, 4*time.Minute)
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
	err := poll(ctx, t, name, timeout, func(ctx context.Context) (bool, error) {
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
		for sts, want := range map[string]int32{"demo-coordinator": coordinators, "demo-data": data} {
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

func mgCluster(ctx context.Context) (*memgraphv1.MemgraphCluster, error) {
	u, err := env.dyn.Resource(mgcGVR).Namespace(mgNamespace).Get(ctx, mgName, metav1.GetOptions{})
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
