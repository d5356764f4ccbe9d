package backupschedule

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// RetentionConfig is what a retention controller needs besides the manager and the product.
type RetentionConfig struct {
	// Name is the controller's name: events come from it.
	Name string
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// retention applies a cluster's spec.backup.retentionPolicy and keepLast to its backups
// (manual and scheduled alike): it deletes each expired backup's objects from the store,
// then the backup. It writes no status of its own: the cluster's status belongs to the
// cluster controller; what it deletes is an event on the cluster.
type retention[S, C, B client.Object] struct {
	cfg     RetentionConfig
	product Product[S, C, B]
	client  client.Client
	rec     events.EventRecorder
}

// SetupRetention registers a retention controller with mgr. It looks at a cluster when
// its spec or one of its backups changes, and again when the next kept backup expires.
// The caller holds the RBAC marker for deleting backups.
func SetupRetention[S, C, B client.Object](mgr ctrl.Manager, p Product[S, C, B], cfg RetentionConfig) error {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	r := &retention[S, C, B]{cfg: cfg, product: p, client: mgr.GetClient(), rec: mgr.GetEventRecorder(cfg.Name)}
	return ctrl.NewControllerManagedBy(mgr).
		Named(cfg.Name).
		// The cluster's status changes often and says nothing retention needs.
		For(p.NewCluster(), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(p.NewBackup(), handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			b, ok := o.(B)
			if !ok {
				return nil
			}
			return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: b.GetNamespace(), Name: p.Backup(b).Cluster}}}
		})).
		Complete(r)
}

// policyOf reads a cluster's policy; ok is false when it has none. The API server
// validated the window's form; a value it let through that does not parse prunes nothing.
func (r *retention[S, C, B]) policyOf(c C) (Retention, bool, error) {
	window, keepLast, ok := r.product.Retention(c)
	if !ok {
		return Retention{}, false, nil
	}
	w, err := ParseWindow(window)
	if err != nil {
		return Retention{}, false, fmt.Errorf("retentionPolicy %q: %w", window, err)
	}
	p := Retention{Window: w, KeepLast: int(keepLast)}
	return p, p.Enabled(), nil
}

// view is a backup as Prune judges it.
func view(name string, created time.Time, info BackupInfo) Backup {
	out := Backup{Name: name, State: StateOf(info.Phase), Time: created}
	if info.StoppedAt != nil {
		out.Time = *info.StoppedAt
	}
	return out
}

func (r *retention[S, C, B]) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	logger := log.FromContext(ctx)
	c := r.product.NewCluster()
	if err := r.client.Get(ctx, req.NamespacedName, c); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	policy, ok, err := r.policyOf(c)
	if err != nil {
		logger.Info("Retention skipped a policy it cannot read", "error", err.Error())
		return reconcile.Result{}, nil
	}
	if !ok {
		return reconcile.Result{}, nil
	}
	list := r.product.NewBackupList()
	if err := r.client.List(ctx, list, client.InNamespace(c.GetNamespace())); err != nil {
		return reconcile.Result{}, err
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return reconcile.Result{}, err
	}
	byName := map[string]B{}
	var views []Backup
	for _, o := range items {
		b, ok := o.(B)
		if !ok || r.product.Backup(b).Cluster != c.GetName() || !b.GetDeletionTimestamp().IsZero() {
			continue
		}
		byName[b.GetName()] = b
		views = append(views, view(b.GetName(), b.GetCreationTimestamp().Time, r.product.Backup(b)))
	}
	now := r.cfg.Now()
	verdict, err := Prune(views, policy, now)
	if err != nil {
		return reconcile.Result{}, reconcile.TerminalError(err)
	}
	if len(verdict.Prune) > 0 {
		if err := r.prune(ctx, c, byName, verdict.Prune); err != nil {
			return reconcile.Result{}, err
		}
	}
	if verdict.Recheck.IsZero() {
		return reconcile.Result{}, nil
	}
	// A second late: the window is closed at Recheck itself.
	return reconcile.Result{RequeueAfter: max(verdict.Recheck.Sub(now), 0) + time.Second}, nil
}

// prune deletes each backup's objects from the store, then the backup: a backup whose
// objects could not be deleted stays listed, so the next pass tries again and no object
// is left without a record of it.
func (r *retention[S, C, B]) prune(ctx context.Context, c C, byName map[string]B, names []string) error {
	logger := log.FromContext(ctx)
	store, err := r.product.OpenStore(ctx, c)
	if err != nil {
		// The backups wait with CredentialsMissing too; a watch event brings this back.
		logger.Info("Retention waits for the object store's settings", "cluster", c.GetName(), "error", err.Error())
		return nil
	}
	for _, name := range names {
		b := byName[name]
		info, dir := r.product.Backup(b), r.product.Folder(b)
		if info.Path != "" && (info.Bucket != store.Bucket() || info.Path != store.Key(dir)) {
			r.rec.Eventf(c, b, corev1.EventTypeWarning, ReasonPruneSkipped, ReasonPruneSkipped,
				"Backup %s is stored in %s/%s, not where spec.backup.objectStore points now: retention leaves it and its objects alone.", b.GetName(), info.Bucket, info.Path)
			continue
		}
		n, err := store.DeleteAll(ctx, dir+"/")
		if err != nil {
			logger.Info("Retention could not delete a backup's objects", "backup", b.GetName(), "error", err.Error())
			return fmt.Errorf("deleting the objects of backup %s", b.GetName())
		}
		uid := b.GetUID()
		if err := r.client.Delete(ctx, b, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		logger.Info("Retention deleted a backup", "backup", b.GetName(), "objects", n, "phase", info.Phase)
		r.rec.Eventf(c, b, corev1.EventTypeNormal, ReasonBackupPruned, ReasonBackupPruned,
			"Deleted backup %s (%s, %d objects) under the retention policy.", b.GetName(), info.Phase, n)
	}
	return nil
}
