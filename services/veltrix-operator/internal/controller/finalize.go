package controller

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	veltrixv1 "github.com/opsuite/suite/api/veltrix/v1alpha1"
	"github.com/opsuite/suite/services/veltrix-operator/internal/disks"
	"github.com/opsuite/suite/services/veltrix-operator/internal/resources"
	"github.com/opsuite/suite/shared/reconciler"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// Event reasons of the deletion.
const (
	EventCheckpointed       = "Checkpointed"
	EventCheckpointSkipped  = "CheckpointSkipped"
	EventVolumesDeleted     = "VolumesDeleted"
	EventDisksReleased      = "DisksReleased"
	EventDisksNotReleased   = "DisksNotReleased"
	EventVolumesRetained    = "VolumesRetained"
	releaseGiveUpMultiplier = 5
)

// finalize runs before the cluster goes: it asks every running member to write a
// checkpoint through the admin API, and with reclaim policy Delete it removes the
// StatefulSet, claims and volumes and releases (wipes) the disks through the agents. With
// Retain the volumes, claims and disks stay, and a cluster of the same name finds them.
func (ctl *Controller) finalize(ctx context.Context, c *veltrixv1.VeltrixCluster) (reconciler.Result, error) {
	since := time.Since(c.DeletionTimestamp.Time)
	var pods corev1.PodList
	if err := ctl.client.List(ctx, &pods, client.InNamespace(c.Namespace), client.MatchingLabels(resources.SelectorLabels(c))); err != nil {
		return reconciler.Done(), fmt.Errorf("listing pods: %w", err)
	}
	if wait, err := ctl.checkpoint(ctx, c, pods.Items, since); err != nil || wait > 0 {
		return reconciler.Wait(wait), err
	}
	if c.Spec.ReclaimPolicy == veltrixv1.ReclaimDelete {
		if wait, err := ctl.reclaim(ctx, c, pods.Items, since); err != nil || wait > 0 {
			return reconciler.Wait(wait), err
		}
	} else {
		ctl.recorder.Eventf(c, nil, corev1.EventTypeNormal, EventVolumesRetained, "Delete",
			"reclaim policy Retain: PersistentVolumes, claims and prepared disks kept on %s", strings.Join(c.Status.Nodes, ", "))
	}
	return reconciler.Done(), nil
}

// checkpoint asks each running member for a checkpoint. Members that do not answer are
// asked again on later passes, until CheckpointTimeout after the deletion; then deletion
// goes on without them (their own SIGTERM still writes one).
func (ctl *Controller) checkpoint(ctx context.Context, c *veltrixv1.VeltrixCluster, pods []corev1.Pod, since time.Duration) (time.Duration, error) {
	token, err := ctl.tokenForDeletion(ctx, c)
	if err != nil {
		return 0, err
	}
	admin := ctl.cfg.Admin(token)
	var failed []string
	done := 0
	for i := range pods {
		pod := &pods[i]
		addr := ctl.cfg.AdminAddr(c, pod)
		if addr == "" || !pod.DeletionTimestamp.IsZero() || !isTrue(pod, corev1.ContainersReady) {
			continue // not running: nothing to checkpoint
		}
		if err := admin.Checkpoint(ctx, addr); err != nil {
			failed = append(failed, pod.Name)
			log.FromContext(ctx).Info("Checkpoint failed", "pod", pod.Name, "err", err.Error())
			continue
		}
		done++
	}
	if len(failed) > 0 {
		if since < ctl.cfg.CheckpointTimeout {
			return ctl.cfg.Poll, nil
		}
		sort.Strings(failed)
		ctl.recorder.Eventf(c, nil, corev1.EventTypeWarning, EventCheckpointSkipped, "Delete",
			"members %s did not write a checkpoint within %s; deleting without it", strings.Join(failed, ", "), ctl.cfg.CheckpointTimeout)
	}
	if done > 0 {
		ctl.recorder.Eventf(c, nil, corev1.EventTypeNormal, EventCheckpointed, "Delete", "%d members wrote a checkpoint", done)
	}
	return 0, nil
}

// tokenForDeletion reads the admin token; "" when it is gone (the checkpoints then fail and
// time out, which the events say).
func (ctl *Controller) tokenForDeletion(ctx context.Context, c *veltrixv1.VeltrixCluster) (string, error) {
	ref := resources.AdminTokenRef(c)
	var s corev1.Secret
	err := ctl.cfg.Reader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: ref.Name}, &s)
	switch {
	case apierrors.IsNotFound(err):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("reading the admin token: %w", err)
	}
	return string(s.Data[ref.Key]), nil
}

// reclaim removes what reclaim policy Delete lets go, in the order that keeps data safe:
// the StatefulSet and its pods first (the disks are mounted in them), then the claims and
// volumes, then the disks through the agents.
func (ctl *Controller) reclaim(ctx context.Context, c *veltrixv1.VeltrixCluster, pods []corev1.Pod, since time.Duration) (time.Duration, error) {
	sts := &appsv1.StatefulSet{}
	err := ctl.client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: resources.StatefulSetName(c)}, sts)
	switch {
	case err == nil:
		if err := client.IgnoreNotFound(ctl.client.Delete(ctx, sts)); err != nil {
			return 0, fmt.Errorf("deleting the StatefulSet: %w", err)
		}
		return ctl.cfg.Poll, nil
	case !apierrors.IsNotFound(err):
		return 0, err
	}
	if len(pods) > 0 {
		return ctl.cfg.Poll, nil // the pods still hold the disks
	}
	// One by one: the operator's role may delete claims, not delete collections of them.
	var claims corev1.PersistentVolumeClaimList
	if err := ctl.cfg.Reader.List(ctx, &claims, client.InNamespace(c.Namespace), client.MatchingLabels(resources.SelectorLabels(c))); err != nil {
		return 0, fmt.Errorf("listing the claims: %w", err)
	}
	for i := range claims.Items {
		if err := client.IgnoreNotFound(ctl.client.Delete(ctx, &claims.Items[i])); err != nil {
			return 0, fmt.Errorf("deleting claim %s: %w", claims.Items[i].Name, err)
		}
	}
	// Uncached: what is deleted must be what exists now.
	var pvs corev1.PersistentVolumeList
	if err := ctl.cfg.Reader.List(ctx, &pvs, client.MatchingLabels(resources.VolumeLabels(c))); err != nil {
		return 0, fmt.Errorf("listing the volumes: %w", err)
	}
	nodes := append([]string(nil), c.Status.Nodes...)
	// A lost node that came back holds disks prepared for the cluster too; one still gone
	// is not asked (its agent could never answer, and the deletion would wait for it).
	for _, l := range c.Status.LostNodes {
		if len(l.ReturnedDisks) > 0 && !contains(nodes, l.Node) {
			nodes = append(nodes, l.Node)
		}
	}
	for i := range pvs.Items {
		pv := &pvs.Items[i]
		if n := resources.VolumeNode(pv); n != "" && !contains(nodes, n) {
			nodes = append(nodes, n)
		}
		if err := client.IgnoreNotFound(ctl.client.Delete(ctx, pv)); err != nil {
			return 0, fmt.Errorf("deleting PersistentVolume %s: %w", pv.Name, err)
		}
	}
	if len(pvs.Items) > 0 {
		ctl.recorder.Eventf(c, nil, corev1.EventTypeNormal, EventVolumesDeleted, "Delete", "deleted %d PersistentVolumes (reclaim policy Delete)", len(pvs.Items))
	}
	sort.Strings(nodes)
	if ctl.cfg.Agents == nil {
		if len(nodes) > 0 {
			ctl.recorder.Eventf(c, nil, corev1.EventTypeWarning, EventDisksNotReleased, "Delete",
				"the operator has no node agents configured: the disks stay prepared on %s", strings.Join(nodes, ", "))
		}
		return 0, nil
	}
	failed := disks.Release(ctx, ctl.cfg.Agents, c, nodes, ctl.cfg.PVRoot, true)
	if len(failed) == 0 {
		if len(nodes) > 0 {
			ctl.recorder.Eventf(c, nil, corev1.EventTypeNormal, EventDisksReleased, "Delete", "released and wiped the disks on %s", strings.Join(nodes, ", "))
		}
		return 0, nil
	}
	var msgs []string
	for _, n := range nodes {
		if m, ok := failed[n]; ok {
			msgs = append(msgs, n+": "+m)
		}
	}
	// The volumes are gone; keep asking the agents for a while, then let the cluster go and
	// say which disks stay prepared.
	if since < releaseGiveUpMultiplier*ctl.cfg.CheckpointTimeout {
		ctl.recorder.Eventf(c, nil, corev1.EventTypeWarning, EventDisksNotReleased, "Delete", "disks not released yet: %s", strings.Join(msgs, "; "))
		return ctl.cfg.Backoff, nil
	}
	ctl.recorder.Eventf(c, nil, corev1.EventTypeWarning, EventDisksNotReleased, "Delete", "gave up releasing the disks; they stay prepared: %s", strings.Join(msgs, "; "))
	return 0, nil
}
