package backup

import (
	"context"
	"fmt"
	"time"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/shared/backupschedule"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// RetentionName is the retention controller's name: events come from it.
const RetentionName = "memgraphbackup-retention"

// +kubebuilder:rbac:groups=memgraph.com,resources=memgraphbackups,verbs=delete

// RetentionConfig is what the retention controller needs besides the manager.
type RetentionConfig struct {
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// retention applies a cluster's spec.backup.retentionPolicy and keepLast to its
// MemgraphBackups (manual and scheduled alike): it deletes each expired backup's objects
// from the store, then the MemgraphBackup. It writes no status of its own: the cluster's
// status belongs to the cluster controller; what it deletes is an event on the cluster.
type retention struct {
	cfg     RetentionConfig
	client  client.Client
	secrets client.Reader
	rec     events.EventRecorder
}

// SetupRetention registers the retention controller with mgr. It looks at a cluster when
// its spec or one of its backups changes, and again when the next kept backup expires.
func SetupRetention(mgr ctrl.Manager, cfg RetentionConfig) error {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	r := &retention{cfg: cfg, client: mgr.GetClient(), secrets: mgr.GetAPIReader(),
		rec: mgr.GetEventRecorder(RetentionName)}
	return ctrl.NewControllerManagedBy(mgr).
		Named(RetentionName).
		// The cluster's status changes often and says nothing retention needs.
		For(&memgraphv1.MemgraphCluster{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&memgraphv1.MemgraphBackup{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			b, ok := o.(*memgraphv1.MemgraphBackup)
			if !ok {
				return nil
			}
			return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: b.Namespace, Name: b.Spec.Cluster.Name}}}
		})).
		Complete(r)
}

// retentionOf reads a cluster's policy; ok is false when it has none. The API server
// validated the window's form; a value it let through that does not parse prunes nothing.
func retentionOf(vc *memgraphv1.MemgraphCluster) (backupschedule.Retention, bool, error) {
	if vc.Spec.Backup == nil {
		return backupschedule.Retention{}, false, nil
	}
	w, err := backupschedule.ParseWindow(vc.Spec.Backup.RetentionPolicy)
	if err != nil {
		return backupschedule.Retention{}, false, err
	}
	r := backupschedule.Retention{Window: w, KeepLast: int(vc.Spec.Backup.KeepLast)}
	return r, r.Enabled(), nil
}

// retentionView is a MemgraphBackup as retention judges it.
func retentionView(b *memgraphv1.MemgraphBackup) backupschedule.Backup {
	out := backupschedule.Backup{Name: b.Name, State: backupschedule.InProgress, Time: b.CreationTimestamp.Time}
	if b.Status.StoppedAt != nil {
		out.Time = b.Status.StoppedAt.Time
	}
	switch b.Status.Phase {
	case memgraphv1.BackupPhaseCompleted:
		out.State = backupschedule.Completed
	case memgraphv1.BackupPhaseFailed:
		out.State = backupschedule.Failed
	}
	return out
}

func (r *retention) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	logger := log.FromContext(ctx)
	var vc memgraphv1.MemgraphCluster
	if err := r.client.Get(ctx, req.NamespacedName, &vc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	policy, ok, err := retentionOf(&vc)
	if err != nil {
		logger.Info("Retention skipped a policy it cannot read", "retentionPolicy", vc.Spec.Backup.RetentionPolicy, "error", err.Error())
		return reconcile.Result{}, nil
	}
	if !ok {
		return reconcile.Result{}, nil
	}
	var list memgraphv1.MemgraphBackupList
	if err := r.client.List(ctx, &list, client.InNamespace(vc.Namespace)); err != nil {
		return reconcile.Result{}, err
	}
	byName := map[string]*memgraphv1.MemgraphBackup{}
	var views []backupschedule.Backup
	for i := range list.Items {
		b := &list.Items[i]
		if b.Spec.Cluster.Name != vc.Name || !b.DeletionTimestamp.IsZero() {
			continue
		}
		byName[b.Name] = b
		views = append(views, retentionView(b))
	}
	now := r.cfg.Now()
	verdict, err := backupschedule.Prune(views, policy, now)
	if err != nil {
		return reconcile.Result{}, reconcile.TerminalError(err)
	}
	if len(verdict.Prune) > 0 {
		if err := r.prune(ctx, &vc, byName, verdict.Prune); err != nil {
			return reconcile.Result{}, err
		}
	}
	if verdict.Recheck.IsZero() {
		return reconcile.Result{}, nil
	}
	// A second late: the window is closed at Recheck itself.
	return reconcile.Result{RequeueAfter: max(verdict.Recheck.Sub(now), 0) + time.Second}, nil
}

// prune deletes each backup's objects from the store, then the MemgraphBackup: a backup
// whose objects could not be deleted stays listed, so the next pass tries again and no
// object is left without a record of it.
func (r *retention) prune(ctx context.Context, vc *memgraphv1.MemgraphCluster, byName map[string]*memgraphv1.MemgraphBackup, names []string) error {
	logger := log.FromContext(ctx)
	store, err := OpenStore(ctx, r.secrets, vc)
	if err != nil {
		// The backups wait with CredentialsMissing too; a watch event brings this back.
		logger.Info("Retention waits for the object store's settings", "cluster", vc.Name, "error", err.Error())
		return nil
	}
	for _, name := range names {
		b := byName[name]
		dir := Layout(b)
		if b.Status.Path != "" && (b.Status.Bucket != store.Bucket() || b.Status.Path != store.Key(dir)) {
			r.rec.Eventf(vc, b, corev1.EventTypeWarning, memgraphv1.BackupReasonPruneSkipped, memgraphv1.BackupReasonPruneSkipped,
				"Backup %s is stored in %s/%s, not where spec.backup.objectStore points now: retention leaves it and its objects alone.", b.Name, b.Status.Bucket, b.Status.Path)
			continue
		}
		n, err := store.DeleteAll(ctx, dir+"/")
		if err != nil {
			logger.Info("Retention could not delete a backup's objects", "backup", b.Name, "error", err.Error())
			return fmt.Errorf("deleting the objects of backup %s", b.Name)
		}
		uid := b.UID
		if err := r.client.Delete(ctx, b, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		logger.Info("Retention deleted a backup", "backup", b.Name, "objects", n, "phase", b.Status.Phase)
		r.rec.Eventf(vc, b, corev1.EventTypeNormal, memgraphv1.BackupReasonBackupPruned, memgraphv1.BackupReasonBackupPruned,
			"Deleted backup %s (%s, %d objects) under the retention policy.", b.Name, b.Status.Phase, n)
	}
	return nil
}
