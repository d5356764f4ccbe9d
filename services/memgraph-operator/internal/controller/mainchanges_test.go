package controller_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/services/memgraph-operator/internal/controller"
	"github.com/opsuite/suite/services/memgraph-operator/internal/planner"
	"github.com/opsuite/suite/shared/metrics"
	"github.com/opsuite/suite/shared/testenv"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// TestMainChangesCounted: <operator>_main_changes_total (the chart's MemgraphFailover
// alert) is 0 while the MAIN stays, counts once when the coordinators move it to another
// data instance, and ignores a pass that finds no MAIN.
func TestMainChangesCounted(t *testing.T) {
	const operator = "mg-main-changes"
	h := start(t, operator)
	var main atomic.Int32 // the data instance holding MAIN; -1: none
	h.reg.set(func(want planner.Desired) (controller.Registration, error) {
		r, err := healthy(want)
		switch i := int(main.Load()); {
		case i < 0:
			r.Main = ""
		case i < len(want.Data):
			r.Main = want.Data[i].Name
		}
		return r, err
	})
	h.create("mc", 3, 2)
	h.podsRun("mc-coordinator")
	h.podsRun("mc-data")
	h.waitCondition("mc", memgraphv1.ConditionReady, metav1.ConditionTrue, memgraphv1.ReasonReady)

	family := metrics.Prefix(operator) + "_main_changes_total"
	changes := func() (float64, bool) {
		s, err := metrics.ObjectSeries(ctrlmetrics.Registry, h.ns, "mc")
		if err != nil {
			t.Fatal(err)
		}
		v, ok := s[family]
		return v, ok
	}
	settle := func() {
		calls := h.reg.calls()
		testenv.Eventually(t, 30*time.Second, "two more passes", func() (bool, string) { return h.reg.calls() >= calls+2, fmt.Sprint(h.reg.calls()) })
	}
	settle()
	if v, ok := changes(); !ok || v != 0 {
		t.Fatalf("%s %v (present %v) with the MAIN in place, want 0", family, v, ok)
	}

	// No MAIN for a while (the coordinators are electing one), then the other instance.
	main.Store(-1)
	h.waitCondition("mc", memgraphv1.ConditionReady, metav1.ConditionFalse, memgraphv1.ReasonNoMain)
	main.Store(1)
	h.waitCondition("mc", memgraphv1.ConditionReady, metav1.ConditionTrue, memgraphv1.ReasonReady)
	settle()
	if v, _ := changes(); v != 1 {
		t.Errorf("%s %v after the MAIN moved once, want 1", family, v)
	}
}
