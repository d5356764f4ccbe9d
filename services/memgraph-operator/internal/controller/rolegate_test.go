package controller_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/services/memgraph-operator/internal/controller"
	"github.com/opsuite/suite/services/memgraph-operator/internal/planner"
	"github.com/opsuite/suite/services/memgraph-operator/internal/resources"
	"github.com/opsuite/suite/shared/testenv"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// gatedPod plays the kubelet for a data pod held back by its readiness gate: the
// container runs and is ready, the pod is not Ready.
func (h *harness) gatedPod(cluster string, ordinal int32) {
	h.t.Helper()
	ctx := context.Background()
	labels := resources.Selector(cluster, resources.RoleData)
	labels[resources.LabelPodIndex] = fmt.Sprint(ordinal)
	labels[appsv1.ControllerRevisionHashLabelKey] = "r1"
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: resources.PodName(cluster, resources.RoleData, ordinal), Namespace: h.ns, Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "memgraph", Image: "memgraph/memgraph:3.12.0"}},
			ReadinessGates: []corev1.PodReadinessGate{{ConditionType: memgraphv1.RoleAssignedGate}}},
	}
	if err := h.c.Create(ctx, p); err != nil {
		h.t.Fatal(err)
	}
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.ContainersReady, Status: corev1.ConditionTrue},
		{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ReadinessGatesNotReady"},
	}
	if err := h.c.Status().Update(ctx, p); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) gate(cluster string, ordinal int32) (corev1.ConditionStatus, string) {
	p := &corev1.Pod{}
	if err := h.c.Get(context.Background(), client.ObjectKey{Namespace: h.ns, Name: resources.PodName(cluster, resources.RoleData, ordinal)}, p); err != nil {
		return "", err.Error()
	}
	for _, c := range p.Status.Conditions {
		if c.Type == memgraphv1.RoleAssignedGate {
			return c.Status, c.Reason
		}
	}
	return "", "no condition"
}

// TestRoleAssignedGate: data pods carry the memgraph.com/role-assigned readiness gate;
// pods that run but are not Ready because of it do not hold the registration back (it
// is what opens the gate), and the gate follows the leader's SHOW INSTANCES: True for an
// instance shown up as MAIN or replica, False for one not registered or down, and left
// alone when no leader answered.
func TestRoleAssignedGate(t *testing.T) {
	h := start(t, "mg-gate")
	const name = "gate"
	h.reg.set(func(want planner.Desired) (controller.Registration, error) {
		r, _ := healthy(want)
		r.Converged, r.DataRoles = false, map[string]string{resources.DataInstanceName(name, 0): "main"}
		return r, nil
	})
	h.create(name, 3, 2)
	testenv.Eventually(t, 10*time.Second, "StatefulSets", func() (bool, string) {
		err := h.c.Get(context.Background(), client.ObjectKey{Namespace: h.ns, Name: name + "-data"}, &appsv1.StatefulSet{})
		return err == nil, fmt.Sprint(err)
	})
	sts := h.sts(resources.StatefulSetName(name, resources.RoleData))
	if g := sts.Spec.Template.Spec.ReadinessGates; len(g) != 1 || g[0].ConditionType != memgraphv1.RoleAssignedGate {
		t.Errorf("data pods' readiness gates %v", g)
	}
	if g := h.sts(resources.StatefulSetName(name, resources.RoleCoordinator)).Spec.Template.Spec.ReadinessGates; len(g) != 0 {
		t.Errorf("coordinator pods' readiness gates %v", g)
	}
	h.podsRun(name + "-coordinator")
	h.gatedPod(name, 0)
	h.gatedPod(name, 1)
	// The data StatefulSet counts no pod ready: the gates hold them all.
	testenv.Eventually(t, 30*time.Second, "data StatefulSet status", func() (bool, string) {
		s := h.sts(name + "-data")
		s.Status = appsv1.StatefulSetStatus{ObservedGeneration: s.Generation, Replicas: 2, ReadyReplicas: 0,
			CurrentReplicas: 2, UpdatedReplicas: 2, CurrentRevision: "r1", UpdateRevision: "r1"}
		err := h.c.Status().Update(context.Background(), s)
		return err == nil, fmt.Sprint(err)
	})
	testenv.Eventually(t, 30*time.Second, "gates: data-0 True, data-1 False", func() (bool, string) {
		s0, r0 := h.gate(name, 0)
		s1, r1 := h.gate(name, 1)
		return s0 == corev1.ConditionTrue && s1 == corev1.ConditionFalse, fmt.Sprint(s0, r0, s1, r1)
	})
	if h.reg.calls() == 0 {
		t.Fatal("the registration never ran")
	}

	// No leader answered: the gates stay as they are, whatever the pass saw.
	h.reg.set(func(want planner.Desired) (controller.Registration, error) {
		return controller.Registration{Reason: memgraphv1.ReasonNoCoordinatorLeader}, nil
	})
	calls := h.reg.calls()
	testenv.Eventually(t, 30*time.Second, "two more passes", func() (bool, string) {
		return h.reg.calls() >= calls+2, fmt.Sprint(h.reg.calls() - calls)
	})
	if s0, _ := h.gate(name, 0); s0 != corev1.ConditionTrue {
		t.Errorf("data-0's gate became %s without a leader's view", s0)
	}

	// data_1 registered as a replica, data_0 down: the gates follow.
	h.reg.set(func(want planner.Desired) (controller.Registration, error) {
		r, _ := healthy(want)
		r.Converged, r.DataRoles = false, map[string]string{resources.DataInstanceName(name, 1): "replica"}
		return r, nil
	})
	testenv.Eventually(t, 30*time.Second, "gates: data-0 False, data-1 True", func() (bool, string) {
		s0, r0 := h.gate(name, 0)
		s1, r1 := h.gate(name, 1)
		return s0 == corev1.ConditionFalse && s1 == corev1.ConditionTrue, fmt.Sprint(s0, r0, s1, r1)
	})
}
