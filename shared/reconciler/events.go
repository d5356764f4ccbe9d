package reconciler

import (
	"context"
	"sync"

	"github.com/opsuite/suite/shared/conditions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
)

// Event is one event about the object of a pass, recorded through Config.Recorder.
type Event struct {
	// Related is another object the event concerns (a child); optional.
	Related runtime.Object
	// Type is corev1.EventTypeNormal or corev1.EventTypeWarning.
	Type   string
	Reason string
	// Action is what was done or failed; the reason when empty.
	Action string
	Note   string
}

// Transition is the condition state an event announces: condition Type entered Status
// with Reason.
type Transition struct {
	Type   string
	Status metav1.ConditionStatus
	Reason string
}

// PassEvents are the events of one pass, for operators whose events are a list of their
// own (Config.OwnEvents) rather than one per condition transition. Run gets them with
// EventsOf.
type PassEvents struct {
	rec events.EventRecorder
	obj runtime.Object

	mu      sync.Mutex
	pending []pendingEvent
}

type pendingEvent struct {
	into Transition
	ev   Event
}

type passEventsKey struct{}

// EventsOf returns the events of the pass ctx was given to; outside a pass, or without a
// Recorder, they record nothing.
func EventsOf(ctx context.Context) *PassEvents {
	if e, ok := ctx.Value(passEventsKey{}).(*PassEvents); ok {
		return e
	}
	return &PassEvents{}
}

func withEvents(ctx context.Context, e *PassEvents) context.Context {
	return context.WithValue(ctx, passEventsKey{}, e)
}

// Record records ev at once: an action the pass took (a child written, a command sent)
// happened whatever becomes of the status write.
func (e *PassEvents) Record(ev Event) {
	if e.rec == nil {
		return
	}
	action := ev.Action
	if action == "" {
		action = ev.Reason
	}
	e.rec.Eventf(e.obj, ev.Related, ev.Type, ev.Reason, action, "%s", ev.Note)
}

// OnTransition records ev after the pass, when its status write succeeded and moved
// condition into.Type into into's status and reason: the condition was absent, or had
// another status or reason, in the status last written (the kit's memory of it while the
// cache lags). A pass that writes no status, or fails to, records nothing; the next
// pass judges again against what is then the last write, so a state is announced once
// however often passes run, and never before the status says it.
func (e *PassEvents) OnTransition(into Transition, ev Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.pending = append(e.pending, pendingEvent{into: into, ev: ev})
}

// flush records the pending events whose transition before -> after carries, in order.
func (e *PassEvents) flush(before, after []metav1.Condition) {
	e.mu.Lock()
	pending := e.pending
	e.pending = nil
	e.mu.Unlock()
	for _, p := range pending {
		if entered(before, after, p.into) {
			e.Record(p.ev)
		}
	}
}

// entered: after holds condition t.Type with t's status and reason, and before did not.
func entered(before, after []metav1.Condition, t Transition) bool {
	now := conditions.Get(after, t.Type)
	if now == nil || now.Status != t.Status || now.Reason != t.Reason {
		return false
	}
	prev := conditions.Get(before, t.Type)
	return prev == nil || prev.Status != t.Status || prev.Reason != t.Reason
}
