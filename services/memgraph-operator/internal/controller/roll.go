package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/services/memgraph-operator/internal/memgraph"
	"github.com/opsuite/suite/services/memgraph-operator/internal/planner"
	"github.com/opsuite/suite/services/memgraph-operator/internal/resources"
	"github.com/opsuite/suite/shared/conditions"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// +kubebuilder:rbac:groups="",resources=pods,verbs=delete

// rollStep is the rolling update's decision for this pass.
type rollStep struct {
	// active: some pod runs an older template and the cluster may be rolled this pass.
	active bool
	// next is the pod to replace after the registration pass, if it confirms.
	next *corev1.Pod
	// drainMain and drainLeader ask the registration to move MAIN or leadership off the
	// member whose pod is next.
	drainMain   string
	drainLeader int
	// deleted is the pod deleted this pass ("" for none); waiting says why none was.
	deleted, waiting string
}

// planRoll decides, before the registration pass, what the rolling update does: the
// StatefulSets update OnDelete, and one pod at a time is replaced, only when every pod is
// present and ready and the cluster converged (this pass's registration for a deletion, the
// last pass for a handover of MAIN or leadership): data replicas first,
// then the MAIN (handed over to a caught-up replica first, so its pod is a replica when it
// goes), then the coordinators, the Raft leader last (after it yields).
func (p *pass) planRoll(ctx context.Context, want *planner.Desired) error {
	if p.retiring() || p.c.Status.Main == "" || p.c.Status.Leader == "" {
		return nil
	}
	cond := conditions.Get(p.c.Status.Conditions, memgraphv1.ConditionConverged)
	settled := cond != nil && cond.Status == metav1.ConditionTrue
	var pods corev1.PodList
	if err := p.ctl.client.List(ctx, &pods, client.InNamespace(p.c.Namespace), client.MatchingLabels(resources.ClusterLabels(p.c.Name))); err != nil {
		return fmt.Errorf("listing pods to roll: %w", err)
	}
	want.ReadLag = true
	total, ready := 0, 0
	for _, r := range roles {
		total += int(*p.sts[r].Spec.Replicas)
	}
	for i := range pods.Items {
		if podReady(&pods.Items[i]) {
			ready++
		}
	}
	next, drain := rollOrder(p.c.Name, pods.Items, p.sts, p.c.Status.Main, p.c.Status.Leader)
	if next == nil {
		want.ReadLag = false
		return nil
	}
	// Active even while the last pass had not converged: the pass then looks again soon
	// instead of at the next resync (a pod just replaced made the last pass unconverged).
	p.rolled.active = true
	if len(pods.Items) != total || ready != total {
		p.rolled.waiting = "waiting for every pod to be ready"
		return nil
	}
	switch {
	case drain && !settled:
		// MAIN and leadership move only off a cluster the last pass found converged.
		want.ReadLag = false
		p.rolled.waiting = "waiting for the cluster to converge"
	case drain && next.Labels[resources.LabelComponent] == string(resources.RoleData):
		p.rolled.drainMain = p.c.Status.Main
		want.DrainData = []string{p.rolled.drainMain}
	case drain:
		id, _ := memgraph.CoordinatorID(p.c.Status.Leader)
		p.rolled.drainLeader = id
		want.DrainCoordinators = []int{id}
	default:
		// roll confirms with this pass's registration (converged, caught up) before the
		// deletion, so a pass that follows an unconverged one need not wait another Poll.
		p.rolled.next = next
	}
	return nil
}

// roll replaces the planned pod once the registration pass confirms it is safe: the
// cluster converged, the pod is neither the MAIN nor the leader now, every replica has
// caught up with the MAIN and every coordinator's own view matches the leader's.
func (p *pass) roll(ctx context.Context) error {
	next := p.rolled.next
	if next == nil {
		return nil
	}
	name := memberName(p.c.Name, resources.Role(next.Labels[resources.LabelComponent]), next)
	switch {
	case !p.reg.Converged:
		p.rolled.waiting = "waiting for the cluster to converge"
		return nil
	case name == p.reg.Main || name == p.reg.Leader:
		p.rolled.waiting = "the MAIN or the leader moved; planning again"
		return nil
	case !p.reg.LagRead || len(p.reg.Lagging) > 0:
		p.rolled.waiting = "waiting for every replica to catch up with the MAIN"
		return nil
	case len(p.reg.CoordinatorsBehind) > 0:
		// A coordinator just restarted may be up in the leader's view before it has
		// applied the Raft log: replacing another now could leave the log on too few.
		p.rolled.waiting = "waiting for every coordinator to catch up with the leader's view"
		return nil
	}
	uid := next.UID
	if err := p.ctl.client.Delete(ctx, next, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting pod %s to update it: %w", next.Name, err)
	}
	p.rolled.deleted = next.Name
	// The pod as related object keeps the deletions of different pods apart (events of
	// one reason are otherwise folded into one series).
	p.ctl.recorder.Eventf(p.c, next, corev1.EventTypeNormal, memgraphv1.ReasonUpdatePending, "RollingUpdate",
		"Deleted pod %s so that it restarts on its StatefulSet's current template", next.Name)
	return nil
}

// rollOrder picks the next pod to replace: data replicas, the MAIN, coordinator followers,
// the leader. drain says the pod holds MAIN or leadership, which must move first.
func rollOrder(cluster string, pods []corev1.Pod, sts map[resources.Role]*appsv1.StatefulSet, main, leader string) (next *corev1.Pod, drain bool) {
	outdated := func(p *corev1.Pod, r resources.Role) bool {
		rev := sts[r].Status.UpdateRevision
		return rev != "" && p.Labels[appsv1.ControllerRevisionHashLabelKey] != rev
	}
	var replicas, mains, followers, leaders []*corev1.Pod
	for i := range pods {
		p := &pods[i]
		r := resources.Role(p.Labels[resources.LabelComponent])
		if (r != resources.RoleData && r != resources.RoleCoordinator) || !outdated(p, r) {
			continue
		}
		name := memberName(cluster, r, p)
		switch {
		case r == resources.RoleData && name == main:
			mains = append(mains, p)
		case r == resources.RoleData:
			replicas = append(replicas, p)
		case name == leader:
			leaders = append(leaders, p)
		default:
			followers = append(followers, p)
		}
	}
	byName := func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) }
	for i, group := range [][]*corev1.Pod{replicas, mains, followers, leaders} {
		if len(group) > 0 {
			slices.SortFunc(group, byName)
			return group[0], i == 1 || i == 3
		}
	}
	return nil, false
}

// memberName is the pod's name in SHOW INSTANCES ("" when its index label is missing).
func memberName(cluster string, r resources.Role, p *corev1.Pod) string {
	var ordinal int32
	if _, err := fmt.Sscan(p.Labels[resources.LabelPodIndex], &ordinal); err != nil {
		return ""
	}
	if r == resources.RoleCoordinator {
		return resources.CoordinatorName(int(ordinal))
	}
	return resources.DataInstanceName(cluster, ordinal)
}

func podReady(p *corev1.Pod) bool {
	if !p.DeletionTimestamp.IsZero() {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
