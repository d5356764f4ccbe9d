package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"

	valdv1 "github.com/opsuite/suite/api/vald/v1"
	"github.com/opsuite/suite/shared/conditions"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// switchover is what a pass found of a blue/green switch: From are the entries no longer
// active that still have ValdReleases, To the active entries; Keeping is true while From's
// ValdReleases are kept because To's are not all ready.
type switchover struct {
	From, To []string
	Keeping  bool
}

// keepOutgoing returns the ValdReleases this release controls for entries that are no
// longer active (`active` moved away from them), exactly as they are, while any desired
// ValdRelease is not ready yet (missing, of an older generation, not deployed by the Vald
// Helm Operator): the old entry's Vald keeps serving until the new one does. Once every
// desired ValdRelease is ready it returns none, so the sync prunes them. Switching back
// mid-way is the same rule the other way round: the entry active again is ready as soon as
// its ValdReleases carry the current generation, and the half-deployed one is pruned then.
func (r *Reconciler) keepOutgoing(ctx context.Context, vor *valdv1.ValdOperatorRelease, desired []*valdv1.ValdRelease, st *passState) ([]client.Object, error) {
	active := map[string]bool{}
	var to []string
	for _, entry := range vor.Spec.Infrastructure {
		if entry.IsActive() {
			active[entry.Role] = true
			to = append(to, entry.Role)
		}
	}
	list := &valdv1.ValdReleaseList{}
	if err := r.Client.List(ctx, list, client.InNamespace(vor.Namespace), client.MatchingLabels{valdv1.LabelOperatorRelease: vor.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing ValdReleases of inactive entries: %w", err)
	}
	var outgoing []*valdv1.ValdRelease
	var from []string
	for i := range list.Items {
		live := &list.Items[i]
		owner := metav1.GetControllerOf(live)
		role := live.Labels[valdv1.LabelRole]
		if active[role] || owner == nil || owner.UID != vor.UID || !live.DeletionTimestamp.IsZero() {
			continue
		}
		outgoing = append(outgoing, live)
		if !slices.Contains(from, role) {
			from = append(from, role)
		}
	}
	if len(outgoing) == 0 {
		st.switchover = &switchover{To: sorted(to)}
		return nil, nil
	}
	ready, err := r.allReady(ctx, desired)
	if err != nil {
		return nil, err
	}
	st.switchover = &switchover{From: sorted(from), To: sorted(to), Keeping: !ready}
	if ready {
		return nil, nil
	}
	kept := make([]client.Object, 0, len(outgoing))
	for _, live := range outgoing {
		keep := lastApplied(live.DeepCopy()) // the list shares the cache's objects
		st.kept[client.ObjectKeyFromObject(keep)] = true
		kept = append(kept, keep)
	}
	return kept, nil
}

// allReady reports whether every desired ValdRelease exists in the cache and passes the
// phase's check.
func (r *Reconciler) allReady(ctx context.Context, desired []*valdv1.ValdRelease) (bool, error) {
	for _, want := range desired {
		got := &valdv1.ValdRelease{}
		if err := r.Client.Get(ctx, client.ObjectKeyFromObject(want), got); err != nil {
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			return false, fmt.Errorf("reading ValdRelease %s: %w", want.Name, err)
		}
		if !r.valdReleaseReady(want, got).Succeeded() {
			return false, nil
		}
	}
	return true, nil
}

// lastApplied is what the controller applies of a live ValdRelease: applying it writes
// nothing, so the object is neither rewritten nor pruned.
func lastApplied(live *valdv1.ValdRelease) *valdv1.ValdRelease {
	return &valdv1.ValdRelease{
		TypeMeta: metav1.TypeMeta{APIVersion: valdv1.GroupVersion.String(), Kind: "ValdRelease"},
		ObjectMeta: metav1.ObjectMeta{
			Name: live.Name, Namespace: live.Namespace,
			Labels: live.Labels, Annotations: live.Annotations, OwnerReferences: live.OwnerReferences,
		},
		Spec: live.Spec,
	}
}

// setSwitchoverCondition reports a switch: Unknown/Switching while the old entries'
// ValdReleases are kept, True/Switched once they were pruned. A release that never
// switched has no such condition. Messages are stable for a given switch.
func setSwitchoverCondition(vor *valdv1.ValdOperatorRelease, sw *switchover) {
	if sw == nil {
		return
	}
	prev := conditions.Get(vor.Status.Conditions, valdv1.ConditionSwitchover)
	to := quoteRoles(sw.To)
	var c metav1.Condition
	switch {
	case len(sw.From) == 0 && (prev == nil || prev.Status == metav1.ConditionTrue):
		return
	case sw.Keeping:
		from := quoteRoles(sw.From)
		c = metav1.Condition{Status: metav1.ConditionUnknown, Reason: valdv1.ReasonSwitching,
			Message: fmt.Sprintf("Switching from infrastructure entry %s to %s: the ValdReleases of %s are kept until every ValdRelease of %s is deployed.", from, to, from, to)}
	default:
		// The old ValdReleases are pruned in this pass, or went earlier (a pass whose
		// status write was lost, or a deletion by hand): one message for both.
		c = metav1.Condition{Status: metav1.ConditionTrue, Reason: valdv1.ReasonSwitched,
			Message: fmt.Sprintf("Switched to infrastructure entry %s: every ValdRelease of %s is deployed and those of the entries no longer active are pruned.", to, to)}
	}
	c.Type = valdv1.ConditionSwitchover
	conditions.Set(&vor.Status.Conditions, c, vor.Generation)
}

func sorted(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

func quoteRoles(roles []string) string {
	quoted := make([]string, len(roles))
	for i, role := range roles {
		quoted[i] = fmt.Sprintf("%q", role)
	}
	return strings.Join(quoted, ", ")
}
