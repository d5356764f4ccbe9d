package controller

import (
	"github.com/opsuite/suite/shared/metrics"
	"github.com/prometheus/client_golang/prometheus/testutil"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// StateSeries counts the <operator>_cluster_state series on controller-runtime's registry.
func StateSeries(operator string) int {
	n, _ := testutil.GatherAndCount(ctrlmetrics.Registry, metrics.Prefix(operator)+"_cluster_state")
	return n
}

// Commands sums <operator>_registrations_total on controller-runtime's registry.
func Commands(operator string) float64 {
	fams, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		return -1
	}
	var sum float64
	for _, f := range fams {
		if f.GetName() == metrics.Prefix(operator)+"_registrations_total" {
			for _, m := range f.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// ObjectSeries returns, for the cluster namespace/name, the state whose
// <operator>_cluster_state series is 1 and how many series of the operator's families
// (state and registrations) carry its labels.
func ObjectSeries(operator, namespace, name string) (state string, series int) {
	fams, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		return "", -1
	}
	prefix := metrics.Prefix(operator)
	for _, f := range fams {
		if f.GetName() != prefix+"_cluster_state" && f.GetName() != prefix+"_registrations_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if l[metrics.LabelNamespace] != namespace || l[metrics.LabelName] != name {
				continue
			}
			series++
			if m.GetGauge().GetValue() == 1 {
				state = l[metrics.LabelState]
			}
		}
	}
	return state, series
}

// StateCount is how many states have a series per cluster.
func StateCount() int { return len(states) }
