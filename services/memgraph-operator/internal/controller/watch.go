package controller

import (
	"context"
	"sync"
	"time"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/services/memgraph-operator/internal/planner"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// failoverWatch reads, every Config.Watch, the coordinators' view of each steady cluster
// (the last pass registered it, found it converged and waits for the resync) and wakes the
// controller when that view is no longer the one the pass saw: the coordinators promoted
// another MAIN, a member went down or came back, leadership moved. None of these makes a
// Kubernetes event when no pod changes (a MAIN cut off from the coordinators by the
// network), so without the watch the status would wait for the resync.
//
// What it costs: per steady cluster, one SHOW INSTANCES per coordinator and one
// connection per data instance (whether the operator still reaches it) every Watch; no
// API-server call. A member that stops answering the operator changes the view too. A change wakes one pass, which either finds the cluster steady again
// (and records the new view) or takes over at its own Poll until it is; a view that keeps
// changing wakes at most one pass per Watch. Clusters that are not steady are not
// watched: their passes already come every Poll.
type failoverWatch struct {
	observer Observer
	every    time.Duration
	wake     chan event.GenericEvent

	mu      sync.Mutex
	targets map[types.NamespacedName]*watchTarget
}

// watchTarget is how to observe one cluster, as its last steady pass dialled it.
type watchTarget struct {
	cluster *memgraphv1.MemgraphCluster // namespace and name only, for the wake-up
	creds   Credentials
	tls     BoltTLS
	want    planner.Desired
	// view is the last view seen (by the pass, or by the watch once it woke a pass).
	view string
}

func newFailoverWatch(cfg Config) *failoverWatch {
	w := &failoverWatch{every: cfg.Watch, wake: make(chan event.GenericEvent), targets: map[types.NamespacedName]*watchTarget{}}
	if o, ok := cfg.Registrar.(Observer); ok {
		w.observer = o
	}
	return w
}

// track watches key with what its steady pass saw; a later call replaces it.
func (w *failoverWatch) track(key types.NamespacedName, t watchTarget) {
	if w.observer == nil || t.view == "" {
		w.forget(key)
		return
	}
	t.cluster = &memgraphv1.MemgraphCluster{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.targets[key] = &t
}

// forget stops watching key (not steady, or gone).
func (w *failoverWatch) forget(key types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.targets, key)
}

// Start runs until ctx ends (a manager Runnable; it needs leader election, as the
// controller does).
func (w *failoverWatch) Start(ctx context.Context) error {
	tick := time.NewTicker(w.every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			w.sweep(ctx)
		}
	}
}

// sweep observes every watched cluster at once and wakes those whose view changed.
func (w *failoverWatch) sweep(ctx context.Context) {
	w.mu.Lock()
	targets := make(map[types.NamespacedName]*watchTarget, len(w.targets))
	for k, t := range w.targets {
		targets[k] = t
	}
	w.mu.Unlock()
	var wg sync.WaitGroup
	for key, t := range targets {
		wg.Go(func() {
			reg, err := w.observer.Observe(WithBoltTLS(ctx, t.tls), t.cluster, t.creds, t.want)
			if err != nil {
				log.FromContext(ctx).V(1).Info("Failed to observe MemgraphCluster", "memgraphCluster", key, "error", err.Error())
				return
			}
			if !w.changed(key, t, reg.View) {
				return
			}
			select {
			case w.wake <- event.GenericEvent{Object: t.cluster}:
			case <-ctx.Done():
			}
		})
	}
	wg.Wait()
}

// changed records view for key's target t and reports whether it differs from the last
// one seen; false when t was replaced or forgotten meanwhile (a pass ran).
func (w *failoverWatch) changed(key types.NamespacedName, t *watchTarget, view string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.targets[key] != t || t.view == view {
		return false
	}
	t.view = view
	return true
}
