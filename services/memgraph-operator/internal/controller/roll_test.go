package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
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

// TestRollingUpdate: after a template change the operator replaces one pod at a time on a
// converged cluster (data replicas, coordinator followers, the leader last) and holds the
// MAIN, saying so in Updated.
func TestRollingUpdate(t *testing.T) {
	h := start(t, "mg-roll")
	ctx := context.Background()
	h.create("u", 3, 2) // healthy: coordinator_1 leads, u_data_0 is MAIN
	// Pods at revision r1 first, then the StatefulSets' status at r1 (podsRun).
	testenv.Eventually(t, 10*time.Second, "StatefulSets", func() (bool, string) {
		err := h.c.Get(ctx, client.ObjectKey{Namespace: h.ns, Name: "u-data"}, &appsv1.StatefulSet{})
		return err == nil, fmt.Sprint(err)
	})
	for id := int32(1); id <= 3; id++ {
		h.pod("u", resources.RoleCoordinator, id, "r1")
	}
	main := h.pod("u", resources.RoleData, 0, "r1")
	h.pod("u", resources.RoleData, 1, "r1")
	h.podsRun("u-coordinator")
	h.podsRun("u-data")
	h.waitCondition("u", memgraphv1.ConditionUpdated, metav1.ConditionTrue, memgraphv1.ReasonUpdated)
	h.waitCondition("u", memgraphv1.ConditionReady, metav1.ConditionTrue, memgraphv1.ReasonReady)

	h.newRevision("u-data", "r2")
	h.newRevision("u-coordinator", "r2")
	for _, want := range []struct {
		r       resources.Role
		ordinal int32
		rev     string
	}{{resources.RoleData, 1, "r2"}, {resources.RoleCoordinator, 2, "r2"}, {resources.RoleCoordinator, 3, "r2"}, {resources.RoleCoordinator, 1, "r2"}} {
		name := resources.PodName("u", want.r, want.ordinal)
		testenv.Eventually(t, 20*time.Second, "pod "+name+" deleted", func() (bool, string) {
			err := h.c.Get(ctx, client.ObjectKey{Namespace: h.ns, Name: name}, &corev1.Pod{})
			return apierrors.IsNotFound(err), fmt.Sprint(err)
		})
		var pods corev1.PodList
		if err := h.c.List(ctx, &pods, client.InNamespace(h.ns)); err != nil {
			t.Fatal(err)
		}
		if len(pods.Items) != 4 {
			t.Fatalf("after %s went, %d pods are left: more than one replaced at a time", name, len(pods.Items))
		}
		h.pod("u", want.r, want.ordinal, want.rev)
	}
	// Everything but the MAIN runs the new template; the MAIN stays and Updated says why.
	c := h.waitCondition("u", memgraphv1.ConditionUpdated, metav1.ConditionFalse, memgraphv1.ReasonUpdatePending)
	testenv.Eventually(t, 10*time.Second, "Updated naming the held MAIN", func() (bool, string) {
		c = h.cluster("u")
		msg := meta.FindStatusCondition(c.Status.Conditions, memgraphv1.ConditionUpdated).Message
		return strings.Contains(msg, "u-data-0 is held"), msg
	})
	time.Sleep(time.Second)
	p := &corev1.Pod{}
	if err := h.c.Get(ctx, client.ObjectKeyFromObject(main), p); err != nil || p.UID != main.UID {
		t.Errorf("the MAIN's pod was replaced (err %v)", err)
	}
}
