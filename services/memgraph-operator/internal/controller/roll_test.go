package controller_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/services/memgraph-operator/internal/controller"
	"github.com/opsuite/suite/services/memgraph-operator/internal/planner"
	"github.com/opsuite/suite/services/memgraph-operator/internal/resources"
	"github.com/opsuite/suite/shared/testenv"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// pod plays the StatefulSet controller and kubelet for one pod: created at revision rev,
// with its index label, and ready.
func (h *harness) pod(cluster string, r resources.Role, ordinal int32, rev string) *corev1.Pod {
	h.t.Helper()
	ctx := context.Background()
	labels := resources.Selector(cluster, r)
	labels[resources.LabelPodIndex] = fmt.Sprint(ordinal)
	labels[appsv1.ControllerRevisionHashLabelKey] = rev
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: resources.PodName(cluster, r, ordinal), Namespace: h.ns, Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "memgraph", Image: "memgraph/memgraph:3.12.0"}}},
	}
	if err := h.c.Create(ctx, p); err != nil {
		h.t.Fatal(err)
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	if err := h.c.Status().Update(ctx, p); err != nil {
		h.t.Fatal(err)
	}
	return p
}

// runAtR1 creates the cluster and plays its StatefulSets and kubelets: every pod exists at
// revision r1 and is ready, then the StatefulSets' status says r1 (podsRun).
func (h *harness) runAtR1(cluster string, coordinators, data int32) {
	h.t.Helper()
	h.create(cluster, coordinators, data)
	testenv.Eventually(h.t, 10*time.Second, "StatefulSets", func() (bool, string) {
		err := h.c.Get(context.Background(), client.ObjectKey{Namespace: h.ns, Name: cluster + "-data"}, &appsv1.StatefulSet{})
		return err == nil, fmt.Sprint(err)
	})
	for id := int32(1); id <= coordinators; id++ {
		h.pod(cluster, resources.RoleCoordinator, id, "r1")
	}
	for o := range data {
		h.pod(cluster, resources.RoleData, o, "r1")
	}
	h.podsRun(cluster + "-coordinator")
	h.podsRun(cluster + "-data")
}

// newRevision plays the StatefulSet controller after a template change (OnDelete): the
// update revision moves, no pod runs it yet.
func (h *harness) newRevision(name, rev string) {
	h.t.Helper()
	testenv.Eventually(h.t, 10*time.Second, "new revision of "+name, func() (bool, string) {
		s := h.sts(name)
		s.Status.UpdateRevision, s.Status.UpdatedReplicas = rev, 0
		err := h.c.Status().Update(context.Background(), s)
		return err == nil, fmt.Sprint(err)
	})
}

// handovers answers as a cluster whose coordinators hand MAIN and leadership over when
// asked to drain them, with every replica caught up.
type handovers struct {
	main, leader string
	drained      []string
}

func (ho *handovers) answer(want planner.Desired) (controller.Registration, error) {
	reg := controller.Registration{Converged: true, Coordinators: int32(len(want.Coordinators)), DataInstances: int32(len(want.Data)), LagRead: want.ReadLag}
	if slices.Contains(want.DrainData, ho.main) {
		for _, d := range want.Data {
			if d.Name != ho.main {
				ho.drained = append(ho.drained, "MAIN "+ho.main+" -> "+d.Name)
				ho.main = d.Name
				break
			}
		}
		reg.Converged, reg.Reason = false, memgraphv1.ReasonRegistrationInProgress
		reg.Executed = []string{"DEMOTE INSTANCE", "SET INSTANCE TO MAIN"}
	}
	for _, id := range want.DrainCoordinators {
		if resources.CoordinatorName(id) == ho.leader {
			for _, c := range want.Coordinators {
				if c.Name != ho.leader {
					ho.drained = append(ho.drained, "leader "+ho.leader+" -> "+c.Name)
					ho.leader = c.Name
					break
				}
			}
			reg.Converged, reg.Reason = false, memgraphv1.ReasonLeadershipTransferInProgress
			reg.Executed = []string{"YIELD LEADERSHIP"}
		}
	}
	reg.Main, reg.Leader = ho.main, ho.leader
	return reg, nil
}

// TestRollingUpdate: after a template change the operator replaces one pod at a time on a
// converged cluster: the replica, then the MAIN once it has handed MAIN over, then the
// coordinator followers, then the leader once it has yielded.
func TestRollingUpdate(t *testing.T) {
	h := start(t, "mg-roll")
	ctx := context.Background()
	ho := &handovers{main: "u_data_0", leader: "coordinator_1"}
	h.reg.set(ho.answer)
	h.runAtR1("u", 3, 2)
	h.waitCondition("u", memgraphv1.ConditionUpdated, metav1.ConditionTrue, memgraphv1.ReasonUpdated)
	h.waitCondition("u", memgraphv1.ConditionConverged, metav1.ConditionTrue, memgraphv1.ReasonConverged)

	h.newRevision("u-data", "r2")
	h.newRevision("u-coordinator", "r2")
	h.waitCondition("u", memgraphv1.ConditionUpdated, metav1.ConditionFalse, memgraphv1.ReasonUpdatePending)
	for _, want := range []struct {
		r       resources.Role
		ordinal int32
	}{{resources.RoleData, 1}, {resources.RoleData, 0}, {resources.RoleCoordinator, 2}, {resources.RoleCoordinator, 3}, {resources.RoleCoordinator, 1}} {
		name := resources.PodName("u", want.r, want.ordinal)
		testenv.Eventually(t, 20*time.Second, "pod "+name+" deleted", func() (bool, string) {
			err := h.c.Get(ctx, client.ObjectKey{Namespace: h.ns, Name: name}, &corev1.Pod{})
			return apierrors.IsNotFound(err), fmt.Sprintf("%v; handovers %v", err, ho.drained)
		})
		var pods corev1.PodList
		if err := h.c.List(ctx, &pods, client.InNamespace(h.ns)); err != nil {
			t.Fatal(err)
		}
		if len(pods.Items) != 4 {
			t.Fatalf("after %s went, %d pods are left: more than one replaced at a time", name, len(pods.Items))
		}
		member := resources.DataInstanceName("u", want.ordinal)
		if want.r == resources.RoleCoordinator {
			member = resources.CoordinatorName(int(want.ordinal))
		}
		h.reg.mu.Lock()
		holds := member == ho.main || member == ho.leader
		h.reg.mu.Unlock()
		if holds {
			t.Fatalf("pod %s was deleted while %s holds MAIN or leadership", name, member)
		}
		h.pod("u", want.r, want.ordinal, "r2")
	}
	h.reg.mu.Lock()
	drained := slices.Clone(ho.drained)
	h.reg.mu.Unlock()
	if want := []string{"MAIN u_data_0 -> u_data_1", "leader coordinator_1 -> coordinator_2"}; !slices.Equal(drained, want) {
		t.Errorf("handovers %q, want %q", drained, want)
	}
	// Every pod runs r2: once the StatefulSets say so, Updated is True and nothing more goes.
	h.podsRun("u-coordinator")
	h.podsRun("u-data")
	h.waitCondition("u", memgraphv1.ConditionUpdated, metav1.ConditionTrue, memgraphv1.ReasonUpdated)
	var pods corev1.PodList
	if err := h.c.List(ctx, &pods, client.InNamespace(h.ns)); err != nil || len(pods.Items) != 5 {
		t.Errorf("%d pods after the roll (err %v)", len(pods.Items), err)
	}
}

// TestRollWaitsForCoordinatorsBehind: while a coordinator's own view does not match the
// leader's (it has not applied the Raft log, or does not answer), no further pod is
// replaced and Updated says why; once it matches, the roll goes on.
func TestRollWaitsForCoordinatorsBehind(t *testing.T) {
	h := start(t, "mg-roll-behind")
	ctx := context.Background()
	ho := &handovers{main: "b_data_0", leader: "coordinator_1"}
	var behind []string
	h.reg.set(func(want planner.Desired) (controller.Registration, error) {
		reg, err := ho.answer(want)
		reg.CoordinatorsBehind = behind
		return reg, err
	})
	h.runAtR1("b", 3, 1)
	h.waitCondition("b", memgraphv1.ConditionConverged, metav1.ConditionTrue, memgraphv1.ReasonConverged)

	h.reg.mu.Lock()
	behind = []string{"coordinator_3"}
	h.reg.mu.Unlock()
	h.newRevision("b-coordinator", "r2")
	calls := h.reg.calls()
	testenv.Eventually(t, 20*time.Second, "Updated names the coordinator wait", func() (bool, string) {
		c := h.cluster("b")
		cond := meta.FindStatusCondition(c.Status.Conditions, memgraphv1.ConditionUpdated)
		return cond != nil && cond.Reason == memgraphv1.ReasonUpdatePending && strings.HasSuffix(cond.Message, ": waiting for every coordinator to catch up with the leader's view"),
			fmt.Sprintf("%+v", cond)
	})
	testenv.Eventually(t, 20*time.Second, "five more passes", func() (bool, string) {
		return h.reg.calls() >= calls+5, fmt.Sprint(h.reg.calls() - calls)
	})
	var pods corev1.PodList
	if err := h.c.List(ctx, &pods, client.InNamespace(h.ns)); err != nil || len(pods.Items) != 4 {
		t.Fatalf("%d pods (err %v): a pod was replaced while coordinator_3 was behind", len(pods.Items), err)
	}

	h.reg.mu.Lock()
	behind = nil
	h.reg.mu.Unlock()
	name := resources.PodName("b", resources.RoleCoordinator, 2)
	testenv.Eventually(t, 20*time.Second, "pod "+name+" deleted once every coordinator caught up", func() (bool, string) {
		err := h.c.Get(ctx, client.ObjectKey{Namespace: h.ns, Name: name}, &corev1.Pod{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}
