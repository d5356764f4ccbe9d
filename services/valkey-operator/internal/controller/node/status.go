package node

import (
	"fmt"
	"strings"
	"time"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The pure half of the controller: conditions from what it read, no I/O.

func cond(t string, ok bool, reason, msg string) metav1.Condition {
	s := metav1.ConditionFalse
	if ok {
		s = metav1.ConditionTrue
	}
	return metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg}
}

// pvcReady is PersistentVolumeClaimReady of the claim named name; pvc nil means missing.
func pvcReady(name string, pvc *corev1.PersistentVolumeClaim) metav1.Condition {
	const t = valkeyv1.NodeConditionPersistentVolumeClaimReady
	switch {
	case pvc == nil:
		return cond(t, false, valkeyv1.NodeReasonPersistentVolumeClaimPending, fmt.Sprintf("PVC %s does not exist yet", name))
	case pvc.Status.Phase == corev1.ClaimBound:
		return cond(t, true, valkeyv1.NodeReasonPersistentVolumeClaimBound, fmt.Sprintf("PVC %s is bound", name))
	case pvc.Status.Phase == "":
		return cond(t, false, valkeyv1.NodeReasonPersistentVolumeClaimPending, fmt.Sprintf("PVC %s is Pending", name))
	default:
		return cond(t, false, valkeyv1.NodeReasonPersistentVolumeClaimPending, fmt.Sprintf("PVC %s is %s", name, pvc.Status.Phase))
	}
}

// pvcSize is PersistentVolumeClaimSizeReady: the bound capacity against want, and when it
// falls short, where the resize is according to the PVC's conditions and its
// allocatedResourceStatuses. refused is the API server's answer to our resize request,
// when it refused it (a class that does not allow expansion).
func pvcSize(name string, want resource.Quantity, pvc *corev1.PersistentVolumeClaim, refused error) metav1.Condition {
	const t = valkeyv1.NodeConditionPersistentVolumeClaimSizeReady
	pending := func(msg string) metav1.Condition {
		return cond(t, false, valkeyv1.NodeReasonPersistentVolumeClaimResizePending, msg)
	}
	if pvc == nil || pvc.Status.Phase != corev1.ClaimBound {
		return pending(fmt.Sprintf("waiting for PVC %s to be bound", name))
	}
	capacity, ok := pvc.Status.Capacity[corev1.ResourceStorage]
	if ok && capacity.Cmp(want) >= 0 {
		return cond(t, true, valkeyv1.NodeReasonPersistentVolumeClaimSizeSatisfied,
			fmt.Sprintf("PVC %s has %s, at least the requested %s", name, capacity.String(), want.String()))
	}
	have := "no capacity yet"
	if ok {
		have = capacity.String()
	}
	infeasible := func(why string) metav1.Condition {
		return cond(t, false, valkeyv1.NodeReasonPersistentVolumeClaimResizeInfeasible,
			fmt.Sprintf("PVC %s cannot grow from %s to %s: %s", name, have, want.String(), why))
	}
	inProgress := func(why string) metav1.Condition {
		return cond(t, false, valkeyv1.NodeReasonPersistentVolumeClaimResizeInProgress,
			fmt.Sprintf("PVC %s is growing from %s to %s: %s", name, have, want.String(), why))
	}
	if refused != nil {
		return infeasible(refused.Error())
	}
	// Errors first: a failed attempt outranks one still marked in progress.
	for _, c := range pvc.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case corev1.PersistentVolumeClaimControllerResizeError, corev1.PersistentVolumeClaimNodeResizeError:
			return infeasible(orDefault(c.Message, string(c.Type)))
		}
	}
	switch pvc.Status.AllocatedResourceStatuses[corev1.ResourceStorage] {
	case corev1.PersistentVolumeClaimControllerResizeInfeasible:
		return infeasible("the storage provider refused the new size")
	case corev1.PersistentVolumeClaimNodeResizeInfeasible:
		return infeasible("the node cannot grow the file system")
	case corev1.PersistentVolumeClaimControllerResizeInProgress:
		return inProgress("the storage provider is expanding the volume")
	case corev1.PersistentVolumeClaimNodeResizeInProgress:
		return inProgress("the node is growing the file system")
	case corev1.PersistentVolumeClaimNodeResizePending:
		return pending(fmt.Sprintf("PVC %s waits for the node to grow the file system from %s to %s", name, have, want.String()))
	}
	for _, c := range pvc.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case corev1.PersistentVolumeClaimResizing:
			return inProgress(orDefault(c.Message, "the storage provider is expanding the volume"))
		case corev1.PersistentVolumeClaimFileSystemResizePending:
			return pending(fmt.Sprintf("PVC %s waits for the node to grow the file system from %s to %s", name, have, want.String()))
		}
	}
	return pending(fmt.Sprintf("PVC %s waits for its resize from %s to %s to start", name, have, want.String()))
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// podReady reports whether pod is Running and Ready (and not on its way out), and if
// not, why.
func podReady(pod *corev1.Pod, name string) (bool, string) {
	switch {
	case pod == nil:
		return false, fmt.Sprintf("pod %s does not exist yet", name)
	case !pod.DeletionTimestamp.IsZero():
		return false, fmt.Sprintf("pod %s is terminating", pod.Name)
	case pod.Status.Phase != corev1.PodRunning:
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				return false, fmt.Sprintf("pod %s is unschedulable: %s", pod.Name, c.Message)
			}
		}
		phase := pod.Status.Phase
		if phase == "" {
			phase = corev1.PodPending
		}
		return false, fmt.Sprintf("pod %s is %s%s", pod.Name, phase, waiting(pod))
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			if c.Status == corev1.ConditionTrue {
				return true, ""
			}
			break
		}
	}
	return false, fmt.Sprintf("pod %s is running but not ready%s", pod.Name, waiting(pod))
}

// waiting names the containers that wait and why (ImagePullBackOff, CrashLoopBackOff),
// the first thing to look at when a pod does not get ready.
func waiting(pod *corev1.Pod) string {
	var parts []string
	for _, s := range pod.Status.ContainerStatuses {
		if w := s.State.Waiting; w != nil && w.Reason != "" {
			parts = append(parts, s.Name+": "+w.Reason)
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// statefulSetRolledOut: the StatefulSet controller saw the current spec, finished its
// update, and the pod is of the update revision.
func statefulSetRolledOut(s *appsv1.StatefulSet, pod *corev1.Pod) (bool, string) {
	switch {
	case s == nil:
		return false, "the StatefulSet does not exist yet"
	case s.Status.ObservedGeneration < s.Generation:
		return false, fmt.Sprintf("StatefulSet %s has not observed generation %d yet", s.Name, s.Generation)
	case s.Status.UpdateRevision == "" || s.Status.CurrentRevision != s.Status.UpdateRevision:
		return false, fmt.Sprintf("StatefulSet %s is rolling out revision %s", s.Name, s.Status.UpdateRevision)
	case pod != nil && pod.Labels[appsv1.ControllerRevisionHashLabelKey] != s.Status.UpdateRevision:
		return false, fmt.Sprintf("pod %s is of revision %s, not %s", pod.Name, pod.Labels[appsv1.ControllerRevisionHashLabelKey], s.Status.UpdateRevision)
	}
	return true, ""
}

// deploymentRolledOut: the Deployment controller saw the current spec and its one pod is
// of it, with no older pod left (Recreate).
func deploymentRolledOut(d *appsv1.Deployment) (bool, string) {
	switch {
	case d == nil:
		return false, "the Deployment does not exist yet"
	case d.Status.ObservedGeneration < d.Generation:
		return false, fmt.Sprintf("Deployment %s has not observed generation %d yet", d.Name, d.Generation)
	case d.Status.UpdatedReplicas < 1 || d.Status.Replicas != d.Status.UpdatedReplicas:
		return false, fmt.Sprintf("Deployment %s is rolling out (%d of %d pods updated)", d.Name, d.Status.UpdatedReplicas, d.Status.Replicas)
	}
	return true, ""
}

// readyCondition is Ready: a PVC that is not bound first (the pod cannot start without
// it), then the pod, then the rollout.
func readyCondition(pvc *metav1.Condition, podOK bool, podWhy string, rolled bool, rollWhy string) metav1.Condition {
	const t = valkeyv1.NodeConditionReady
	switch {
	case pvc != nil && pvc.Status != metav1.ConditionTrue:
		return cond(t, false, valkeyv1.NodeReasonPersistentVolumeClaimPending, pvc.Message)
	case !podOK:
		return cond(t, false, valkeyv1.NodeReasonPodNotReady, podWhy)
	case !rolled:
		return cond(t, false, valkeyv1.NodeReasonPodNotReady, rollWhy)
	}
	return cond(t, true, valkeyv1.NodeReasonPodRunning, "pod is running and ready, and the workload is rolled out")
}

// backoff is the wait before the failures-th retry: base doubling, capped at max.
func backoff(failures int, base, maxWait time.Duration) time.Duration {
	d := base
	for i := 1; i < failures && d < maxWait; i++ {
		d *= 2
	}
	return min(d, maxWait)
}
