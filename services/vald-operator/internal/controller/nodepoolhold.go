package controller

import (
	"context"
	"fmt"
	"strings"
	"time"

	valdv1 "github.com/opsuite/suite/api/vald/v1"
	"github.com/opsuite/suite/shared/conditions"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// heldEntries are the entries whose node-pool match was lost but whose ValdReleases are
// kept as last rendered until Until.
type heldEntries struct {
	Roles []string
	Since time.Time
	Until time.Time
}

// holdUnmatched returns, for the active entries the node-pool match leaves out (unmatched
// roles), the ValdReleases this release controls for them exactly as they are, so they are
// neither rewritten nor pruned while the grace lasts: a match that loses some nodes (a
// relabel, a node replaced) must not delete an entry's Vald at once, the lesson of the empty
// render applied per entry. The grace begins with the NodePoolMatchLost condition (its
// lastTransitionTime); once it is over they are no longer returned, so they are pruned.
func (r *Reconciler) holdUnmatched(ctx context.Context, vor *valdv1.ValdOperatorRelease, unmatched []string, now time.Time, st *passState) ([]client.Object, error) {
	grace := r.Options.NodePoolLossGrace
	if len(unmatched) == 0 || grace <= 0 {
		return nil, nil
	}
	since := now.Truncate(time.Second) // as the API server keeps it, so the message is stable
	if c := conditions.Get(vor.Status.Conditions, valdv1.ConditionNodePoolMatchLost); c != nil && c.Status == metav1.ConditionTrue {
		since = c.LastTransitionTime.Time
	}
	until := since.Add(grace)
	if !now.Before(until) {
		return nil, nil
	}
	list := &valdv1.ValdReleaseList{}
	if err := r.Client.List(ctx, list, client.InNamespace(vor.Namespace), client.MatchingLabels{valdv1.LabelOperatorRelease: vor.Name}); err != nil {
		return nil, fmt.Errorf("listing ValdReleases of unmatched entries: %w", err)
	}
	lost := map[string]bool{}
	for _, role := range unmatched {
		lost[role] = true
	}
	var held []client.Object
	roles := map[string]bool{}
	for i := range list.Items {
		live := &list.Items[i]
		owner := metav1.GetControllerOf(live)
		role := live.Labels[valdv1.LabelRole]
		if !lost[role] || owner == nil || owner.UID != vor.UID || !live.DeletionTimestamp.IsZero() {
			continue
		}
		held = append(held, lastApplied(live))
		roles[role] = true
	}
	if len(held) == 0 {
		return nil, nil
	}
	for _, role := range unmatched {
		if roles[role] {
			st.hold.Roles = append(st.hold.Roles, role)
		}
	}
	st.hold.Since, st.hold.Until = since, until
	return held, nil
}

// setHoldCondition reports the held entries in the NodePoolMatchLost condition, or removes
// it when none is held. The message is stable while the hold lasts.
func setHoldCondition(vor *valdv1.ValdOperatorRelease, hold heldEntries) {
	if len(hold.Roles) == 0 {
		meta.RemoveStatusCondition(&vor.Status.Conditions, valdv1.ConditionNodePoolMatchLost)
		return
	}
	quoted := make([]string, len(hold.Roles))
	for i, role := range hold.Roles {
		quoted[i] = fmt.Sprintf("%q", role)
	}
	conditions.Set(&vor.Status.Conditions, metav1.Condition{
		Type:   valdv1.ConditionNodePoolMatchLost,
		Status: metav1.ConditionTrue,
		Reason: valdv1.ReasonHeld,
		Message: fmt.Sprintf("No labelled nodes match the node pools of infrastructure entries %s any more: their ValdReleases are kept as last rendered until %s (NODEPOOL_LOSS_GRACE), then pruned unless the nodes come back.",
			strings.Join(quoted, ", "), hold.Until.UTC().Format(time.RFC3339)),
		LastTransitionTime: metav1.NewTime(hold.Since),
	}, vor.Generation)
}
