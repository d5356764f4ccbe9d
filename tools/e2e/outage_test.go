package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/opsuite/suite/tools/internal/localcluster"
)

// controlPlaneOutage stops the local cluster's kube-apiserver and etcd for d and returns
// once the API server is ready again (issue "Faults across the suite", item 3). Every
// operator loses its leader lease meanwhile and restarts: what it was doing must resume
// from what it finds.
func controlPlaneOutage(ctx context.Context, t *testing.T, d time.Duration) error {
	t.Helper()
	if env.local == nil {
		t.Fatalf("a control-plane outage needs the local cluster this suite starts, not E2E_KUBECONFIG=%s", env.kubeconfig)
	}
	begin := time.Now()
	unreachable, err := localcluster.ControlPlaneOutage(ctx, *env.local, d)
	if err != nil {
		return err
	}
	t.Logf("control plane stopped for %s: the API server was unreachable for %s (%s in all)", d, unreachable.Round(100*time.Millisecond), since(begin))
	return nil
}
