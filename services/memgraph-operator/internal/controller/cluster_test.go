package controller_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/services/memgraph-operator/internal/controller"
	"github.com/opsuite/suite/services/memgraph-operator/internal/planner"
	"github.com/opsuite/suite/services/memgraph-operator/internal/resources"
	"github.com/opsuite/suite/shared/testenv"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// registrar stands in for the data plane behind the Registrar seam: it records every
// membership it is asked for and answers with what answer returns.
type registrar struct {
	mu     sync.Mutex
	wants  []planner.Desired
	creds  []controller.Credentials
	answer func(want planner.Desired) (controller.Registration, error)
}

func (r *registrar) Register(_ context.Context, _ *memgraphv1.MemgraphCluster, creds controller.Credentials, want planner.Desired) (controller.Registration, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.wants = append(r.wants, want)
	r.creds = append(r.creds, creds)
	return r.answer(want)
}

func (r *registrar) set(answer func(planner.Desired) (controller.Registration, error)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.answer = answer
}

func (r *registrar) calls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.wants)
}

func (r *registrar) last() planner.Desired {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.wants[len(r.wants)-1]
}

// healthy answers as a converged cluster would: every wanted member registered,
// coordinator_1 leading, the first data instance MAIN, retiring members retired at once.
func healthy(want planner.Desired) (controller.Registration, error) {
	return controller.Registration{
		Leader: "coordinator_1", Main: want.Data[0].Name, Converged: true,
		Coordinators: int32(len(want.Coordinators) - len(want.RetiringCoordinators)), DataInstances: int32(len(want.Data) - len(want.RetiringData)),
		RetiredCoordinators: want.RetiringCoordinators, RetiredData: want.RetiringData,
		LagRead: want.ReadLag,
	}, nil
}

// sysctls stands in for the node agents behind the SysctlChecker seam.
type sysctls struct {
	mu    sync.Mutex
	value map[string]int64
	asked map[string]int
}

func (s *sysctls) MaxMapCount(_ context.Context, node string, minimum int64) (controller.SysctlReport, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asked[node]++
	v, ok := s.value[node]
	if !ok {
		return controller.SysctlReport{}, errors.New("no agent on " + node)
	}
	return controller.SysctlReport{Value: v, Minimum: minimum, Met: v >= minimum}, nil
}

type harness struct {
	t      *testing.T
	ns     string
	c      client.Client
	reg    *registrar
	sys    *sysctls
	writes *testenv.WriteCounter
}

func start(t *testing.T, operator string, opts ...func(*controller.Config)) *harness {
	t.Helper()
	return startWith(t, operator, nil, opts...)
}

// startWith is start with more options for the manager.
func startWith(t *testing.T, operator string, more []testenv.ManagerOption, opts ...func(*controller.Config)) *harness {
	t.Helper()
	h := &harness{
		t: t, ns: testenv.NewNamespace(t, env.Client, "mg-"), c: env.Client,
		reg:    &registrar{answer: healthy},
		sys:    &sysctls{value: map[string]int64{}, asked: map[string]int{}},
		writes: &testenv.WriteCounter{},
	}
	countWrites := func(o *ctrl.Options) {
		o.NewClient = func(cfg *rest.Config, opts client.Options) (client.Client, error) {
			c, err := client.New(cfg, opts)
			if err != nil {
				return nil, err
			}
			return h.writes.Wrap(c), nil
		}
	}
	env.StartManager(t, func(mgr ctrl.Manager) error {
		cfg := controller.Config{
			Operator: operator, Registrar: h.reg, Sysctls: h.sys,
			Poll: 200 * time.Millisecond, Resync: 300 * time.Millisecond, SysctlRetry: 200 * time.Millisecond,
		}
		for _, o := range opts {
			o(&cfg)
		}
		return controller.Setup(mgr, cfg)
	}, append([]testenv.ManagerOption{testenv.InNamespaces(h.ns), countWrites, controller.ManagerOptions}, more...)...) // the operator's cache
	return h
}

func (h *harness) create(name string, coordinators, data int32) *memgraphv1.MemgraphCluster {
	h.t.Helper()
	c := &memgraphv1.MemgraphCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: h.ns},
		Spec: memgraphv1.MemgraphClusterSpec{
			Coordinators: coordinators, DataInstances: data,
			Secrets: memgraphv1.SecretsSpec{Name: "memgraph-license"},
		},
	}
	if err := h.c.Create(context.Background(), c); err != nil {
		h.t.Fatal(err)
	}
	return c
}

func (h *harness) cluster(name string) *memgraphv1.MemgraphCluster {
	h.t.Helper()
	c := &memgraphv1.MemgraphCluster{}
	if err := h.c.Get(context.Background(), client.ObjectKey{Namespace: h.ns, Name: name}, c); err != nil {
		h.t.Fatal(err)
	}
	return c
}

func (h *harness) sts(name string) *appsv1.StatefulSet {
	h.t.Helper()
	s := &appsv1.StatefulSet{}
	if err := h.c.Get(context.Background(), client.ObjectKey{Namespace: h.ns, Name: name}, s); err != nil {
		h.t.Fatal(err)
	}
	return s
}

// waitCondition waits for the cluster's condition to reach status and reason.
func (h *harness) waitCondition(name, condType string, status metav1.ConditionStatus, reason string) *memgraphv1.MemgraphCluster {
	h.t.Helper()
	var c *memgraphv1.MemgraphCluster
	testenv.Eventually(h.t, 30*time.Second, fmt.Sprintf("%s %s=%s/%s", name, condType, status, reason), func() (bool, string) {
		c = &memgraphv1.MemgraphCluster{}
		if err := h.c.Get(context.Background(), client.ObjectKey{Namespace: h.ns, Name: name}, c); err != nil {
			return false, err.Error()
		}
		got := meta.FindStatusCondition(c.Status.Conditions, condType)
		return got != nil && got.Status == status && got.Reason == reason && got.ObservedGeneration == c.Generation,
			fmt.Sprintf("state %s conditions %+v", c.Status.State, c.Status.Conditions)
	})
	return c
}

// podsRun plays the StatefulSet controller and kubelet: every pod of the StatefulSet at
// its current spec exists, is ready and runs the update revision (r1 at first).
func (h *harness) podsRun(name string) {
	h.t.Helper()
	testenv.Eventually(h.t, 30*time.Second, "status of StatefulSet "+name, func() (bool, string) {
		s := &appsv1.StatefulSet{}
		if err := h.c.Get(context.Background(), client.ObjectKey{Namespace: h.ns, Name: name}, s); err != nil {
			return false, err.Error()
		}
		n := *s.Spec.Replicas
		rev := s.Status.UpdateRevision
		if rev == "" {
			rev = "r1"
		}
		s.Status = appsv1.StatefulSetStatus{
			ObservedGeneration: s.Generation, Replicas: n, ReadyReplicas: n, AvailableReplicas: n,
			CurrentReplicas: n, UpdatedReplicas: n, CurrentRevision: rev, UpdateRevision: rev,
		}
		err := h.c.Status().Update(context.Background(), s)
		return err == nil, fmt.Sprint(err)
	})
}

func (h *harness) events(name string) []eventsv1.Event {
	h.t.Helper()
	var list eventsv1.EventList
	if err := h.c.List(context.Background(), &list, client.InNamespace(h.ns)); err != nil {
		h.t.Fatal(err)
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Name == name && e.Regarding.Kind == "MemgraphCluster" {
			out = append(out, e)
		}
	}
	return out
}

// TestLifecycle: children by server-side apply, the readiness gate, registration once
// every pod is ready, status and conditions, and a steady cluster that writes nothing.
func TestLifecycle(t *testing.T) {
	h := start(t, "mg-lifecycle")
	ctx := context.Background()
	h.create("demo", 3, 2)

	c := h.waitCondition("demo", memgraphv1.ConditionReady, metav1.ConditionFalse, memgraphv1.ReasonWorkloadsNotReady)
	if c.Status.State != memgraphv1.StateReconciling || c.Status.Reason != memgraphv1.ReasonWorkloadsNotReady {
		t.Errorf("state %s (%s) before any pod ran, want Reconciling (WorkloadsNotReady)", c.Status.State, c.Status.Reason)
	}
	if got := meta.FindStatusCondition(c.Status.Conditions, memgraphv1.ConditionConverged); got == nil || got.Reason != memgraphv1.ReasonWorkloadsNotReady {
		t.Errorf("Converged %+v", got)
	}
	// Every child, controlled by the cluster.
	coord, data := h.sts("demo-coordinator"), h.sts("demo-data")
	if *coord.Spec.Replicas != 3 || *data.Spec.Replicas != 2 || coord.Spec.Ordinals.Start != 1 ||
		coord.Spec.UpdateStrategy.Type != appsv1.OnDeleteStatefulSetStrategyType {
		t.Errorf("StatefulSets: coordinators %d from %d (%s), data %d", *coord.Spec.Replicas, coord.Spec.Ordinals.Start, coord.Spec.UpdateStrategy.Type, *data.Spec.Replicas)
	}
	for _, o := range []client.Object{
		coord, data,
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "demo-coordinators"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "demo-data"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "demo"}},
		&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "demo-coordinator"}},
		&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "demo-data"}},
	} {
		if err := h.c.Get(ctx, client.ObjectKey{Namespace: h.ns, Name: o.GetName()}, o); err != nil {
			t.Fatalf("%T %s: %v", o, o.GetName(), err)
		}
		if ref := metav1.GetControllerOf(o); ref == nil || ref.Kind != "MemgraphCluster" || ref.Name != "demo" {
			t.Errorf("%T %s controller %+v", o, o.GetName(), ref)
		}
	}
	if n := h.reg.calls(); n != 0 {
		t.Fatalf("registration ran %d times before the pods were ready", n)
	}

	h.podsRun("demo-coordinator")
	c = h.waitCondition("demo", memgraphv1.ConditionReady, metav1.ConditionFalse, memgraphv1.ReasonWorkloadsNotReady)
	if !strings.Contains(meta.FindStatusCondition(c.Status.Conditions, memgraphv1.ConditionReady).Message, "0 of 2 data pods ready") {
		t.Errorf("Ready message %+v does not name the data pods", c.Status.Conditions)
	}
	if n := h.reg.calls(); n != 0 {
		t.Fatalf("registration ran %d times with data pods not ready", n)
	}
	h.podsRun("demo-data")
	h.waitCondition("demo", memgraphv1.ConditionReady, metav1.ConditionTrue, memgraphv1.ReasonReady)
	c = h.waitCondition("demo", memgraphv1.ConditionConverged, metav1.ConditionTrue, memgraphv1.ReasonConverged)
	if c.Status.State != memgraphv1.StateReady || c.Status.Main != "demo_data_0" || c.Status.Leader != "coordinator_1" ||
		c.Status.Coordinators != 3 || c.Status.DataInstances != 2 || c.Status.ObservedGeneration != c.Generation {
		t.Errorf("status %+v", c.Status)
	}
	if got := meta.FindStatusCondition(c.Status.Conditions, memgraphv1.ConditionUpdated); got == nil || got.Status != metav1.ConditionTrue {
		t.Errorf("Updated %+v", got)
	}
	want := h.reg.last()
	if len(want.Coordinators) != 3 || len(want.Data) != 2 || len(want.RetiringCoordinators)+len(want.RetiringData) != 0 ||
		want.Coordinators[2].BoltServer != "demo-coordinator-3.demo-coordinators."+h.ns+".svc.cluster.local:7687" ||
		want.Data[1].ReplicationServer != "demo-data-1.demo-data."+h.ns+".svc.cluster.local:20000" {
		t.Errorf("membership asked for: %+v", want)
	}

	// Steady: passes keep coming (resync re-registers), nothing is written.
	calls, before := h.reg.calls(), h.writes.Count()
	testenv.Eventually(t, 10*time.Second, "three resync passes", func() (bool, string) {
		return h.reg.calls() >= calls+3, fmt.Sprint(h.reg.calls())
	})
	if w := h.writes.Count() - before; w != 0 {
		t.Errorf("a steady cluster made %d writes over %d passes", w, h.reg.calls()-calls)
	}
	var ready int
	for _, e := range h.events("demo") {
		if e.Reason == memgraphv1.ReasonReady {
			ready++
		}
	}
	if ready != 1 {
		t.Errorf("%d Ready events, want 1 (events on transitions only)", ready)
	}

	// The state metric has one series per state while the cluster exists, 1 for its
	// state, and a registrations counter; none of them after.
	if n := controller.StateSeries("mg-lifecycle"); n != controller.StateCount() {
		t.Errorf("%d state series, want %d", n, controller.StateCount())
	}
	if state, n := controller.ObjectSeries("mg-lifecycle", h.ns, "demo"); state != string(memgraphv1.StateReady) || n != controller.StateCount()+1 {
		t.Errorf("series of demo: state %q, %d series; want Ready, %d states and 1 counter", state, n, controller.StateCount())
	}
	if err := h.c.Delete(ctx, h.cluster("demo")); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "state series deleted", func() (bool, string) {
		_, n := controller.ObjectSeries("mg-lifecycle", h.ns, "demo")
		return n == 0 && controller.StateSeries("mg-lifecycle") == 0, fmt.Sprint(n)
	})
}

// TestScaleDownWaitsForRetirement: a StatefulSet is shrunk only past the members the
// registration reports retired, highest ordinal first; growing is applied at once.
func TestScaleDownWaitsForRetirement(t *testing.T) {
	h := start(t, "mg-scale")
	ctx := context.Background()
	h.create("g", 5, 3)
	h.podsRun("g-coordinator")
	h.podsRun("g-data")
	h.waitCondition("g", memgraphv1.ConditionConverged, metav1.ConditionTrue, memgraphv1.ReasonConverged)

	// Nothing retires yet: the data plane still counts every member.
	h.reg.set(func(want planner.Desired) (controller.Registration, error) {
		return controller.Registration{Leader: "coordinator_4", Main: "g_data_2", Converged: false,
			Coordinators: int32(len(want.Coordinators)), DataInstances: int32(len(want.Data)),
			Reason: memgraphv1.ReasonRetirementInProgress, Message: "Moving MAIN off a retiring instance"}, nil
	})
	c := h.cluster("g")
	c.Spec.Coordinators, c.Spec.DataInstances = 3, 1
	if err := h.c.Update(ctx, c); err != nil {
		t.Fatal(err)
	}
	c = h.waitCondition("g", memgraphv1.ConditionConverged, metav1.ConditionFalse, memgraphv1.ReasonRetirementInProgress)
	want := h.reg.last()
	if !slices.Equal(want.RetiringCoordinators, []int{4, 5}) || !slices.Equal(want.RetiringData, []string{"g_data_1", "g_data_2"}) {
		t.Errorf("retiring %v %v", want.RetiringCoordinators, want.RetiringData)
	}
	if n := *h.sts("g-coordinator").Spec.Replicas; n != 5 {
		t.Errorf("coordinators shrunk to %d before any retired", n)
	}
	if n := *h.sts("g-data").Spec.Replicas; n != 3 {
		t.Errorf("data shrunk to %d before any retired", n)
	}
	if c.Status.State != memgraphv1.StateReconciling || c.Status.Reason != memgraphv1.ReasonRetirementInProgress {
		t.Errorf("state %s (%s), want Reconciling (RetirementInProgress)", c.Status.State, c.Status.Reason)
	}

	// Only g_data_1 retired: g_data_2 (the highest) still holds its place, nothing shrinks.
	// coordinator_5 retired, coordinator_4 (the leader) not: coordinators shrink to 4.
	h.reg.set(func(want planner.Desired) (controller.Registration, error) {
		return controller.Registration{Leader: "coordinator_4", Main: "g_data_0", Converged: false,
			Reason: memgraphv1.ReasonLeadershipTransferInProgress, Message: "Leadership is moving off a retiring coordinator",
			RetiredCoordinators: []int{5}, RetiredData: []string{"g_data_1"}}, nil
	})
	testenv.Eventually(t, 20*time.Second, "coordinators shrunk to 4", func() (bool, string) {
		n := *h.sts("g-coordinator").Spec.Replicas
		return n == 4, fmt.Sprint(n)
	})
	// The StatefulSet controller removes the pod; the gate waits for it.
	h.podsRun("g-coordinator")
	h.waitCondition("g", memgraphv1.ConditionConverged, metav1.ConditionFalse, memgraphv1.ReasonLeadershipTransferInProgress)
	if n := *h.sts("g-data").Spec.Replicas; n != 3 {
		t.Errorf("data shrunk to %d past a still-registered g_data_2", n)
	}

	// Everything retired: both shrink to the declared counts and the cluster converges.
	h.reg.set(healthy)
	testenv.Eventually(t, 20*time.Second, "both StatefulSets at the declared counts", func() (bool, string) {
		co, d := *h.sts("g-coordinator").Spec.Replicas, *h.sts("g-data").Spec.Replicas
		return co == 3 && d == 1, fmt.Sprint(co, d)
	})
	h.podsRun("g-coordinator")
	h.podsRun("g-data")
	h.waitCondition("g", memgraphv1.ConditionConverged, metav1.ConditionTrue, memgraphv1.ReasonConverged)
	// Converged can turn True in a pass that still saw a pod of the shrink not ready (Ready
	// False, so the state Reconciling); the next pass, on the pods' status, is Ready.
	testenv.Eventually(t, 20*time.Second, "state Ready after the shrink", func() (bool, string) {
		c = h.cluster("g")
		return c.Status.State == memgraphv1.StateReady, fmt.Sprintf("state %s conditions %+v", c.Status.State, c.Status.Conditions)
	})
	var scaled []string
	for _, e := range h.events("g") {
		if e.Reason == memgraphv1.ReasonRetirementInProgress && strings.HasPrefix(e.Note, "Scaled StatefulSet") {
			scaled = append(scaled, e.Note)
		}
	}
	if len(scaled) < 2 {
		t.Errorf("scale events %q, want one per shrink", scaled)
	}

	// Growing is applied at once, before any registration.
	c = h.cluster("g")
	c.Spec.DataInstances = 4
	if err := h.c.Update(ctx, c); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 20*time.Second, "data grown to 4", func() (bool, string) {
		n := *h.sts("g-data").Spec.Replicas
		return n == 4, fmt.Sprint(n)
	})
	h.waitCondition("g", memgraphv1.ConditionReady, metav1.ConditionFalse, memgraphv1.ReasonWorkloadsNotReady)
	if s := h.cluster("g").Status.State; s != memgraphv1.StateReconciling {
		t.Errorf("state %s while new pods start, want Reconciling", s)
	}
}

// TestDataPlaneReasons: the registration's reasons reach Ready and the state; a failed
// command is a condition and a retry, not an error loop.
func TestDataPlaneReasons(t *testing.T) {
	h := start(t, "mg-reasons")
	h.create("r", 3, 2)
	h.podsRun("r-coordinator")
	h.podsRun("r-data")
	ready := h.waitCondition("r", memgraphv1.ConditionReady, metav1.ConditionTrue, memgraphv1.ReasonReady)

	h.reg.set(func(planner.Desired) (controller.Registration, error) {
		return controller.Registration{Reason: memgraphv1.ReasonNoCoordinatorLeader, Message: "No coordinator names a leader"}, nil
	})
	c := h.waitCondition("r", memgraphv1.ConditionReady, metav1.ConditionFalse, memgraphv1.ReasonNoCoordinatorLeader)
	if c.Status.State != memgraphv1.StateDegraded || c.Status.Reason != memgraphv1.ReasonNoCoordinatorLeader || c.Status.Leader != "" {
		t.Errorf("state %s (%s) leader %q, want Degraded (NoCoordinatorLeader)", c.Status.State, c.Status.Reason, c.Status.Leader)
	}
	// Without a leader nothing is observed: the MAIN and the counts stay as last reported.
	if ready.Status.Main == "" || c.Status.Main != ready.Status.Main || c.Status.Coordinators != ready.Status.Coordinators || c.Status.DataInstances != ready.Status.DataInstances {
		t.Errorf("without a leader: main %q, %d coordinators, %d data instances; want what the leader last reported: %q, %d, %d",
			c.Status.Main, c.Status.Coordinators, c.Status.DataInstances, ready.Status.Main, ready.Status.Coordinators, ready.Status.DataInstances)
	}
	h.reg.set(func(planner.Desired) (controller.Registration, error) {
		return controller.Registration{Reason: memgraphv1.ReasonCoordinatorUnreachable, Message: "No coordinator answered"}, nil
	})
	h.waitCondition("r", memgraphv1.ConditionReady, metav1.ConditionFalse, memgraphv1.ReasonCoordinatorUnreachable)
	h.reg.set(func(want planner.Desired) (controller.Registration, error) {
		return controller.Registration{Leader: "coordinator_2", Converged: true, Coordinators: 3, DataInstances: 2}, nil
	})
	if c := h.waitCondition("r", memgraphv1.ConditionReady, metav1.ConditionFalse, memgraphv1.ReasonNoMain); c.Status.Main != "" {
		t.Errorf("a leader naming no MAIN: status.main %q, want empty", c.Status.Main)
	}
	h.reg.set(func(planner.Desired) (controller.Registration, error) {
		return controller.Registration{}, errors.New("Couldn't register replica instance")
	})
	c = h.waitCondition("r", memgraphv1.ConditionConverged, metav1.ConditionFalse, memgraphv1.ReasonRegistrationFailed)
	if got := meta.FindStatusCondition(c.Status.Conditions, memgraphv1.ConditionConverged).Message; strings.Contains(got, "Couldn't") {
		t.Errorf("raw error in the condition message: %q", got)
	}
	calls := h.reg.calls()
	testenv.Eventually(t, 10*time.Second, "retries at the poll interval", func() (bool, string) {
		return h.reg.calls() >= calls+2, fmt.Sprint(h.reg.calls())
	})
	var warnings int
	for _, e := range h.events("r") {
		if e.Type == corev1.EventTypeWarning && e.Reason == memgraphv1.ReasonNoCoordinatorLeader && e.Action == memgraphv1.ConditionReady {
			warnings++
		}
	}
	if warnings != 1 {
		t.Errorf("%d NoCoordinatorLeader warnings about Ready, want 1", warnings)
	}
}

// TestNodesPrepared: the nodes running the cluster's pods are checked through the node
// agent seam; a low vm.max_map_count is a condition and a warning naming the nodes, and a
// node found fine is not asked again every pass.
func TestNodesPrepared(t *testing.T) {
	h := start(t, "mg-nodes")
	ctx := context.Background()
	h.sys.value["node-a"] = 262144
	h.sys.value["node-b"] = 65530
	h.create("n", 3, 2)
	h.podsRun("n-coordinator")
	h.podsRun("n-data")
	h.waitCondition("n", memgraphv1.ConditionReady, metav1.ConditionTrue, memgraphv1.ReasonReady)
	if got := meta.FindStatusCondition(h.cluster("n").Status.Conditions, memgraphv1.ConditionNodesPrepared); got != nil {
		t.Errorf("NodesPrepared %+v with no pod on a node", got)
	}
	// Pods as the scheduler placed them (no kubelet runs them here).
	for i, node := range []string{"node-a", "node-b", "node-a"} {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n-coordinator-%d", i+1), Namespace: h.ns, Labels: resources.Selector("n", resources.RoleCoordinator)},
			Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "memgraph", Image: "memgraph/memgraph:3.12.0"}}},
		}
		if err := h.c.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
	c := h.waitCondition("n", memgraphv1.ConditionNodesPrepared, metav1.ConditionFalse, memgraphv1.ReasonMaxMapCountTooLow)
	msg := meta.FindStatusCondition(c.Status.Conditions, memgraphv1.ConditionNodesPrepared).Message
	if !strings.Contains(msg, "node-b") || strings.Contains(msg, "node-a") {
		t.Errorf("message %q should name node-b only", msg)
	}
	if c.Status.State != memgraphv1.StateReady {
		t.Errorf("state %s: a low sysctl is reported, not an outage", c.Status.State)
	}
	testenv.Eventually(t, 10*time.Second, "a warning event naming node-b", func() (bool, string) {
		for _, e := range h.events("n") {
			if e.Type == corev1.EventTypeWarning && e.Reason == memgraphv1.ReasonMaxMapCountTooLow && strings.Contains(e.Note, "node-b") {
				return true, ""
			}
		}
		return false, "none yet"
	})

	// The node is fixed: the condition clears; node-a, fine from the start, was asked once.
	h.sys.mu.Lock()
	h.sys.value["node-b"] = 262144
	h.sys.mu.Unlock()
	h.waitCondition("n", memgraphv1.ConditionNodesPrepared, metav1.ConditionTrue, memgraphv1.ReasonNodesPrepared)
	h.sys.mu.Lock()
	askedA, askedB := h.sys.asked["node-a"], h.sys.asked["node-b"]
	h.sys.mu.Unlock()
	if askedA != 1 || askedB < 2 {
		t.Errorf("node-a asked %d times (want 1), node-b %d (want every pass until met)", askedA, askedB)
	}

	// An agent that does not answer leaves the check Unknown.
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "n-data-0", Namespace: h.ns, Labels: resources.Selector("n", resources.RoleData)},
		Spec:       corev1.PodSpec{NodeName: "node-c", Containers: []corev1.Container{{Name: "memgraph", Image: "memgraph/memgraph:3.12.0"}}},
	}
	if err := h.c.Create(ctx, pod); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	c = h.waitCondition("n", memgraphv1.ConditionNodesPrepared, metav1.ConditionUnknown, memgraphv1.ReasonNodeAgentUnavailable)
	if msg := meta.FindStatusCondition(c.Status.Conditions, memgraphv1.ConditionNodesPrepared).Message; !strings.Contains(msg, "node-c") {
		t.Errorf("message %q should name node-c", msg)
	}
}

// TestCommandsCounted: registrations_total counts the commands the passes ran,
// and stays put at steady state.
func TestCommandsCounted(t *testing.T) {
	h := start(t, "mg-commands")
	var once sync.Once
	h.reg.set(func(want planner.Desired) (controller.Registration, error) {
		r, err := healthy(want)
		once.Do(func() { r.Executed = []string{"REGISTER INSTANCE cmds_data_0", "SET INSTANCE cmds_data_0 TO MAIN"} })
		return r, err
	})
	h.create("cmds", 3, 1)
	h.podsRun("cmds-coordinator")
	h.podsRun("cmds-data")
	h.waitCondition("cmds", memgraphv1.ConditionReady, metav1.ConditionTrue, memgraphv1.ReasonReady)
	calls := h.reg.calls()
	testenv.Eventually(t, 30*time.Second, "three more passes", func() (bool, string) { return h.reg.calls() >= calls+3, fmt.Sprint(h.reg.calls()) })
	if n := controller.Commands("mg-commands"); n != 2 {
		t.Errorf("registrations_total %v after one pass ran 2 commands and %d ran none, want 2", n, h.reg.calls()-1)
	}
}
