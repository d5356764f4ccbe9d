package executor_test

import (
	"context"
	"testing"
	"time"

	"github.com/opsuite/suite/services/memgraph-operator/internal/executor"
	"github.com/opsuite/suite/services/memgraph-operator/internal/memgraph"
	"github.com/opsuite/suite/services/memgraph-operator/internal/memgraph/memgraphtest"
	"github.com/opsuite/suite/shared/testenv"
)

// TestBootstrapOverTLS: every process serves Bolt over TLS only (--bolt-cert-file and
// --bolt-key-file, as spec.tls sets them on the pods). Passes dialing plain Bolt, or
// bolt+s trusting another CA, reach no coordinator and issue nothing; passes verifying
// with the CA that signed the certificate bootstrap 3+1 to one MAIN.
func TestBootstrapOverTLS(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	ca := testenv.NewCA(t, "memgraph-ca")
	cl := memgraphtest.NewCluster(t)
	cl.ExtraArgs = memgraphtest.BoltTLSArgs(ca.WriteFiles(t, t.TempDir(), "127.0.0.1"))
	for id := 1; id <= 3; id++ {
		cl.StartCoordinator(id)
	}
	cl.StartData("d_0")
	want := cl.Desired(nil, nil)

	for name, o := range map[string]memgraph.Options{
		"plain Bolt": {Timeout: 3 * time.Second},
		"another CA": {Timeout: 3 * time.Second, CA: testenv.NewCA(t, "other-ca").PEM},
	} {
		out, err := executor.Reconcile(ctx, memgraph.NewDialer(o), want)
		if out.Converged || len(out.Executed) > 0 || out.Reason != executor.ReasonCoordinatorUnreachable {
			t.Errorf("%s: converged %v, ran %q, reason %s (err %v); want nothing run, CoordinatorUnreachable", name, out.Converged, out.Executed, out.Reason, err)
		}
	}

	verified := memgraph.NewDialer(memgraph.Options{Timeout: 3 * time.Second, CA: ca.PEM})
	outs := passUntilAs(t, ctx, verified, want, func(o executor.Outcome) bool { return o.Converged })
	assertMembership(t, last(outs), []string{"coordinator_1", "coordinator_2", "coordinator_3"}, []string{"d_0"})
	if last(outs).Main != "d_0" {
		t.Errorf("MAIN %q, want d_0", last(outs).Main)
	}
	assertOneMainAtATime(t, cl)
	t.Logf("bootstrap over TLS: %d passes", len(outs))
}
