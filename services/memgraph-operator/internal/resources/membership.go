package resources

import (
	"fmt"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/services/memgraph-operator/internal/planner"
)

// DesiredMembership is what the registration pass is asked to reach (the planner's
// Desired): every pod the StatefulSets run, ids 1..live for coordinators (pods
// <cluster>-coordinator-<id>) and ordinals 0..live-1 for data instances, and which of them
// are retiring. It lists the members of c when the coordinator StatefulSet runs
// liveCoordinators pods and the data StatefulSet liveData. The retiring set is derived
// from the live StatefulSets, which the operator itself sized: a StatefulSet sheds its
// highest ordinals, so the members above the declared counts are exactly the ones that go,
// and an instance a human registered by hand is never among them.
func DesiredMembership(c *memgraphv1.MemgraphCluster, liveCoordinators, liveData int32) planner.Desired {
	p := Ports(c)
	var m planner.Desired
	addr := func(r Role, ordinal, port int32) string {
		return fmt.Sprintf("%s:%d", PodFQDN(c, r, ordinal), port)
	}
	for i := int32(0); i < liveCoordinators; i++ {
		ordinal := FirstCoordinatorOrdinal + i
		id := int(ordinal)
		m.Coordinators = append(m.Coordinators, planner.Coordinator{
			ID: id, Name: CoordinatorName(id),
			BoltServer:        addr(RoleCoordinator, ordinal, p.Bolt),
			CoordinatorServer: addr(RoleCoordinator, ordinal, p.Coordinator),
			ManagementServer:  addr(RoleCoordinator, ordinal, p.Management),
		})
		if i >= Coordinators(c) {
			m.RetiringCoordinators = append(m.RetiringCoordinators, id)
		}
	}
	for ordinal := int32(0); ordinal < liveData; ordinal++ {
		d := planner.DataInstance{
			Name:              DataInstanceName(c.Name, ordinal),
			BoltServer:        addr(RoleData, ordinal, p.Bolt),
			ManagementServer:  addr(RoleData, ordinal, p.Management),
			ReplicationServer: addr(RoleData, ordinal, p.Replication),
			Mode:              string(c.Spec.Replication.ModeOf(ordinal)),
		}
		m.Data = append(m.Data, d)
		if ordinal >= DataInstances(c) {
			m.RetiringData = append(m.RetiringData, d.Name)
		}
	}
	for _, st := range c.Spec.CoordinatorSettings.Settings() {
		m.Settings = append(m.Settings, planner.Setting{Name: st.Name, Value: st.Value})
	}
	return m
}
