package controller_test

import (
	"fmt"
	"testing"
	"time"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/services/memgraph-operator/internal/resources"
	"github.com/opsuite/suite/shared/testenv"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestReadyMembers: status.readyCoordinators and status.readyDataInstances (the READY
// COORDINATORS and READY DATA columns) count the Ready pods of each role, 0 before the
// pods run and the StatefulSets' ready replicas after.
func TestReadyMembers(t *testing.T) {
	h := start(t, "mg-ready")
	h.create("rdy", 3, 2)
	h.waitCondition("rdy", memgraphv1.ConditionReady, metav1.ConditionFalse, memgraphv1.ReasonWorkloadsNotReady)
	if c := h.cluster("rdy"); c.Status.ReadyCoordinators != 0 || c.Status.ReadyDataInstances != 0 {
		t.Errorf("before any pod runs: ready %d coordinators, %d data instances", c.Status.ReadyCoordinators, c.Status.ReadyDataInstances)
	}
	h.podsRun(resources.StatefulSetName("rdy", resources.RoleCoordinator))
	h.podsRun(resources.StatefulSetName("rdy", resources.RoleData))
	h.waitCondition("rdy", memgraphv1.ConditionReady, metav1.ConditionTrue, memgraphv1.ReasonReady)
	testenv.Eventually(t, 10*time.Second, "the ready counts", func() (bool, string) {
		c := h.cluster("rdy")
		return c.Status.ReadyCoordinators == 3 && c.Status.ReadyDataInstances == 2,
			fmt.Sprintf("ready %d coordinators, %d data instances", c.Status.ReadyCoordinators, c.Status.ReadyDataInstances)
	})
}
