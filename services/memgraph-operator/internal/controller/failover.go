package controller

import (
	"slices"
	"sync"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/services/memgraph-operator/internal/memgraph"
	"github.com/opsuite/suite/services/memgraph-operator/internal/planner"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// noteMain compares the MAIN this pass wrote into status with the last one seen. A move
// counts in <operator>_main_changes_total; one the operator did not ask for (no SET
// INSTANCE TO MAIN of its own named the new MAIN) is the coordinators' failover: it sets
// status.lastFailoverTime, counts in <operator>_failovers_total and makes one Warning
// event naming both instances. before is status.main as the pass found it, taken when the
// operator has seen no MAIN of the cluster yet (it restarted, or another replica led).
func (p *pass) noteMain(key types.NamespacedName, before string) {
	c := p.c
	from, ours := p.ctl.mains.moved(key, c.Status.Main, before)
	if from == "" {
		return
	}
	p.ctl.metrics.Add(c.Namespace, c.Name, counterMainChanges, 1)
	if ours {
		return
	}
	c.Status.LastFailoverTime = &metav1.Time{Time: p.now}
	p.ctl.metrics.Add(c.Namespace, c.Name, counterFailovers, 1)
	p.ctl.recorder.Eventf(c, nil, corev1.EventTypeWarning, memgraphv1.EventReasonFailover, memgraphv1.EventReasonFailover,
		"The coordinators promoted %s to MAIN in place of %s", c.Status.Main, from)
}

// mainTracker remembers each cluster's MAIN as the last pass saw it, and the instance
// the operator itself last promoted, in memory.
type mainTracker struct {
	mu   sync.Mutex
	last map[types.NamespacedName]string
	ours map[types.NamespacedName]string
}

func newMainTracker() *mainTracker {
	return &mainTracker{last: map[types.NamespacedName]string{}, ours: map[types.NamespacedName]string{}}
}

// promoted records the data instance a SET INSTANCE TO MAIN among executed named: the
// MAIN's next move there is the operator's switchover, not a failover.
func (t *mainTracker) promoted(key types.NamespacedName, want planner.Desired, executed []string) {
	for _, d := range want.Data {
		if slices.Contains(executed, memgraph.SetInstanceToMain(d.Name)) {
			t.mu.Lock()
			t.ours[key] = d.Name
			t.mu.Unlock()
		}
	}
}

// moved records main as key's MAIN and returns the one it replaced ("" when it replaced
// none) and whether the operator had promoted main. A pass that finds no MAIN keeps the
// last one: MAIN lost and then back on the same instance is no move. seed stands for the
// last MAIN when none is remembered.
func (t *mainTracker) moved(key types.NamespacedName, main, seed string) (from string, ours bool) {
	if main == "" {
		return "", false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	prev, ok := t.last[key]
	if !ok {
		prev = seed
	}
	t.last[key] = main
	if prev == "" || prev == main {
		return "", false
	}
	ours = t.ours[key] == main
	delete(t.ours, key)
	return prev, ours
}

func (t *mainTracker) forget(key types.NamespacedName) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.last, key)
	delete(t.ours, key)
}
