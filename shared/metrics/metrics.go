// Package metrics exports the state of an operator's objects the way kube-state-metrics
// does, on controller-runtime's registry (the manager's /metrics): one gauge
// <operator>_<kind>_state{namespace,name,state} per object and state, 1 for the current
// state and 0 for every other, per-object gauges and counters of the operations that
// matter (<operator>_<operation>_total), and every series of an object deleted when the
// object goes. One naming scheme for every operator: the prefix is the operator's name
// (valkey-operator -> valkey_operator).
package metrics

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Label names of the per-object series.
const (
	LabelNamespace = "namespace"
	LabelName      = "name"
	LabelState     = "state"
)

// Prefix turns an operator's name into its metrics prefix: vald-operator -> vald_operator.
func Prefix(operator string) string {
	return strings.NewReplacer("-", "_", ".", "_").Replace(operator)
}

// Kind describes one kind's per-object series.
type Kind struct {
	// Operator is the operator's name, the prefix of every series (valkey-operator).
	Operator string
	// Kind is the kind as its CRD names it (ValkeyCluster), for the help texts.
	Kind string
	// Name is the kind's word in the series names: cluster gives
	// valkey_operator_cluster_state and valkey_operator_cluster_<gauge>.
	Name string
	// States are every value of the kind's status.state; each object has a series for
	// each, so an alert selects state="Degraded" without absent().
	States []string
	// Gauges are per-object numbers: <prefix>_<Name>_<gauge>{namespace,name}.
	Gauges []Series
	// Counters count operations on an object: <prefix>_<counter>_total{namespace,name},
	// created at zero with the object's state series.
	Counters []Series
}

// Series names one gauge or counter of a Kind and says what it measures.
type Series struct {
	Name, Help string
}

// Objects are the series of one kind's objects.
type Objects struct {
	state    *stateSeries
	gauges   map[string]*prometheus.GaugeVec
	counters map[string]*prometheus.CounterVec
}

// stateSeries is the <prefix>_<kind>_state family. It keeps each object's current state
// and makes the series (one per listed state, 1 for the current one, and the current one's
// own when the list lacks it) at each scrape: a gauge per object and state costs about 600
// bytes, 2.5 MB for 1,000 objects of four states, where a state per object costs a map
// entry.
type stateSeries struct {
	desc   *prometheus.Desc
	states []string

	mu      sync.RWMutex
	objects map[types.NamespacedName]string
}

func (s *stateSeries) Describe(ch chan<- *prometheus.Desc) { ch <- s.desc }

func (s *stateSeries) Collect(ch chan<- prometheus.Metric) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for key, current := range s.objects {
		for _, state := range s.states {
			v := 0.0
			if state == current {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(s.desc, prometheus.GaugeValue, v, key.Namespace, key.Name, state)
		}
		if current != "" && !slices.Contains(s.states, current) {
			ch <- prometheus.MustNewConstMetric(s.desc, prometheus.GaugeValue, 1, key.Namespace, key.Name, current)
		}
	}
}

// For registers k's series on controller-runtime's registry.
func For(k Kind) (*Objects, error) { return Register(ctrlmetrics.Registry, k) }

// Register registers k's series on reg. Series registered before with the same
// description (another manager of the same process, as tests start) are shared.
func Register(reg prometheus.Registerer, k Kind) (*Objects, error) {
	if k.Operator == "" || k.Name == "" || len(k.States) == 0 {
		return nil, errors.New("metrics: a kind needs an operator, a name and its states")
	}
	prefix := Prefix(k.Operator)
	obj := []string{LabelNamespace, LabelName}
	o := &Objects{
		gauges:   map[string]*prometheus.GaugeVec{},
		counters: map[string]*prometheus.CounterVec{},
	}
	var err error
	o.state, err = register(reg, &stateSeries{
		desc: prometheus.NewDesc(prefix+"_"+k.Name+"_state",
			fmt.Sprintf("1 for each %s's current status.state, 0 for its other states (%s).", k.Kind, strings.Join(k.States, ", ")),
			append(obj, LabelState), nil),
		states:  slices.Clone(k.States),
		objects: map[types.NamespacedName]string{},
	})
	if err != nil {
		return nil, err
	}
	for _, g := range k.Gauges {
		if o.gauges[g.Name], err = register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: prefix + "_" + k.Name + "_" + g.Name, Help: g.Help,
		}, obj)); err != nil {
			return nil, err
		}
	}
	for _, c := range k.Counters {
		if o.counters[c.Name], err = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: prefix + "_" + c.Name + "_total", Help: c.Help,
		}, obj)); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// Collector registers c on reg, or returns the collector registered before with the same
// description (another manager of the same process).
func Collector[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	return register(reg, c)
}

func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
		return c, fmt.Errorf("metrics: %T registered before as %T", c, are.ExistingCollector)
	}
	return c, err
}

// SetState sets the object's state series: 1 for state, 0 for the others. The first call
// for an object creates its counters at zero. An empty state (none written yet) sets
// every state to 0.
func (o *Objects) SetState(namespace, name, state string) {
	key := types.NamespacedName{Namespace: namespace, Name: name}
	o.state.mu.Lock()
	prev, known := o.state.objects[key]
	if !known || prev != state {
		o.state.objects[key] = strings.Clone(state)
	}
	o.state.mu.Unlock()
	if known {
		return // its counters exist
	}
	for _, c := range o.counters {
		c.WithLabelValues(namespace, name)
	}
}

// Set sets the object's gauge; it panics on a gauge the Kind does not name, as
// prometheus does on wrong labels (a programming error the operator's tests find).
func (o *Objects) Set(namespace, name, gauge string, v float64) {
	g, ok := o.gauges[gauge]
	if !ok {
		panic("metrics: no gauge " + gauge)
	}
	g.WithLabelValues(namespace, name).Set(v)
}

// Add counts n operations on the object; it panics on a counter the Kind does not name.
func (o *Objects) Add(namespace, name, counter string, n int) {
	c, ok := o.counters[counter]
	if !ok {
		panic("metrics: no counter " + counter)
	}
	if n > 0 {
		c.WithLabelValues(namespace, name).Add(float64(n))
	}
}

// Forget deletes every series of the object (it is gone): call it from the kit's
// reconciler.Config.OnGone.
func (o *Objects) Forget(namespace, name string) {
	l := prometheus.Labels{LabelNamespace: namespace, LabelName: name}
	o.state.mu.Lock()
	delete(o.state.objects, types.NamespacedName{Namespace: namespace, Name: name})
	o.state.mu.Unlock()
	for _, g := range o.gauges {
		g.DeletePartialMatch(l)
	}
	for _, c := range o.counters {
		c.DeletePartialMatch(l)
	}
}

// ObjectSeries reads from g the series of the object namespace/name, for tests and
// diagnostics: the value by family name, a state series keyed as name{state="Ready"}.
func ObjectSeries(g prometheus.Gatherer, namespace, name string) (map[string]float64, error) {
	fams, err := g.Gather()
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if l[LabelNamespace] != namespace || l[LabelName] != name {
				continue
			}
			key := f.GetName()
			if s, ok := l[LabelState]; ok {
				key += fmt.Sprintf("{state=%q}", s)
			}
			switch {
			case m.GetGauge() != nil:
				out[key] = m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				out[key] = m.GetCounter().GetValue()
			}
		}
	}
	return out, nil
}
