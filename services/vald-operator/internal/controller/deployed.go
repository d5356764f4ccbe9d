package controller

import (
	"encoding/json"
	"fmt"
	"time"

	valdv1 "github.com/opsuite/suite/api/vald/v1"
	"github.com/opsuite/suite/services/vald-operator/internal/lifecycle"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Condition types the Vald Helm Operator (an operator-sdk helm operator) writes on a
// ValdRelease's status.
const (
	helmInitialized    = "Initialized"
	helmDeployed       = "Deployed"
	helmReleaseFailed  = "ReleaseFailed"
	helmIrreconcilable = "Irreconcilable"
)

// helmStatus is the part of a ValdRelease's status the Vald Helm Operator writes that
// matters here. ObservedGeneration is honoured when an operator writes it.
type helmStatus struct {
	Conditions         []metav1.Condition `json:"conditions,omitempty"`
	ObservedGeneration int64              `json:"observedGeneration,omitempty"`
}

// maxHelmMessage bounds the helm message quoted in a condition (helm errors can carry
// whole manifests).
const maxHelmMessage = 300

// deployment judges a ValdRelease by its Vald Helm Operator status: Succeeded once
// Deployed is True (for the current generation, when the operator says which), Failed
// when the operator reports ReleaseFailed or Irreconcilable (a person must look; the
// status change that clears it is a watch event, which brings the next pass), Pending
// otherwise, and after wait without any status at all, Pending with a message that asks
// whether the Vald Helm Operator runs.
func deployment(vr *valdv1.ValdRelease, now time.Time, wait time.Duration) lifecycle.Result {
	var st helmStatus
	if vr.Status != nil && len(vr.Status.Raw) > 0 {
		if err := json.Unmarshal(vr.Status.Raw, &st); err != nil {
			return lifecycle.Pending(fmt.Sprintf("The status of ValdRelease %q is not what the Vald Helm Operator writes; waiting for it to deploy.", vr.Name))
		}
	}
	cond := func(t string) *metav1.Condition {
		for i := range st.Conditions {
			if st.Conditions[i].Type == t {
				return &st.Conditions[i]
			}
		}
		return nil
	}
	for _, failure := range []struct{ condType, what string }{
		{helmIrreconcilable, "cannot reconcile"},
		{helmReleaseFailed, "failed to deploy"},
	} {
		if c := cond(failure.condType); c != nil && c.Status == metav1.ConditionTrue {
			return lifecycle.Failed(fmt.Sprintf("The Vald Helm Operator %s ValdRelease %q (%s, %s): %s", failure.what, vr.Name, failure.condType, c.Reason, clip(c.Message, maxHelmMessage)))
		}
	}
	if len(st.Conditions) == 0 {
		if now.Sub(vr.CreationTimestamp.Time) >= wait {
			return lifecycle.Pending(fmt.Sprintf("ValdRelease %q has no status from the Vald Helm Operator after %s: is the Vald Helm Operator installed, and does it watch namespace %q?", vr.Name, wait, vr.Namespace))
		}
		return lifecycle.Pending(fmt.Sprintf("Waiting for the Vald Helm Operator to deploy ValdRelease %q.", vr.Name))
	}
	if c := cond(helmDeployed); c == nil || c.Status != metav1.ConditionTrue || (st.ObservedGeneration > 0 && st.ObservedGeneration < vr.Generation) {
		return lifecycle.Pending(fmt.Sprintf("Waiting for the Vald Helm Operator to deploy the current values of ValdRelease %q.", vr.Name))
	}
	return lifecycle.Succeeded("")
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
