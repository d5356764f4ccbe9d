// Package backup is the ValkeyBackup controller: per shard it streams a consistent RDB
// from an in-sync replica (the primary only when the shard has none) straight into the
// cluster's object store, over the replication protocol (valkey.StreamRDB), so no pod's
// disk is touched; then it writes a manifest, which makes the backup restorable.
package backup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
	"time"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	"github.com/opsuite/suite/services/valkey-operator/internal/connect"
	clustercontroller "github.com/opsuite/suite/services/valkey-operator/internal/controller/cluster"
	"github.com/opsuite/suite/services/valkey-operator/internal/resources"
	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
	"github.com/opsuite/suite/shared/backupschedule"
	"github.com/opsuite/suite/shared/conditions"
	"github.com/opsuite/suite/shared/metrics"
	"github.com/opsuite/suite/shared/objectstore"
	"github.com/opsuite/suite/shared/reconciler"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// Name is the controller's name: events come from it.
const Name = "valkeybackup-controller"

// Reads go through the manager's cache (list and watch); Secrets are read live.
// +kubebuilder:rbac:groups=valkey.io,resources=valkeybackups;valkeyclusters;valkeynodes,verbs=list;watch
// +kubebuilder:rbac:groups=valkey.io,resources=valkeybackups/status,verbs=patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Config is what the controller needs besides the manager; zero fields take the defaults.
type Config struct {
	// Operator names the metrics.
	Operator string
	// Members are the addresses of the cluster's members (default: its ValkeyNodes' pod
	// IPs and the client port).
	Members func(ctx context.Context, c *valkeyv1.ValkeyCluster) ([]string, error)
	// Options are the credentials for the members (default: the operator's user).
	Options func(ctx context.Context, c *valkeyv1.ValkeyCluster) (valkey.Options, error)
	// Dial opens an admin connection (default valkey.Dial).
	Dial func(addr string, o valkey.Options) (valkey.Conn, error)
	// Stream takes one member's snapshot (default valkey.StreamRDB).
	Stream func(ctx context.Context, addr string, o valkey.Options, consume func(io.Reader) error) (valkey.RDBInfo, error)
	// Poll is how soon a waiting backup looks again.
	Poll time.Duration
	// Attempts is how often a shard's upload is tried before the backup fails.
	Attempts int
	// RetryDelay is the pause before a shard's next attempt (times the attempt number).
	RetryDelay time.Duration
	// Timeout bounds one backup pass (every shard).
	Timeout time.Duration
}

func (cfg *Config) defaults(c client.Client, secrets client.Reader) {
	if cfg.Operator == "" {
		cfg.Operator = "valkey-operator"
	}
	if cfg.Members == nil {
		cfg.Members = func(ctx context.Context, vc *valkeyv1.ValkeyCluster) ([]string, error) {
			var list valkeyv1.ValkeyNodeList
			if err := c.List(ctx, &list, client.InNamespace(vc.Namespace), client.MatchingLabels{resources.LabelCluster: vc.Name}); err != nil {
				return nil, err
			}
			var out []string
			for i := range list.Items {
				if a := clustercontroller.PodAddr(&list.Items[i]); a != "" {
					out = append(out, a)
				}
			}
			return out, nil
		}
	}
	if cfg.Options == nil {
		cfg.Options = func(ctx context.Context, vc *valkeyv1.ValkeyCluster) (valkey.Options, error) {
			return connect.Options(ctx, secrets, vc.Namespace, vc.Name, clustercontroller.TLSSecretName(vc))
		}
	}
	if cfg.Dial == nil {
		cfg.Dial = valkey.Dial
	}
	if cfg.Stream == nil {
		cfg.Stream = valkey.StreamRDB
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 10 * time.Second
	}
	if cfg.Attempts <= 0 {
		cfg.Attempts = 3
	}
	if cfg.RetryDelay <= 0 {
		cfg.RetryDelay = 2 * time.Second
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 6 * time.Hour
	}
}

type controller struct {
	cfg     Config
	client  client.Client
	secrets client.Reader
}

// Setup registers the controller with mgr.
func Setup(mgr ctrl.Manager, cfg Config) error {
	secrets := connect.CacheThenAPI(mgr.GetClient(), mgr.GetAPIReader())
	cfg.defaults(mgr.GetClient(), secrets)
	m, err := newMetrics(cfg.Operator)
	if err != nil {
		return err
	}
	ctl := &controller{cfg: cfg, client: mgr.GetClient(), secrets: secrets}
	r, err := reconciler.New(reconciler.Config[*valkeyv1.ValkeyBackup]{
		Name:     cfg.Operator,
		Client:   mgr.GetClient(),
		Recorder: mgr.GetEventRecorder(Name),
		New:      func() *valkeyv1.ValkeyBackup { return &valkeyv1.ValkeyBackup{} },
		// Every pass ends with the phase it leaves for the status write in the state
		// series (the alert ValkeyBackupFailed selects state="Failed").
		Run: func(ctx context.Context, b *valkeyv1.ValkeyBackup) (reconciler.Result, error) {
			res, err := ctl.run(ctx, b)
			m.SetState(b.Namespace, b.Name, string(b.Status.Phase))
			return res, err
		},
		OnGone:     func(key types.NamespacedName, _ types.UID) { m.Forget(key.Namespace, key.Name) },
		Conditions: func(b *valkeyv1.ValkeyBackup) []metav1.Condition { return b.Status.Conditions },
		OwnEvents:  true,
		ObserveGeneration: func(b *valkeyv1.ValkeyBackup, generation int64) {
			b.Status.ObservedGeneration = generation
		},
	})
	if err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(Name).
		// Status writes move a backup from one phase to the next.
		For(&valkeyv1.ValkeyBackup{}).
		Complete(r)
}

// Layout is where a backup's objects go under the store's prefix: one folder per cluster
// (namespace and name), one per backup in it (name and UID, so a backup recreated under
// the same name never overwrites the first).
func Layout(b *valkeyv1.ValkeyBackup) string {
	return backupschedule.Folder("valkey", b.Namespace, b.Spec.Cluster.Name, b.Name, b.UID)
}

// ShardObject is shard i's RDB in a backup's folder.
func ShardObject(i int) string { return fmt.Sprintf("shard-%03d.rdb", i) }

func (ctl *controller) run(ctx context.Context, b *valkeyv1.ValkeyBackup) (reconciler.Result, error) {
	switch b.Status.Phase {
	case valkeyv1.BackupPhaseCompleted, valkeyv1.BackupPhaseFailed:
		return reconciler.Done(), nil
	}
	var vc valkeyv1.ValkeyCluster
	if err := ctl.client.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: b.Spec.Cluster.Name}, &vc); err != nil {
		if !apierrors.IsNotFound(err) {
			return reconciler.Result{}, err
		}
		pending(b, valkeyv1.BackupReasonClusterNotFound, "the ValkeyCluster named in spec.cluster does not exist; the backup starts once it does")
		return reconciler.Wait(ctl.cfg.Poll), nil
	}
	if vc.Spec.Backup == nil {
		pending(b, valkeyv1.BackupReasonNoObjectStore, "the cluster has no spec.backup.objectStore: set it to say where backups go")
		return reconciler.Wait(ctl.cfg.Poll), nil
	}
	store, err := ctl.openStore(ctx, &vc)
	if err != nil {
		log.FromContext(ctx).Info("Backup waits for its object store settings", "cluster", vc.Name, "error", err.Error())
		pending(b, valkeyv1.BackupReasonCredentialsMissing, "the object store's credentials or CA Secret (spec.backup.objectStore of the cluster) is missing or lacks a key; see the operator's log")
		return reconciler.Wait(ctl.cfg.Poll), nil
	}
	opts, err := ctl.cfg.Options(ctx, &vc)
	if err != nil {
		return reconciler.Result{}, err
	}
	addrs, err := ctl.cfg.Members(ctx, &vc)
	if err != nil {
		return reconciler.Result{}, err
	}
	plans, why := planShards(observe(ctx, ctl.cfg.Dial, addrs, opts))
	if why != nil {
		if b.Status.Phase == valkeyv1.BackupPhaseRunning {
			b.Status.StartedAt = nil
		}
		pending(b, why.Reason, why.Message)
		return reconciler.Wait(ctl.cfg.Poll), nil
	}
	if b.Status.Phase != valkeyv1.BackupPhaseRunning {
		// Say Running first; the status write starts the pass that streams.
		now := metav1.Now()
		b.Status.Phase, b.Status.StartedAt = valkeyv1.BackupPhaseRunning, &now
		b.Status.Endpoint, b.Status.Bucket = vc.Spec.Backup.ObjectStore.Endpoint, store.Bucket()
		b.Status.Path = store.Key(Layout(b))
		setCompleted(b, metav1.ConditionFalse, valkeyv1.BackupReasonRunning, "the shards are being streamed to the object store")
		return reconciler.Done(), nil
	}
	return ctl.stream(ctx, b, &vc, store, opts, plans)
}

// stream takes every shard's snapshot in turn and writes the manifest.
func (ctl *controller) stream(ctx context.Context, b *valkeyv1.ValkeyBackup, vc *valkeyv1.ValkeyCluster, store *objectstore.Store, opts valkey.Options, plans []shardPlan) (reconciler.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, ctl.cfg.Timeout)
	defer cancel()
	logger := log.FromContext(ctx)
	evs := reconciler.EventsOf(ctx)
	dir := Layout(b)
	m := Manifest{Format: ManifestFormat, Kind: "ValkeyBackup", ShardCount: len(plans),
		Cluster:   Ref{Namespace: vc.Namespace, Name: vc.Name, UID: string(vc.UID)},
		Backup:    Ref{Namespace: b.Namespace, Name: b.Name, UID: string(b.UID)},
		StartedAt: b.Status.StartedAt.UTC()}
	b.Status.Shards = nil
	// One event for every such shard: the events API folds repeats of a reason anyway.
	var alone []string
	for _, p := range plans {
		if p.FromPrimary {
			alone = append(alone, strconv.Itoa(p.Index))
		}
	}
	if len(alone) > 0 {
		evs.Record(reconciler.Event{Type: corev1.EventTypeWarning, Reason: valkeyv1.BackupReasonBackupFromPrimary,
			Note: fmt.Sprintf("Shards %s have no in-sync replica: their primaries serve the snapshot (a fork on the members taking writes).", strings.Join(alone, ", "))})
	}
	for _, p := range plans {
		role := "replica"
		if p.FromPrimary {
			role = "primary"
		}
		name := path.Join(dir, ShardObject(p.Index))
		var (
			info valkey.RDBInfo
			up   objectstore.Uploaded
		)
		err := backupschedule.Retry(ctx, ctl.cfg.Attempts, ctl.cfg.RetryDelay, func(attempt int) error {
			b.Status.Attempts++
			var err error
			info, err = ctl.cfg.Stream(ctx, p.Source, opts, func(r io.Reader) error {
				var perr error
				up, perr = store.Put(ctx, name, r, "application/octet-stream")
				return perr
			})
			if err != nil {
				logger.Info("Backup shard attempt failed", "shard", p.Index, "source", p.Source, "attempt", attempt, "error", err.Error())
			}
			return err
		})
		if err != nil {
			// A partial backup is never restorable: it has no manifest; its shards go too.
			if _, derr := store.DeleteAll(ctx, dir+"/"); derr != nil {
				logger.Info("Backup could not remove its partial objects", "error", derr.Error())
			}
			msg := fmt.Sprintf("shard %d could not be read or stored after %d attempts; see the operator's log", p.Index, ctl.cfg.Attempts)
			fail(b, valkeyv1.BackupReasonUploadFailed, msg)
			evs.OnTransition(reconciler.Transition{Type: valkeyv1.BackupConditionCompleted, Status: metav1.ConditionFalse, Reason: valkeyv1.BackupReasonUploadFailed},
				reconciler.Event{Type: corev1.EventTypeWarning, Reason: valkeyv1.BackupReasonUploadFailed, Note: msg})
			return reconciler.Done(), nil
		}
		ms := ManifestShard{Index: p.Index, Slots: p.Slots, Object: ShardObject(p.Index), Size: up.Size, Keys: info.Keys,
			SHA256: up.SHA256, Role: role, PrimaryID: p.PrimaryID, ServerVersion: info.Version}
		m.Shards = append(m.Shards, ms)
		m.Size += up.Size
		if info.Keys > 0 {
			m.Keys += info.Keys
		}
		if m.ServerVersion == "" {
			m.ServerVersion = info.Version
		}
		b.Status.Shards = append(b.Status.Shards, valkeyv1.ShardBackupStatus{Index: int32(p.Index), Slots: slotsString(p.Slots), Role: role,
			Object: up.Key, Size: up.Size, Keys: info.Keys, SHA256: up.SHA256})
	}
	m.StoppedAt = time.Now().UTC()
	body, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return reconciler.Result{}, err
	}
	if err := store.PutBytes(ctx, path.Join(dir, ManifestName), body, "application/json"); err != nil {
		logger.Info("Backup manifest upload failed", "error", err.Error())
		return reconciler.Result{}, errors.New("uploading the backup's manifest failed")
	}
	stopped := metav1.NewTime(m.StoppedAt)
	b.Status.Phase, b.Status.StoppedAt = valkeyv1.BackupPhaseCompleted, &stopped
	b.Status.Size, b.Status.Keys, b.Status.ServerVersion = m.Size, m.Keys, m.ServerVersion
	msg := fmt.Sprintf("%d shards stored with their manifest", len(plans))
	setCompleted(b, metav1.ConditionTrue, valkeyv1.BackupReasonBackupCompleted, msg)
	evs.OnTransition(reconciler.Transition{Type: valkeyv1.BackupConditionCompleted, Status: metav1.ConditionTrue, Reason: valkeyv1.BackupReasonBackupCompleted},
		reconciler.Event{Type: corev1.EventTypeNormal, Reason: valkeyv1.BackupReasonBackupCompleted,
			Note: fmt.Sprintf("%d shards, %d bytes, %d keys stored in %s.", len(plans), m.Size, m.Keys, b.Status.Path)})
	logger.Info("Backup completed", "shards", len(plans), "bytes", m.Size, "keys", m.Keys,
		"seconds", m.StoppedAt.Sub(m.StartedAt).Seconds())
	return reconciler.Done(), nil
}

// openStore reads the cluster's object store settings and Secrets.
func (ctl *controller) openStore(ctx context.Context, vc *valkeyv1.ValkeyCluster) (*objectstore.Store, error) {
	spec := vc.Spec.Backup.ObjectStore
	ref := objectstore.Ref{
		Settings:          objectstore.Settings{Endpoint: spec.Endpoint, Bucket: spec.Bucket, Prefix: spec.Prefix, Region: spec.Region, PathStyle: spec.ForcePathStyle},
		CredentialsSecret: spec.Credentials.SecretName,
		Keys: objectstore.SecretKeys{AccessKeyID: spec.Credentials.AccessKeyIDKey, SecretAccessKey: spec.Credentials.SecretAccessKeyKey,
			SessionToken: spec.Credentials.SessionTokenKey},
	}
	if spec.CA != nil {
		ref.CASecret, ref.CAKey = spec.CA.Name, spec.CA.Key
	}
	return objectstore.Open(ctx, ctl.secrets, vc.Namespace, ref)
}

func setCompleted(b *valkeyv1.ValkeyBackup, status metav1.ConditionStatus, reason, msg string) {
	conditions.Set(&b.Status.Conditions, metav1.Condition{Type: valkeyv1.BackupConditionCompleted, Status: status, Reason: reason, Message: msg}, b.Generation)
}

func pending(b *valkeyv1.ValkeyBackup, reason, msg string) {
	b.Status.Phase = valkeyv1.BackupPhasePending
	setCompleted(b, metav1.ConditionFalse, reason, msg)
}

func fail(b *valkeyv1.ValkeyBackup, reason, msg string) {
	now := metav1.Now()
	b.Status.Phase, b.Status.StoppedAt = valkeyv1.BackupPhaseFailed, &now
	b.Status.Shards = nil
	setCompleted(b, metav1.ConditionFalse, reason, msg)
}

// newMetrics registers valkey_operator_backup_state{namespace,name,state}, one series per
// phase of each ValkeyBackup (1 for the current one), shared by every manager of the process.
func newMetrics(operator string) (*metrics.Objects, error) {
	return metrics.For(metrics.Kind{
		Operator: operator,
		Kind:     "ValkeyBackup",
		Name:     "backup",
		States: []string{string(valkeyv1.BackupPhasePending), string(valkeyv1.BackupPhaseRunning),
			string(valkeyv1.BackupPhaseCompleted), string(valkeyv1.BackupPhaseFailed)},
	})
}
