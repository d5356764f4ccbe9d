package controller

import (
	"context"
	"fmt"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/services/memgraph-operator/internal/resources"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Reasons of the role-assigned pod condition.
const (
	reasonRoleAssigned    = "RoleAssigned"
	reasonRoleNotAssigned = "RoleNotAssigned"
)

// dataPodsRunning replaces notReady's verdict on the data StatefulSet when its pods are
// held back only by the role-assigned gate: the registration that opens the gate needs
// them registered first, so what counts here is that every pod exists at the StatefulSet's
// generation and its containers are ready. "" when they are.
func (p *pass) dataPodsRunning(ctx context.Context) (string, error) {
	sts := p.sts[resources.RoleData]
	want := *sts.Spec.Replicas
	if sts.Status.ObservedGeneration < sts.Generation || sts.Status.Replicas != want {
		return notReady(sts, resources.RoleData), nil
	}
	pods, err := p.dataPods(ctx)
	if err != nil {
		return "", err
	}
	running := int32(0)
	for i := range pods {
		if pods[i].DeletionTimestamp.IsZero() && podCondition(&pods[i], corev1.ContainersReady) {
			running++
		}
	}
	if running != want {
		return fmt.Sprintf("%d of %d %s pods running", running, want, resources.RoleData), nil
	}
	return "", nil
}

func (p *pass) dataPods(ctx context.Context) ([]corev1.Pod, error) {
	var pods corev1.PodList
	if err := p.ctl.client.List(ctx, &pods, client.InNamespace(p.c.Namespace), client.MatchingLabels(resources.Selector(p.c.Name, resources.RoleData))); err != nil {
		return nil, fmt.Errorf("listing data pods: %w", err)
	}
	return pods.Items, nil
}

// roleGates sets each data pod's memgraph.com/role-assigned condition from the leader's
// SHOW INSTANCES of this pass: True for an instance shown up as MAIN or replica, False
// otherwise. Without a leader's answer nothing changes.
func (p *pass) roleGates(ctx context.Context) error {
	if p.reg == nil || p.reg.DataRoles == nil {
		return nil
	}
	pods, err := p.dataPods(ctx)
	if err != nil {
		return err
	}
	for i := range pods {
		pod := &pods[i]
		if !pod.DeletionTimestamp.IsZero() || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		name := memberName(p.c.Name, resources.RoleData, pod)
		if name == "" {
			continue
		}
		want, reason, message := corev1.ConditionFalse, reasonRoleNotAssigned, "the coordinators have not given "+name+" a role, or it is down in the leader's view"
		if role, ok := p.reg.DataRoles[name]; ok {
			want, reason, message = corev1.ConditionTrue, reasonRoleAssigned, name+" is "+role+" in the leader's view"
		}
		cur := findPodCondition(pod, memgraphv1.RoleAssignedGate)
		if cur != nil && cur.Status == want && cur.Reason == reason && cur.Message == message {
			continue
		}
		before := pod.DeepCopy()
		cond := corev1.PodCondition{Type: memgraphv1.RoleAssignedGate, Status: want, Reason: reason, Message: message,
			LastTransitionTime: metav1.Now()}
		if cur != nil {
			if cur.Status == want {
				cond.LastTransitionTime = cur.LastTransitionTime
			}
			*cur = cond
		} else {
			pod.Status.Conditions = append(pod.Status.Conditions, cond)
		}
		// A strategic merge keyed by condition type leaves the kubelet's conditions alone.
		err := p.ctl.client.Status().Patch(ctx, pod, client.StrategicMergeFrom(before))
		switch {
		case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
			// Gone or changed meanwhile: its watch event brings the next pass.
		case err != nil:
			return fmt.Errorf("setting %s on pod %s: %w", memgraphv1.RoleAssignedGate, pod.Name, err)
		}
	}
	return nil
}

func findPodCondition(pod *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == t {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

func podCondition(pod *corev1.Pod, t corev1.PodConditionType) bool {
	c := findPodCondition(pod, t)
	return c != nil && c.Status == corev1.ConditionTrue
}
