package controller

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/services/memgraph-operator/internal/controller/backup"
	"github.com/opsuite/suite/services/memgraph-operator/internal/resources"
	"github.com/opsuite/suite/services/memgraph-operator/internal/snapshot"
	"github.com/opsuite/suite/shared/conditions"
	"github.com/opsuite/suite/shared/objectstore"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// +kubebuilder:rbac:groups=memgraph.com,resources=memgraphbackups,verbs=list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=create

// restoreFinding is what the bootstrap step found for the Restored condition.
type restoreFinding struct {
	// source is the backup the first data instance starts from; nil when none (yet).
	source *resources.RestoreSource
	// reason and msg explain a restore that cannot go on; "" when it can.
	reason, msg string
}

// Stable messages of the Restored condition.
const (
	msgRestored           = "The first data instance started from the backup's snapshot and holds MAIN"
	msgRestoreInProgress  = "The backup was verified; the first data instance downloads its snapshot (init container restore) and starts from it"
	msgBackupNotFound     = "spec.bootstrap.backup names no MemgraphBackup in this namespace: create it or name another; no pod is created until then"
	msgBackupNotCompleted = "The MemgraphBackup named by spec.bootstrap.backup is not Completed; only a complete backup is restored"
	msgBackupUnreadable   = "The backup's manifest or files could not be read from the object store (see the operator's log); nothing was created, the next pass tries again"
	msgRestoreFailed      = "The restore init container of the first data instance failed: its termination message says why (a volume that already holds data is never overwritten; a file that no longer matches its manifest is not used); the kubelet retries it"
	msgBackupCorrupted    = "A file of the backup is missing or does not match its manifest (size, SHA-256, or the epoch and commit timestamps it records; see the operator's log): nothing was created or written, and the backup was left as it is; restore another backup into a new cluster"
	msgManifestInvalid    = "The backup's manifest is not one this operator restores: an unknown format, or files, timestamps and epoch that do not agree (see the operator's log); nothing was created or written, and the backup was left as it is; restore another backup into a new cluster"
)

// bootstrap decides where the first data instance restores from. Before the data
// StatefulSet exists, the MemgraphBackup must be Completed and every stored file must
// match its manifest (read through once, nothing written): a restore that would fail
// creates no pod. Once the StatefulSet exists its restore container is kept as it is,
// so the template never changes because the backup object went away.
func (p *pass) bootstrap(ctx context.Context, live *appsv1.StatefulSet) error {
	c := p.c
	if c.Spec.Bootstrap == nil || c.Spec.Backup == nil {
		return nil
	}
	if live != nil {
		p.restore.source = restoreSourceOf(live)
		return p.restoreContainerFailed(ctx)
	}
	var b memgraphv1.MemgraphBackup
	if err := p.ctl.client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.Spec.Bootstrap.Backup.Name}, &b); err != nil {
		if !apierrors.IsNotFound(err) {
			return err
		}
		p.restore.reason, p.restore.msg = memgraphv1.ReasonBackupNotFound, msgBackupNotFound
		return nil
	}
	if b.Status.Phase != memgraphv1.BackupPhaseCompleted || b.Status.Bucket == "" || b.Status.Path == "" {
		p.restore.reason, p.restore.msg = memgraphv1.ReasonBackupNotCompleted, msgBackupNotCompleted
		return nil
	}
	src := &resources.RestoreSource{Bucket: b.Status.Bucket, Path: b.Status.Path}
	switch cond := conditions.Get(c.Status.Conditions, memgraphv1.ConditionRestored); {
	case cond != nil && cond.Reason == memgraphv1.ReasonRestoreInProgress:
		// Verified by an earlier pass whose StatefulSet write did not land.
		p.restore.source = src
		return nil
	case cond != nil && (cond.Reason == memgraphv1.ReasonBackupCorrupted || cond.Reason == memgraphv1.ReasonManifestInvalid):
		// Final for this cluster: the backup is not read again on every pass.
		p.restore.reason, p.restore.msg = cond.Reason, cond.Message
		return nil
	}
	settings, cred, err := backup.StoreSettings(ctx, p.ctl.secrets, c)
	if err != nil {
		log.FromContext(ctx).Info("Restore waits for the object store settings", "error", err.Error())
		p.restore.reason, p.restore.msg = memgraphv1.ReasonBackupUnreadable, msgBackupUnreadable
		return nil
	}
	// The backup's folder is a full key in its own bucket, whatever this cluster's prefix.
	settings.Bucket, settings.Prefix = src.Bucket, ""
	store, err := objectstore.New(settings, cred)
	if err == nil {
		_, err = snapshot.Verify(ctx, store, src.Path)
	}
	switch {
	case snapshot.IsManifestInvalid(err):
		log.FromContext(ctx).Error(err, "Backup manifest invalid: nothing restored", "memgraphBackup", b.Name)
		p.restore.reason, p.restore.msg = memgraphv1.ReasonManifestInvalid, msgManifestInvalid
		return nil
	case snapshot.IsCorrupted(err):
		log.FromContext(ctx).Error(err, "Backup corrupted: nothing restored", "memgraphBackup", b.Name)
		p.restore.reason, p.restore.msg = memgraphv1.ReasonBackupCorrupted, msgBackupCorrupted
		return nil
	case err != nil:
		log.FromContext(ctx).Info("Backup could not be read: nothing restored yet", "memgraphBackup", b.Name, "error", err.Error())
		p.restore.reason, p.restore.msg = memgraphv1.ReasonBackupUnreadable, msgBackupUnreadable
		return nil
	}
	p.restore.source = src
	return nil
}

// restoreContainerFailed reads the first data pod's restore container: a failed run (it
// exits non-zero, the kubelet retries it) is RestoreFailed until it succeeds.
func (p *pass) restoreContainerFailed(ctx context.Context) error {
	if cond := conditions.Get(p.c.Status.Conditions, memgraphv1.ConditionRestored); cond != nil && cond.Status == metav1.ConditionTrue {
		return nil
	}
	var pod corev1.Pod
	err := p.ctl.client.Get(ctx, client.ObjectKey{Namespace: p.c.Namespace, Name: resources.PodName(p.c.Name, resources.RoleData, resources.RestoreOrdinal)}, &pod)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, s := range pod.Status.InitContainerStatuses {
		if s.Name != resources.ContainerRestore {
			continue
		}
		t := s.State.Terminated
		if t == nil && s.State.Waiting != nil {
			t = s.LastTerminationState.Terminated
		}
		if t != nil && t.ExitCode != 0 {
			p.restore.reason, p.restore.msg = memgraphv1.ReasonRestoreFailed, msgRestoreFailed
		}
	}
	return nil
}

// restoreSourceOf reads the restore container's source back from a live StatefulSet.
func restoreSourceOf(sts *appsv1.StatefulSet) *resources.RestoreSource {
	for _, ic := range sts.Spec.Template.Spec.InitContainers {
		if ic.Name != resources.ContainerRestore {
			continue
		}
		var s resources.RestoreSource
		for _, a := range ic.Args {
			if v, ok := strings.CutPrefix(a, "--bucket="); ok {
				s.Bucket = v
			}
			if v, ok := strings.CutPrefix(a, "--backup-path="); ok {
				s.Path = v
			}
		}
		return &s
	}
	return nil
}

// restoreBlocked says the data StatefulSet must not be written yet.
func (p *pass) restoreBlocked() bool {
	return p.c.Spec.Bootstrap != nil && p.c.Spec.Backup != nil && p.restore.source == nil && p.restore.reason != ""
}

// setRestored: absent without spec.bootstrap; True once the registration has a MAIN on the
// restored cluster, and True for good after that.
func (p *pass) setRestored(set setFunc) {
	if p.c.Spec.Bootstrap == nil {
		return
	}
	if cond := conditions.Get(p.c.Status.Conditions, memgraphv1.ConditionRestored); cond != nil && cond.Status == metav1.ConditionTrue {
		return
	}
	switch {
	case p.restore.reason != "":
		set(memgraphv1.ConditionRestored, metav1.ConditionFalse, p.restore.reason, p.restore.msg)
	case p.reg != nil && p.reg.Main != "":
		set(memgraphv1.ConditionRestored, metav1.ConditionTrue, memgraphv1.ReasonRestored, msgRestored)
	case p.restore.source != nil:
		set(memgraphv1.ConditionRestored, metav1.ConditionFalse, memgraphv1.ReasonRestoreInProgress, msgRestoreInProgress)
	}
}

// ensureAgentToken creates the cluster's backup agent token Secret once (a random value,
// owned by the cluster); it is never rewritten, so the sidecars keep the token they have.
func (p *pass) ensureAgentToken(ctx context.Context) error {
	if p.c.Spec.Backup == nil || p.ctl.cfg.OperatorImage == "" {
		return nil
	}
	var s corev1.Secret
	err := p.ctl.secrets.Get(ctx, client.ObjectKey{Namespace: p.c.Namespace, Name: resources.BackupAgentSecretName(p.c.Name)}, &s)
	if err == nil || !apierrors.IsNotFound(err) {
		return err
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return err
	}
	sec := resources.BackupAgentSecret(p.c, hex.EncodeToString(b))
	if err := controllerutil.SetControllerReference(p.c, sec, p.ctl.client.Scheme()); err != nil {
		return err
	}
	if err := p.ctl.client.Create(ctx, sec); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the backup agent token Secret %s: %w", sec.Name, err)
	}
	return nil
}
