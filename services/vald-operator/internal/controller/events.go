package controller

import (
	valdv1 "github.com/opsuite/suite/api/vald/v1"
	"github.com/opsuite/suite/services/vald-operator/internal/lifecycle"
	corev1 "k8s.io/api/core/v1"
)

// announce records an event for every phase transition of a pass whose status was
// written; the event reason is the condition's reason.
func (r *Reconciler) announce(vor *valdv1.ValdOperatorRelease, out lifecycle.Outcome) {
	if r.Recorder == nil {
		return
	}
	for _, t := range out.Transitions {
		kind := corev1.EventTypeNormal
		if t.After.Reason == valdv1.ReasonFailed {
			kind = corev1.EventTypeWarning
		}
		r.Recorder.Eventf(vor, nil, kind, t.After.Reason, t.Type, "%s: %s", t.Type, t.After.Message)
	}
}
