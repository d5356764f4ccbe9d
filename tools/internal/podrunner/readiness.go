package podrunner

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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

// reportStatus patches the pod status when it changed since the last patch, or when the
// pod as the API server has it says otherwise: as the kubelet's status manager does, what
// another writer changed is put back (the node lifecycle controller marks every pod of a
// node NotReady when the node's lease lapses, a control-plane outage for one; once the
// node is back, the kubelet reports its pods Ready again).
func (w *podWorker) reportStatus(pod *corev1.Pod) {
	st := w.desiredStatus(pod)
	if w.lastStatus != nil && reflect.DeepEqual(*w.lastStatus, st) && statusAgrees(pod.Status, st) {
		return
	}
	now := metav1.Now()
	conds := make([]map[string]any, 0, len(st.Conditions))
	for _, c := range st.Conditions {
		lt := now
		for _, old := range pod.Status.Conditions {
			if old.Type == c.Type && old.Status == c.Status {
				lt = old.LastTransitionTime
			}
		}
		// A strategic merge keeps fields a patch leaves out: null clears an old reason or
		// message. Only the runner's own condition types are in the list; the merge by type
		// leaves every other condition (readiness gates) as its writer set it.
		m := map[string]any{"type": c.Type, "status": c.Status, "lastTransitionTime": lt, "reason": nil, "message": nil}
		if c.Reason != "" {
			m["reason"] = c.Reason
		}
		if c.Message != "" {
			m["message"] = c.Message
		}
		conds = append(conds, m)
	}
	patch := map[string]any{"status": map[string]any{
		"phase":                 st.Phase,
		"conditions":            conds,
		"containerStatuses":     st.ContainerStatuses,
		"initContainerStatuses": st.InitContainerStatuses,
		"reason":                st.Reason,
		"message":               st.Message,
	}}
	data, err := json.Marshal(patch)
	if err != nil {
		return
	}
	_, err = w.r.cfg.Client.CoreV1().Pods(pod.Namespace).Patch(w.ctx, pod.Name, types.StrategicMergePatchType, data, metav1.PatchOptions{}, "status")
	if err != nil {
		if !apierrors.IsNotFound(err) {
			w.r.log.Warn("Failed to patch pod status", "pod", w.key, "err", err)
		}
		return
	}
	w.lastStatus = &st
}

// containerStatus is one container as the kubelet reports it.
func (w *podWorker) containerStatus(c *container) corev1.ContainerStatus {
	cs := corev1.ContainerStatus{Name: c.spec.Name, Image: c.spec.Image, ImageID: "localcluster://" + c.rule.Binary,
		RestartCount: c.restarts}
	if c.last != nil {
		cs.LastTerminationState.Terminated = c.last
	}
	switch {
	case !c.managed:
		started := true
		cs.Started, cs.Ready = &started, c.ready
		cs.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(c.startedAt.Truncate(time.Second))}
		return cs
	case c.cmd == nil:
		reason := c.waitReason
		if reason == "" {
			reason = "ContainerCreating"
		}
		cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: reason, Message: c.waitMessage}
		return cs
	case c.done:
		cs.State.Terminated = c.final
	case exitedNow(c):
		// Waiting for its restart (back-off, or a start that failed).
		reason, msg := c.waitReason, c.waitMessage
		if reason == "" {
			reason, msg = "ContainerCreating", ""
		}
		cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: reason, Message: msg}
	default:
		started := true
		cs.Started = &started
		cs.Ready = c.ready
		cs.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(c.startedAt.Truncate(time.Second))}
	}
	cs.ContainerID = fmt.Sprintf("localcluster://%d", c.cmd.Process.Pid)
	return cs
}

func (w *podWorker) desiredStatus(pod *corev1.Pod) corev1.PodStatus {
	var st corev1.PodStatus
	cond := func(t corev1.PodConditionType, ok bool, reason string) {
		s := corev1.ConditionFalse
		if ok {
			s, reason = corev1.ConditionTrue, ""
		}
		st.Conditions = append(st.Conditions, corev1.PodCondition{Type: t, Status: s, Reason: reason})
	}
	if len(w.containers) == 0 {
		// Not started yet.
		st.Phase = corev1.PodPending
		cond(corev1.PodInitialized, len(pod.Spec.InitContainers) == 0, "PodInitializing")
		reason := w.waitingReason
		if reason == "" {
			reason = "ContainerCreating"
		}
		for _, c := range pod.Spec.Containers {
			st.ContainerStatuses = append(st.ContainerStatuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image,
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: truncate(w.waiting)}}})
		}
		if w.initFailure != nil {
			st.InitContainerStatuses = []corev1.ContainerStatus{*w.initFailure}
		}
		if w.terminal {
			st.Phase = corev1.PodFailed
		}
		names := make([]string, 0, len(pod.Spec.Containers))
		for _, c := range pod.Spec.Containers {
			names = append(names, c.Name)
		}
		w.readiness(pod, &st, names)
		return st
	}
	var unready []string
	failed := 0
	for _, c := range w.containers {
		cs := w.containerStatus(c)
		st.ContainerStatuses = append(st.ContainerStatuses, cs)
		if !cs.Ready {
			unready = append(unready, c.spec.Name)
		}
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			failed++
		}
	}
	for _, c := range w.inits {
		cs := w.containerStatus(c)
		if !c.managed || exitedNow(c) {
			cs.Ready, cs.Started = false, nil
			cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed"}}
		}
		st.InitContainerStatuses = append(st.InitContainerStatuses, cs)
	}
	st.Phase = corev1.PodRunning
	switch {
	case w.terminal && failed == 0:
		st.Phase = corev1.PodSucceeded
	case w.terminal:
		st.Phase, st.Reason, st.Message = corev1.PodFailed, "ProcessExited", "A container process exited."
	}
	cond(corev1.PodInitialized, true, "")
	w.readiness(pod, &st, unready)
	return st
}

// readiness adds ContainersReady and Ready, by the kubelet's rule: Ready also waits for the
// conditions of the pod's readiness gates, which others set on the pod (the runner never
// writes them); a change of one re-runs this through the pod's watch event.
func (w *podWorker) readiness(pod *corev1.Pod, st *corev1.PodStatus, unready []string) {
	cr := containersReadyCondition(st.Phase, unready)
	st.Conditions = append(st.Conditions, cr, podReadyCondition(pod.Spec.ReadinessGates, pod.Status.Conditions, cr))
}

func truncate(s string) string {
	if len(s) > 300 {
		return s[:300]
	}
	return s
}

// statusAgrees reports whether the pod's status holds what the runner reports: the phase
// and the status of each condition it writes.
func statusAgrees(got, want corev1.PodStatus) bool {
	if got.Phase != want.Phase {
		return false
	}
	for _, c := range want.Conditions {
		if g := conditionOf(got.Conditions, c.Type); g == nil || g.Status != c.Status {
			return false
		}
	}
	return true
}
