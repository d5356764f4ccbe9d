package controller

import (
	"context"
	"time"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/services/memgraph-operator/internal/memgraph"
	"github.com/opsuite/suite/services/memgraph-operator/internal/planner"
	"github.com/opsuite/suite/services/memgraph-operator/internal/registration"
	"github.com/opsuite/suite/services/memgraph-operator/internal/resources"
)

// registrationTimeout bounds one registration pass, so a hanging member cannot hold the
// controller's worker.
const registrationTimeout = 60 * time.Second

// BoltRegistrar is the Registrar over Memgraph's Bolt protocol: registration.Reconcile
// against the leader the coordinators name.
type BoltRegistrar struct{ Dialer memgraph.Dialer }

// Register implements Registrar.
func (b BoltRegistrar) Register(ctx context.Context, _ *memgraphv1.MemgraphCluster, want resources.Membership) (Registration, error) {
	ctx, cancel := context.WithTimeout(ctx, registrationTimeout)
	defer cancel()
	out, err := registration.Reconcile(ctx, b.Dialer, desired(want))
	r := Registration{
		Leader: out.Leader, Main: out.Main, Converged: out.Converged, Reason: out.Reason, Message: out.Message,
		RetiredCoordinators: out.RetiredCoordinators, RetiredData: out.RetiredData, Executed: out.Executed,
	}
	if out.Lag != nil {
		r.LagRead = true
		for _, l := range out.Lag {
			if !l.CaughtUp() {
				r.Lagging = append(r.Lagging, l.Instance)
			}
		}
	}
	for _, i := range out.Instances {
		if i.IsCoordinator() {
			r.Coordinators++
		} else {
			r.DataInstances++
		}
	}
	return r, err
}

// desired is the membership in the registration's terms.
func desired(m resources.Membership) registration.Desired {
	d := registration.Desired{
		RetiringCoordinators: m.RetiringCoordinators, RetiringData: m.RetiringData,
		DrainData: m.DrainData, DrainCoordinators: m.DrainCoordinators, ReadLag: m.ReadLag,
	}
	for _, c := range m.Coordinators {
		d.Coordinators = append(d.Coordinators, planner.Coordinator{
			ID: c.ID, Name: c.Name, BoltServer: c.BoltServer, CoordinatorServer: c.CoordinatorServer, ManagementServer: c.ManagementServer,
		})
	}
	for _, x := range m.Data {
		d.Data = append(d.Data, planner.DataInstance{
			Name: x.Name, BoltServer: x.BoltServer, ManagementServer: x.ManagementServer, ReplicationServer: x.ReplicationServer,
		})
	}
	return d
}
