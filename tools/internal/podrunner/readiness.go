package podrunner

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Reasons of the ContainersReady and Ready conditions, the kubelet's words.
const (
	reasonContainersNotReady     = "ContainersNotReady"
	reasonReadinessGatesNotReady = "ReadinessGatesNotReady"
	reasonPodCompleted           = "PodCompleted"
	reasonPodFailed              = "PodFailed"
)

// containersReadyCondition is ContainersReady as the kubelet derives it: True when every
// container is ready; a terminal pod says why it is not.
func containersReadyCondition(phase corev1.PodPhase, unready []string) corev1.PodCondition {
	c := corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionFalse}
	switch {
	case phase == corev1.PodSucceeded:
		c.Reason = reasonPodCompleted
	case phase == corev1.PodFailed:
		c.Reason = reasonPodFailed
	case len(unready) > 0:
		c.Reason = reasonContainersNotReady
		c.Message = fmt.Sprintf("containers with unready status: %s", unready)
	default:
		c.Status = corev1.ConditionTrue
	}
	return c
}

// podReadyCondition is Ready as the kubelet derives it: ContainersReady's status, reason
// and message while that is not True; then True only when the condition of every readiness
// gate is True in conditions (which someone else, such as an operator, sets), else False
// with ReadinessGatesNotReady and one message per gate that holds.
func podReadyCondition(gates []corev1.PodReadinessGate, conditions []corev1.PodCondition, containersReady corev1.PodCondition) corev1.PodCondition {
	if containersReady.Status != corev1.ConditionTrue {
		return corev1.PodCondition{Type: corev1.PodReady, Status: containersReady.Status,
			Reason: containersReady.Reason, Message: containersReady.Message}
	}
	var holding []string
	for _, g := range gates {
		found := conditionOf(conditions, g.ConditionType)
		switch {
		case found == nil:
			holding = append(holding, fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", string(g.ConditionType)))
		case found.Status != corev1.ConditionTrue:
			holding = append(holding, fmt.Sprintf("the status of pod readiness gate %q is not \"True\", but %s", string(g.ConditionType), found.Status))
		}
	}
	if len(holding) > 0 {
		return corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse,
			Reason: reasonReadinessGatesNotReady, Message: strings.Join(holding, ", ")}
	}
	return corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue}
}

// conditionOf is the condition of that type in conds, nil when there is none.
func conditionOf(conds []corev1.PodCondition, typ corev1.PodConditionType) *corev1.PodCondition {
	if i := slices.IndexFunc(conds, func(c corev1.PodCondition) bool { return c.Type == typ }); i >= 0 {
		return &conds[i]
	}
	return nil
}
