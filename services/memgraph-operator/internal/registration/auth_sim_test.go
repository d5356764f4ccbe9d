package registration_test

import (
	"context"
	"testing"
	"time"

	"github.com/opsuite/suite/services/memgraph-operator/internal/memgraph"
	"github.com/opsuite/suite/services/memgraph-operator/internal/memgraph/memgraphtest"
	"github.com/opsuite/suite/services/memgraph-operator/internal/registration"
)

// TestBootstrapWithAuth: every process enforces login (MEMGRAPH_USER/MEMGRAPH_PASSWORD, as
// spec.auth sets them on the pods); a pass without credentials registers nothing, and
// passes dialing as the admin user bootstrap 3+1 to one MAIN.
func TestBootstrapWithAuth(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cl := memgraphtest.NewCluster(t)
	cl.ExtraEnv = []string{"MEMGRAPH_USER=admin", "MEMGRAPH_PASSWORD=s3cret"}
	for id := 1; id <= 3; id++ {
		cl.StartCoordinator(id)
	}
	cl.StartData("d_0")
	want := cl.Desired(nil, nil)

	anon := memgraph.NewDialer(memgraph.Options{Timeout: 3 * time.Second})
	out, err := registration.Reconcile(ctx, anon, want)
	if out.Converged || len(out.Executed) > 0 {
		t.Fatalf("a pass without credentials converged or ran %q (err %v)", out.Executed, err)
	}
	t.Logf("without credentials: %s %q, err %v", out.Reason, out.Message, err)

	admin := memgraph.NewDialer(memgraph.Options{Username: "admin", Password: "s3cret", Timeout: 3 * time.Second})
	outs := passUntilAs(t, ctx, admin, want, func(o registration.Outcome) bool { return o.Converged })
	assertMembership(t, last(outs), []string{"coordinator_1", "coordinator_2", "coordinator_3"}, []string{"d_0"})
	if last(outs).Main != "d_0" {
		t.Errorf("MAIN %q, want d_0", last(outs).Main)
	}
	assertOneMainAtATime(t, cl)
}
