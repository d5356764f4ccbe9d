package cluster

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	"github.com/opsuite/suite/services/valkey-operator/internal/executor"
	"github.com/opsuite/suite/services/valkey-operator/internal/planner"
	"github.com/opsuite/suite/services/valkey-operator/internal/resources"
	"github.com/opsuite/suite/services/valkey-operator/internal/restore"
	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
	"github.com/opsuite/suite/shared/conditions"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// The restore of spec.bootstrap.recovery, in three steps around the usual pass:
//
//  1. Pending (restoreBegin, before any member exists): find the backup, read and check
//     its manifest, refuse a cluster whose members' data volumes already exist, and read
//     every shard's object through SHA-256 (streamed, nothing kept). Only then the
//     restore Secret is written (per shard: object, checksum, slots) and the members are
//     created, as many shards as the backup has.
//  2. Loading: each primary's restore-rdb init container downloads its shard's RDB,
//     checks it again and puts it where the server loads it; started, the server claims
//     the slots it holds keys of. restoreSlots gives each primary the rest of its
//     manifest slots before the planner meets the members, so the layout is the
//     backup's; the planner then attaches the replicas, which full-sync.
//  3. Completed (restoreEnd, once the cluster is healthy): the restore Secret is deleted
//     (a pod that comes back empty later never loads the old backup) and spec.shards
//     applies: a different count reshards as any scale does.

// The restore reads the backup, the members' claims and deletes its Secret.
// +kubebuilder:rbac:groups=valkey.io,resources=valkeybackups,verbs=list;watch
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=delete

// restoreShards is the shard count the members are created with while a restore runs
// (the backup's), or 0 when spec.shards applies.
func (p *pass) restoreShards() int32 {
	r := p.c.Status.Restore
	if p.c.Spec.Bootstrap == nil || r == nil || r.Phase != valkeyv1.RestorePhaseLoading {
		return 0
	}
	return r.Shards
}

// restoreBegin runs before the members are created. It returns false while the pass must
// stop: waiting for the backup (Progressing says why) or refused (Ready=False, a
// Warning event).
func (p *pass) restoreBegin(ctx context.Context) bool {
	c := p.c
	if c.Spec.Bootstrap == nil || c.Spec.Bootstrap.Recovery == nil {
		return true
	}
	if c.Status.Restore == nil {
		c.Status.Restore = &valkeyv1.RestoreStatus{Phase: valkeyv1.RestorePhasePending}
	}
	st := c.Status.Restore
	switch st.Phase {
	case valkeyv1.RestorePhaseCompleted:
		return p.dropRestoreSecret(ctx)
	case valkeyv1.RestorePhaseLoading:
		if pod, code := p.failedRestoreInit(ctx); pod != "" {
			msg := fmt.Sprintf("The restore-rdb init container of pod %s failed (exit code %d); the kubelet retries it. kubectl logs %s -c %s says why", pod, code, pod, resources.RestoreContainer)
			p.setRestored(metav1.ConditionFalse, valkeyv1.ReasonRestoreInitFailed, msg)
			p.warnOn(valkeyv1.ConditionRestored, metav1.ConditionFalse, valkeyv1.ReasonRestoreInitFailed, valkeyv1.ReasonRestoreInitFailed, msg)
			return true
		}
		p.setRestored(metav1.ConditionFalse, valkeyv1.ReasonRestoreLoading, fmt.Sprintf("Loading a backup of %d shards", st.Shards))
		return true
	case valkeyv1.RestorePhaseFailed:
		// Terminal: the backup's objects do not change. The condition keeps the reason.
		r := conditions.Get(c.Status.Conditions, valkeyv1.ConditionRestored)
		if r != nil {
			p.fail(r.Reason, "", r.Message)
		}
		return false
	}
	rec := c.Spec.Bootstrap.Recovery
	spec := rec.ObjectStore
	if spec == nil && c.Spec.Backup != nil {
		spec = &c.Spec.Backup.ObjectStore
	}
	if spec == nil {
		return p.restoreWait(valkeyv1.ReasonRestoreNoObjectStore, "Neither spec.bootstrap.recovery.objectStore nor spec.backup.objectStore says where the backup is: set one")
	}
	access := restore.Access{}
	bucket, dir := spec.Bucket, path.Dir(rec.Manifest)
	if rec.Backup != nil {
		var b valkeyv1.ValkeyBackup
		if err := p.ctl.client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: rec.Backup.Name}, &b); err != nil {
			if apierrors.IsNotFound(err) {
				return p.restoreWait(valkeyv1.ReasonBackupNotFound, "The ValkeyBackup named in spec.bootstrap.recovery.backup does not exist in this namespace")
			}
			return p.restoreWait(valkeyv1.ReasonBackupNotFound, "The ValkeyBackup named in spec.bootstrap.recovery.backup cannot be read; see the operator's log")
		}
		if b.Status.Phase != valkeyv1.BackupPhaseCompleted {
			return p.restoreWait(valkeyv1.ReasonBackupNotCompleted, "The ValkeyBackup named in spec.bootstrap.recovery.backup is not Completed: only a complete backup is restored; the restore starts once it is")
		}
		if b.Status.Bucket != "" {
			bucket = b.Status.Bucket
		}
		dir = b.Status.Path
	}
	var err error
	if access, err = restore.ReadAccess(ctx, p.ctl.reader, c.Namespace, spec); err != nil {
		log.FromContext(ctx).Info("Restore waits for its object store settings", "error", err.Error())
		return p.restoreWait(valkeyv1.ReasonRestoreCredentialsMissing, "The object store's credentials or CA Secret is missing or lacks a key; see the operator's log")
	}
	access.Settings.Bucket = bucket
	store, err := access.Open()
	if err != nil {
		return p.restoreRefuse(valkeyv1.ReasonManifestInvalid, fmt.Sprintf("The object store settings are not usable: %v", err))
	}
	m, err := restore.ReadManifest(ctx, store, dir)
	switch {
	case errors.Is(err, restore.ErrNoManifest):
		return p.restoreWait(valkeyv1.ReasonManifestNotFound, fmt.Sprintf("%s/%s has no %s: the backup is partial or still running, and a partial backup is never restored", bucket, dir, restore.ManifestName))
	case err != nil && strings.HasPrefix(err.Error(), "objectstore:"):
		log.FromContext(ctx).Info("Restore could not read the manifest", "error", err.Error())
		return p.restoreWait(valkeyv1.ReasonManifestNotFound, "The backup's manifest cannot be read from the object store; see the operator's log")
	case err != nil:
		return p.restoreFailed(valkeyv1.ReasonManifestInvalid, fmt.Sprintf("The backup's manifest cannot be restored: %v", err))
	}
	if held := p.heldVolumes(ctx, max(len(m.Shards), int(c.Spec.Shards))); len(held) > 0 {
		return p.restoreRefuse(valkeyv1.ReasonClusterNotEmpty, fmt.Sprintf("The data volumes %s already exist (kept from an earlier cluster of this name): a restore never writes over data; delete them or restore into a cluster of another name", strings.Join(held, ", ")))
	}
	if err := restore.Verify(ctx, store, dir, m); err != nil {
		var ce *restore.CorruptError
		if errors.As(err, &ce) {
			return p.restoreFailed(valkeyv1.ReasonChecksumMismatch, fmt.Sprintf("The backup is corrupt, so nothing was created: %v (object store %s/%s)", ce, bucket, dir))
		}
		log.FromContext(ctx).Info("Restore could not read the backup's objects", "error", err.Error())
		return p.restoreWait(valkeyv1.ReasonManifestNotFound, "The backup's objects cannot be read from the object store; see the operator's log")
	}
	data := map[string][]byte{
		restore.SecretKeyAccessKeyID:     []byte(access.Credentials.AccessKeyID),
		restore.SecretKeySecretAccessKey: []byte(access.Credentials.SecretAccessKey),
	}
	if access.Credentials.SessionToken != "" {
		data[restore.SecretKeySessionToken] = []byte(access.Credentials.SessionToken)
	}
	if len(access.Settings.CA) > 0 {
		data[restore.SecretKeyCA] = access.Settings.CA
	}
	for _, sh := range m.Shards {
		data[restore.SecretKeyShard(sh.Index)] = restore.Source{Endpoint: spec.Endpoint, Bucket: bucket, Region: spec.Region,
			PathStyle: spec.ForcePathStyle, Object: path.Join(dir, sh.Object), Size: sh.Size, SHA256: sh.SHA256,
			Slots: sh.Slots, Keys: sh.Keys, Restore: string(c.UID) + "/" + dir}.Encode()
	}
	if _, _, err := p.applyOwned(ctx, resources.Secret(c, resources.RestoreSecretName(c.Name), data)); err != nil {
		p.fail(valkeyv1.ReasonRestoreLoading, "", fmt.Sprintf("Failed to write the restore Secret %s: %v", resources.RestoreSecretName(c.Name), err))
		return false
	}
	now := metav1.NewTime(p.now)
	*st = valkeyv1.RestoreStatus{Phase: valkeyv1.RestorePhaseLoading, Bucket: bucket, Path: dir, Shards: int32(len(m.Shards)),
		Keys: m.Keys, Size: m.Size, StartedAt: &now}
	msg := fmt.Sprintf("Restoring %d shards, %d keys, %d bytes (every object checked against its SHA-256) from %s/%s", len(m.Shards), m.Keys, m.Size, bucket, dir)
	p.setRestored(metav1.ConditionFalse, valkeyv1.ReasonRestoreLoading, fmt.Sprintf("Loading a backup of %d shards", len(m.Shards)))
	p.normal(valkeyv1.ReasonRestoreLoading, msg)
	return true
}

// failedRestoreInit names the first member pod (by name) whose restore-rdb init container
// last exited with an error, and its exit code.
func (p *pass) failedRestoreInit(ctx context.Context) (string, int32) {
	var pods corev1.PodList
	if err := p.ctl.client.List(ctx, &pods, client.InNamespace(p.c.Namespace), client.MatchingLabels(resources.PodSelector(p.c.Name))); err != nil {
		return "", 0
	}
	slices.SortFunc(pods.Items, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	for _, pod := range pods.Items {
		for _, cs := range pod.Status.InitContainerStatuses {
			if cs.Name != resources.RestoreContainer {
				continue
			}
			// Failed now, or waiting to be retried (CrashLoopBackOff) after a failure.
			if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
				return pod.Name, t.ExitCode
			}
			if t := cs.LastTerminationState.Terminated; cs.State.Waiting != nil && t != nil && t.ExitCode != 0 {
				return pod.Name, t.ExitCode
			}
		}
	}
	return "", 0
}

// heldVolumes are the data PVCs of the members a restore would create that already exist.
func (p *pass) heldVolumes(ctx context.Context, shards int) []string {
	var out []string
	for s := range shards {
		for i := 0; i <= int(p.c.Spec.Replicas); i++ {
			name := resources.PVCName(resources.NodeName(p.c.Name, s, i))
			var pvc corev1.PersistentVolumeClaim
			if err := p.ctl.client.Get(ctx, client.ObjectKey{Namespace: p.c.Namespace, Name: name}, &pvc); err == nil {
				out = append(out, name)
			}
		}
	}
	return out
}

// restoreSlots runs while the restore loads, once every member answers and before the
// planner: each shard's primary must have started with its RDB (it then owns the slots it
// holds keys of), and gets the rest of its manifest slots. It returns false while the
// planner must wait.
func (p *pass) restoreSlots(ctx context.Context, exec *executor.Executor, snap valkey.Snapshot, set nodeSet) bool {
	if p.restoreShards() == 0 {
		return true
	}
	sources, err := p.restoreSources(ctx)
	if err != nil {
		p.fail(valkeyv1.ReasonRestoreLoading, "", fmt.Sprintf("The restore Secret %s is gone or unreadable before the restore completed: %v", resources.RestoreSecretName(p.c.Name), err))
		return false
	}
	var steps []planner.Step
	var waiting []string
	for _, m := range set.desired {
		src, ok := sources[int(m.node.Spec.ShardIndex)]
		if !ok || m.node.Spec.NodeIndex != 0 {
			continue
		}
		v, ok := snap.View(m.addr)
		me, _ := v.Myself()
		if !ok || !me.Primary {
			continue // a failover already happened: the slots are owned, nothing to add
		}
		owners := v.Owners()
		var mine, missing []int
		for _, r := range src.Slots {
			for s := r.Start; s <= r.End; s++ {
				switch owners[s] {
				case me.ID:
					mine = append(mine, s)
				case "":
					missing = append(missing, s)
				}
			}
		}
		switch {
		case len(missing) == 0:
		case len(mine) == 0 && src.Keys > 0 && len(v.Nodes) == 1:
			// Started without its RDB (the init container found nothing to load).
			waiting = append(waiting, m.node.Name)
		default:
			steps = append(steps, planner.Step{Op: planner.AddSlots, On: m.addr, NodeID: me.ID, Ranges: valkey.Ranges(missing)})
		}
	}
	if len(waiting) > 0 {
		slices.Sort(waiting)
		p.progress, p.progressMsg = valkeyv1.ReasonRestoreLoading, fmt.Sprintf("Waiting for %s to start with its shard's RDB (its restore-rdb init container)", strings.Join(waiting, ", "))
		return false
	}
	if len(steps) == 0 {
		return true
	}
	if _, err := exec.Run(ctx, steps); err != nil {
		log.FromContext(ctx).Info("Assigning the backup's slots failed; observing again", "error", err.Error())
	}
	p.progress, p.progressMsg = valkeyv1.ReasonRestoreLoading, "Assigning each restored primary its backed-up slots"
	return false
}

// restoreSources reads the shards' sources from the restore Secret.
func (p *pass) restoreSources(ctx context.Context) (map[int]restore.Source, error) {
	var sec corev1.Secret
	if err := p.ctl.reader.Get(ctx, client.ObjectKey{Namespace: p.c.Namespace, Name: resources.RestoreSecretName(p.c.Name)}, &sec); err != nil {
		return nil, err
	}
	out := map[int]restore.Source{}
	for i := range int(p.c.Status.Restore.Shards) {
		raw, ok := sec.Data[restore.SecretKeyShard(i)]
		if !ok {
			return nil, fmt.Errorf("no entry for shard %d", i)
		}
		src, err := restore.DecodeSource(raw)
		if err != nil {
			return nil, err
		}
		out[i] = src
	}
	return out, nil
}

// restoreEnd completes a loading restore once the cluster is healthy with the backup's
// shards: every slot served, every replica in sync. It reports whether it completed it.
func (p *pass) restoreEnd(ctx context.Context, specShards int32) bool {
	if p.restoreShards() == 0 || !p.healthy {
		return false
	}
	st := p.c.Status.Restore
	now := metav1.NewTime(p.now)
	st.Phase, st.CompletedAt = valkeyv1.RestorePhaseCompleted, &now
	msg := fmt.Sprintf("Restored %d shards (%d keys) from %s/%s", st.Shards, st.Keys, st.Bucket, st.Path)
	p.setRestored(metav1.ConditionTrue, valkeyv1.ReasonRestoreCompleted, msg)
	p.normalOn(valkeyv1.ConditionRestored, metav1.ConditionTrue, valkeyv1.ReasonRestoreCompleted, valkeyv1.ReasonRestoreCompleted, msg)
	if st.Shards != specShards {
		// spec.shards applies from the next pass on: the cluster reshards.
		p.healthy = false
		p.progress, p.progressMsg = valkeyv1.ReasonReconciling, fmt.Sprintf("Restored %d shards; resharding to spec.shards %d", st.Shards, specShards)
	}
	p.dropRestoreSecret(ctx)
	return true
}

// dropRestoreSecret deletes the restore Secret (its keys and sources are needed no more).
func (p *pass) dropRestoreSecret(ctx context.Context) bool {
	var sec corev1.Secret
	key := client.ObjectKey{Namespace: p.c.Namespace, Name: resources.RestoreSecretName(p.c.Name)}
	if err := p.ctl.client.Get(ctx, key, &sec); err != nil {
		return true // gone (or never cached: it carries our label, so it is gone)
	}
	if owner := metav1.GetControllerOf(&sec); owner == nil || owner.UID != p.c.UID {
		return true
	}
	uid := sec.UID
	if err := p.ctl.client.Delete(ctx, &sec, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
		log.FromContext(ctx).Info("Deleting the restore Secret failed; trying again", "error", err.Error())
	}
	return true
}

func (p *pass) setRestored(status metav1.ConditionStatus, reason, msg string) {
	conditions.Set(&p.c.Status.Conditions, metav1.Condition{Type: valkeyv1.ConditionRestored, Status: status, Reason: reason, Message: msg}, p.c.Generation)
}

// restoreWait: the restore waits for something outside it (Progressing says what).
func (p *pass) restoreWait(reason, msg string) bool {
	p.c.Status.Restore.Phase = valkeyv1.RestorePhasePending
	p.setRestored(metav1.ConditionFalse, reason, msg)
	p.progress, p.progressMsg = reason, msg
	return false
}

// restoreRefuse: the restore is refused until the user acts (checked again each pass).
func (p *pass) restoreRefuse(reason, msg string) bool {
	p.c.Status.Restore.Phase = valkeyv1.RestorePhasePending
	p.setRestored(metav1.ConditionFalse, reason, msg)
	p.fail(reason, reason, msg)
	return false
}

// restoreFailed: the backup can never be restored; nothing was created.
func (p *pass) restoreFailed(reason, msg string) bool {
	now := metav1.NewTime(p.now)
	p.c.Status.Restore.Phase, p.c.Status.Restore.CompletedAt = valkeyv1.RestorePhaseFailed, &now
	p.setRestored(metav1.ConditionFalse, reason, msg)
	p.fail(reason, reason, msg)
	return false
}
