package resources

import (
	"fmt"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
)

// Coordinator is one coordinator as ADD COORDINATOR registers it.
type Coordinator struct {
	ID                                                    int
	Name, BoltServer, CoordinatorServer, ManagementServer string
}

// DataInstance is one data instance as REGISTER INSTANCE registers it.
type DataInstance struct {
	Ordinal                                               int32
	Name, BoltServer, ManagementServer, ReplicationServer string
}

// Membership is what the registration pass is asked to reach: every pod the StatefulSets
// run, and which of them are on their way out.
type Membership struct {
	// Coordinators are ids 1..live (pods <cluster>-coordinator-<id>), retiring ones included.
	Coordinators []Coordinator
	// Data are ordinals 0..live-1, retiring ones included.
	Data []DataInstance
	// RetiringCoordinators are the ids above spec.coordinators still in the StatefulSet.
	RetiringCoordinators []int
	// RetiringData are the names of the ordinals at or above spec.dataInstances still in
	// the StatefulSet.
	RetiringData []string

	// The rolling update's asks (set by the controller, not by DesiredMembership):
	// DrainData names the MAIN whose pod is next to restart (MAIN is handed over to a
	// caught-up replica, the instance stays registered), DrainCoordinators the leader whose
	// pod is next (it yields), and ReadLag asks for SHOW REPLICATION LAG so a pod is
	// restarted only when every replica has caught up.
	DrainData         []string
	DrainCoordinators []int
	ReadLag           bool
}

// DesiredMembership lists the members of c when the coordinator StatefulSet runs
// liveCoordinators pods and the data StatefulSet liveData. The retiring set is derived
// from the live StatefulSets, which the operator itself sized: a StatefulSet sheds its
// highest ordinals, so the members above the declared counts are exactly the ones that go,
// and an instance a human registered by hand is never among them.
func DesiredMembership(c *memgraphv1.MemgraphCluster, liveCoordinators, liveData int32) Membership {
	p := Ports(c)
	var m Membership
	addr := func(r Role, ordinal, port int32) string {
		return fmt.Sprintf("%s:%d", PodFQDN(c, r, ordinal), port)
	}
	for i := int32(0); i < liveCoordinators; i++ {
		ordinal := FirstCoordinatorOrdinal + i
		id := int(ordinal)
		m.Coordinators = append(m.Coordinators, Coordinator{
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
		d := DataInstance{
			Ordinal: ordinal, Name: DataInstanceName(c.Name, ordinal),
			BoltServer:        addr(RoleData, ordinal, p.Bolt),
			ManagementServer:  addr(RoleData, ordinal, p.Management),
			ReplicationServer: addr(RoleData, ordinal, p.Replication),
		}
		m.Data = append(m.Data, d)
		if ordinal >= DataInstances(c) {
			m.RetiringData = append(m.RetiringData, d.Name)
		}
	}
	return m
}
