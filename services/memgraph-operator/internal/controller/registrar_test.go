package controller

import (
	"reflect"
	"testing"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/services/memgraph-operator/internal/planner"
	"github.com/opsuite/suite/services/memgraph-operator/internal/resources"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestDesiredCarriesEveryAddress: the registration is asked for exactly the members and
// addresses the builders derive, the retiring ones named as such.
func TestDesiredCarriesEveryAddress(t *testing.T) {
	c := &memgraphv1.MemgraphCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "db"},
		Spec: memgraphv1.MemgraphClusterSpec{Coordinators: 3, DataInstances: 1}}
	m := resources.DesiredMembership(c, 5, 2)
	d := desired(m)
	if len(d.Coordinators) != 5 || len(d.Data) != 2 {
		t.Fatalf("desired %+v", d)
	}
	wantC := planner.Coordinator{ID: 5, Name: "coordinator_5",
		BoltServer:        "demo-coordinator-5.demo-coordinators.db.svc.cluster.local:7687",
		CoordinatorServer: "demo-coordinator-5.demo-coordinators.db.svc.cluster.local:12000",
		ManagementServer:  "demo-coordinator-5.demo-coordinators.db.svc.cluster.local:10000"}
	if d.Coordinators[4] != wantC {
		t.Errorf("coordinator %+v, want %+v", d.Coordinators[4], wantC)
	}
	wantD := planner.DataInstance{Name: "demo_data_1",
		BoltServer:        "demo-data-1.demo-data.db.svc.cluster.local:7687",
		ManagementServer:  "demo-data-1.demo-data.db.svc.cluster.local:10000",
		ReplicationServer: "demo-data-1.demo-data.db.svc.cluster.local:20000"}
	if d.Data[1] != wantD {
		t.Errorf("data %+v, want %+v", d.Data[1], wantD)
	}
	if !reflect.DeepEqual(d.RetiringCoordinators, []int{4, 5}) || !reflect.DeepEqual(d.RetiringData, []string{"demo_data_1"}) {
		t.Errorf("retiring %v %v", d.RetiringCoordinators, d.RetiringData)
	}
}
