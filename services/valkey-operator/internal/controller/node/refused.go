package node

import (
	"errors"
	"net/http"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	"github.com/opsuite/suite/shared/conditions"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// refusal is the API server's message when err is its refusal of a write: a request it
// judged and turned down (invalid object, admission, quota, permissions), which the same
// write cannot get past by retrying. Other errors (timeouts, conflicts, an unreachable
// server) are not refusals.
func refusal(err error) (string, bool) {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return "", false
	}
	switch st.Status().Code {
	case http.StatusBadRequest, http.StatusForbidden, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity:
		return st.Status().Message, true
	}
	return "", false
}

// writeRefused puts a refused write of the node's workload or claim (reason
// NodeReasonWorkloadRefused or NodeReasonPersistentVolumeClaimRefused) in the node's
// status and, when it is news (another reason or message than the Ready condition had),
// in a Warning event of that reason: before, the API server's answer reached only the
// operator's log. A refused resize of a live claim is PersistentVolumeClaimSizeReady's
// (pvcSize), with its event through warnNews too.
func (r *Reconciler) writeRefused(p *pass, reason, msg string) {
	n := p.n
	ready := cond(valkeyv1.NodeConditionReady, false, reason, msg)
	r.warnNews(n, ready)
	if reason == valkeyv1.NodeReasonPersistentVolumeClaimRefused {
		p.set(cond(valkeyv1.NodeConditionPersistentVolumeClaimReady, false, reason, msg))
	}
	p.set(ready)
	n.Status.Ready = false
}

// warnNews records a Warning event of c's reason and message about the node, unless the
// node's condition of c's type already says so (the event of an earlier pass). Called
// before c is set.
func (r *Reconciler) warnNews(n *valkeyv1.ValkeyNode, c metav1.Condition) {
	if prev := conditions.Get(n.Status.Conditions, c.Type); prev != nil && prev.Reason == c.Reason && prev.Message == c.Message {
		return
	}
	r.recorder.Eventf(n, clusterRef(n), corev1.EventTypeWarning, c.Reason, "Apply", "%s", c.Message)
}
