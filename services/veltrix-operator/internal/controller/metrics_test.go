package controller_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/opsuite/suite/shared/metrics"
	"github.com/opsuite/suite/shared/testenv"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// stateSeries names the cluster_state series of state.
func stateSeries(state any) string {
	return fmt.Sprintf("veltrix_operator_cluster_state{state=%q}", fmt.Sprint(state))
}

// wantSeries waits until the cluster's veltrix_operator_* series hold want (the pass that
// wrote the status sets them just after); with want empty, until it has none.
func wantSeries(t *testing.T, ns, name string, want map[string]float64) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, fmt.Sprintf("series of %s/%s", ns, name), func() (bool, string) {
		got, err := metrics.ObjectSeries(ctrlmetrics.Registry, ns, name)
		if err != nil {
			return false, err.Error()
		}
		if len(want) == 0 {
			return len(got) == 0, fmt.Sprint(got)
		}
		for k, v := range want {
			if g, ok := got[k]; !ok || g != v {
				return false, fmt.Sprint(got)
			}
		}
		return true, ""
	})
}
