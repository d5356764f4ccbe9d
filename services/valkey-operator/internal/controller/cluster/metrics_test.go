package cluster_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/opsuite/suite/shared/metrics"
	"github.com/opsuite/suite/shared/testenv"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// series are the cluster's valkey_operator_* series on controller-runtime's registry.
func series(t testing.TB, ns, name string) map[string]float64 {
	t.Helper()
	s, err := metrics.ObjectSeries(ctrlmetrics.Registry, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// wantSeries checks the named series of the cluster hold want (eventually: the pass that
// wrote the status sets them just after).
func wantSeries(t *testing.T, ns, name string, want map[string]float64) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, fmt.Sprintf("series of %s/%s", ns, name), func() (bool, string) {
		got := series(t, ns, name)
		for k, v := range want {
			if g, ok := got[k]; !ok || g != v {
				return false, fmt.Sprintf("%v", got)
			}
		}
		return true, ""
	})
}

func stateSeries(state string) string {
	return fmt.Sprintf("valkey_operator_cluster_state{state=%q}", state)
}

// wantGone waits until the deleted cluster has no series left.
func wantGone(t *testing.T, ns, name string) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, fmt.Sprintf("series of deleted %s/%s gone", ns, name), func() (bool, string) {
		got := series(t, ns, name)
		return len(got) == 0, fmt.Sprint(got)
	})
}
