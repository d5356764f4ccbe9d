package controller

import (
	"context"
	"fmt"
	"slices"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/services/memgraph-operator/internal/resources"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// +kubebuilder:rbac:groups="",resources=pods,verbs=delete

// rollStep is what the rolling restart found this pass.
type rollStep struct {
	// deleted is the pod deleted this pass ("" for none).
	deleted string
	// heldMain is the MAIN's pod when it is the only one left on an older template.
	heldMain string
}

// roll replaces at most one pod running an older template per pass (the StatefulSets
// update OnDelete), and only on a cluster that is converged with every pod present and
// ready, so each replacement has rejoined and been re-registered before the next: the
// replicas first, then the coordinators with the Raft leader last (its pod going costs one
// election). The MAIN is held: it needs a planned handover to a caught-up replica, which
// is not automated yet; Updated says so.
func (p *pass) roll(ctx context.Context) error {
	var pods corev1.PodList
	if err := p.ctl.client.List(ctx, &pods, client.InNamespace(p.c.Namespace), client.MatchingLabels(resources.ClusterLabels(p.c.Name))); err != nil {
		return fmt.Errorf("listing pods to roll: %w", err)
	}
	want := 0
	for _, r := range roles {
		want += int(*p.sts[r].Spec.Replicas)
	}
	ready := 0
	for i := range pods.Items {
		if podReady(&pods.Items[i]) {
			ready++
		}
	}
	if len(pods.Items) != want || ready != want {
		return nil
	}
	next, heldMain := rollOrder(p.c.Name, pods.Items, p.sts, p.reg.Main, p.reg.Leader)
	p.rolled.heldMain = heldMain
	if next == nil {
		return nil
	}
	uid := next.UID
	if err := p.ctl.client.Delete(ctx, next, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting pod %s to update it: %w", next.Name, err)
	}
	p.rolled.deleted = next.Name
	p.normal(memgraphv1.ReasonUpdatePending, fmt.Sprintf("Deleted pod %s so that it restarts on its StatefulSet's current template", next.Name))
	return nil
}

// rollOrder picks the next pod to replace: data replicas, then coordinator followers, then
// the leader. The MAIN's outdated pod is never picked; it is returned as held.
func rollOrder(cluster string, pods []corev1.Pod, sts map[resources.Role]*appsv1.StatefulSet, main, leader string) (*corev1.Pod, string) {
	outdated := func(p *corev1.Pod, r resources.Role) bool {
		rev := sts[r].Status.UpdateRevision
		return rev != "" && p.Labels[appsv1.ControllerRevisionHashLabelKey] != rev
	}
	var replicas, followers, leaders []*corev1.Pod
	held := ""
	for i := range pods {
		p := &pods[i]
		switch p.Labels[resources.LabelComponent] {
		case string(resources.RoleData):
			if !outdated(p, resources.RoleData) {
				continue
			}
			if memberName(cluster, resources.RoleData, p) == main {
				held = p.Name
				continue
			}
			replicas = append(replicas, p)
		case string(resources.RoleCoordinator):
			if !outdated(p, resources.RoleCoordinator) {
				continue
			}
			if memberName(cluster, resources.RoleCoordinator, p) == leader {
				leaders = append(leaders, p)
			} else {
				followers = append(followers, p)
			}
		}
	}
	byName := func(a, b *corev1.Pod) int { return cmpString(a.Name, b.Name) }
	for _, group := range [][]*corev1.Pod{replicas, followers, leaders} {
		if len(group) > 0 {
			slices.SortFunc(group, byName)
			return group[0], held
		}
	}
	return nil, held
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

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
