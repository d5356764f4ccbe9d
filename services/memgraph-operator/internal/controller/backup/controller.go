// Package backup is the MemgraphBackup controller. A backup follows Memgraph's own
// procedure (docs: database-management/backup-and-restore): on the MAIN it runs LOCK DATA
// DIRECTORY (no durability file is removed meanwhile), CREATE SNAPSHOT, then copies the new
// snapshot file out, and UNLOCK DATA DIRECTORY. The copy goes through the backup agent, a
// sidecar of the operator's own binary in every data-instance pod (package snapshot),
// since the operator cannot read a pod's volume: the agent serves the file, the operator
// streams it into the object store while hashing it, then writes a manifest, which makes
// the backup restorable.
package backup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path"
	"strconv"
	"time"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/services/memgraph-operator/internal/memgraph"
	"github.com/opsuite/suite/services/memgraph-operator/internal/resources"
	"github.com/opsuite/suite/services/memgraph-operator/internal/snapshot"
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
const Name = "memgraphbackup-controller"

// +kubebuilder:rbac:groups=memgraph.com,resources=memgraphbackups,verbs=list;watch
// +kubebuilder:rbac:groups=memgraph.com,resources=memgraphclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=memgraph.com,resources=memgraphbackups/status,verbs=patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Config is what the controller needs besides the manager; zero fields take the defaults.
type Config struct {
	// Operator names the metrics.
	Operator string
	// Dialer opens Bolt sessions to the cluster's data instances (default: the operator's
	// recorded credentials, else spec.auth's, and spec.tls.bolt's CA).
	Dialer func(ctx context.Context, c *memgraphv1.MemgraphCluster) (memgraph.Dialer, error)
	// Resolve maps a pod's "host:port" to the address dialled (tests; nil dials as is).
	Resolve func(addr string) string
	// Token is the cluster's backup agent token (default: the Secret the cluster
	// controller keeps, resources.BackupAgentSecretName).
	Token func(ctx context.Context, c *memgraphv1.MemgraphCluster) (string, error)
	// Poll is how soon a waiting backup looks again.
	Poll time.Duration
	// Attempts is how often the snapshot is tried before the backup fails.
	Attempts int
	// RetryDelay is the pause before the next attempt (times the attempt number).
	RetryDelay time.Duration
	// Timeout bounds one backup pass.
	Timeout time.Duration
}

func (cfg *Config) defaults(secrets client.Reader) {
	if cfg.Operator == "" {
		cfg.Operator = "memgraph-operator"
	}
	if cfg.Dialer == nil {
		cfg.Dialer = func(ctx context.Context, c *memgraphv1.MemgraphCluster) (memgraph.Dialer, error) {
			return defaultDialer(ctx, secrets, c, cfg.Resolve)
		}
	}
	if cfg.Resolve == nil {
		cfg.Resolve = func(a string) string { return a }
	}
	if cfg.Token == nil {
		cfg.Token = func(ctx context.Context, c *memgraphv1.MemgraphCluster) (string, error) {
			var s corev1.Secret
			if err := secrets.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: resources.BackupAgentSecretName(c.Name)}, &s); err != nil {
				return "", err
			}
			return string(s.Data[resources.BackupAgentTokenKey]), nil
		}
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
	secrets := mgr.GetAPIReader()
	cfg.defaults(secrets)
	m, err := newMetrics(cfg.Operator)
	if err != nil {
		return err
	}
	ctl := &controller{cfg: cfg, client: mgr.GetClient(), secrets: secrets}
	r, err := reconciler.New(reconciler.Config[*memgraphv1.MemgraphBackup]{
		Name:     cfg.Operator,
		Client:   mgr.GetClient(),
		Recorder: mgr.GetEventRecorder(Name),
		New:      func() *memgraphv1.MemgraphBackup { return &memgraphv1.MemgraphBackup{} },
		// Every pass ends with the phase it leaves for the status write in the state
		// series (the alert MemgraphBackupFailed selects state="Failed").
		Run: func(ctx context.Context, b *memgraphv1.MemgraphBackup) (reconciler.Result, error) {
			res, err := ctl.run(ctx, b)
			m.SetState(b.Namespace, b.Name, string(b.Status.Phase))
			return res, err
		},
		OnGone:     func(key types.NamespacedName, _ types.UID) { m.Forget(key.Namespace, key.Name) },
		Conditions: func(b *memgraphv1.MemgraphBackup) []metav1.Condition { return b.Status.Conditions },
		OwnEvents:  true,
		ObserveGeneration: func(b *memgraphv1.MemgraphBackup, generation int64) {
			b.Status.ObservedGeneration = generation
		},
	})
	if err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(Name).
		For(&memgraphv1.MemgraphBackup{}).
		Complete(r)
}

// newMetrics registers memgraph_operator_backup_state{namespace,name,state}, one series
// per phase of each MemgraphBackup (1 for the current one), shared by every manager of the
// process.
func newMetrics(operator string) (*metrics.Objects, error) {
	return metrics.For(metrics.Kind{
		Operator: operator,
		Kind:     "MemgraphBackup",
		Name:     "backup",
		States: []string{string(memgraphv1.BackupPhasePending), string(memgraphv1.BackupPhaseRunning),
			string(memgraphv1.BackupPhaseCompleted), string(memgraphv1.BackupPhaseFailed)},
	})
}

// Layout is where a backup's objects go under the store's prefix: one folder per cluster
// (namespace and name), one per backup in it (name and UID, so a backup recreated under
// the same name never overwrites the first).
func Layout(b *memgraphv1.MemgraphBackup) string {
	return backupschedule.Folder("memgraph", b.Namespace, b.Spec.Cluster.Name, b.Name, b.UID)
}

func (ctl *controller) run(ctx context.Context, b *memgraphv1.MemgraphBackup) (reconciler.Result, error) {
	switch b.Status.Phase {
	case memgraphv1.BackupPhaseCompleted, memgraphv1.BackupPhaseFailed:
		return reconciler.Done(), nil
	}
	var c memgraphv1.MemgraphCluster
	if err := ctl.client.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: b.Spec.Cluster.Name}, &c); err != nil {
		if !apierrors.IsNotFound(err) {
			return reconciler.Result{}, err
		}
		pending(b, memgraphv1.BackupReasonClusterNotFound, "the MemgraphCluster named in spec.cluster does not exist; the backup starts once it does")
		return reconciler.Wait(ctl.cfg.Poll), nil
	}
	if c.Spec.Backup == nil {
		pending(b, memgraphv1.BackupReasonNoObjectStore, "the cluster has no spec.backup.objectStore: set it to say where backups go")
		return reconciler.Wait(ctl.cfg.Poll), nil
	}
	store, err := OpenStore(ctx, ctl.secrets, &c)
	if err != nil {
		log.FromContext(ctx).Info("Backup waits for its object store settings", "cluster", c.Name, "error", err.Error())
		pending(b, memgraphv1.BackupReasonCredentialsMissing, "the object store's credentials or CA Secret (spec.backup.objectStore of the cluster) is missing or lacks a key; see the operator's log")
		return reconciler.Wait(ctl.cfg.Poll), nil
	}
	ordinal, ok := mainOrdinal(&c)
	if !ok {
		pending(b, memgraphv1.BackupReasonNoMain, "no data instance holds MAIN (status.main of the cluster is empty); the backup starts once one does")
		return reconciler.Wait(ctl.cfg.Poll), nil
	}
	if b.Status.Phase != memgraphv1.BackupPhaseRunning {
		// Say Running first; the status write starts the pass that takes the snapshot.
		now := metav1.Now()
		b.Status.Phase, b.Status.StartedAt = memgraphv1.BackupPhaseRunning, &now
		b.Status.Endpoint, b.Status.Bucket = c.Spec.Backup.ObjectStore.Endpoint, store.Bucket()
		b.Status.Path = store.Key(Layout(b))
		b.Status.Instance = c.Status.Main
		setCompleted(b, metav1.ConditionFalse, memgraphv1.BackupReasonRunning, "the snapshot is being taken on the MAIN and uploaded")
		return reconciler.Done(), nil
	}
	return ctl.take(ctx, b, &c, store, ordinal)
}

// mainOrdinal is the pod ordinal of the instance status.main names.
func mainOrdinal(c *memgraphv1.MemgraphCluster) (int32, bool) {
	if c.Status.Main == "" {
		return 0, false
	}
	for i := int32(0); i < memgraphv1.MaxDataInstances; i++ {
		if resources.DataInstanceName(c.Name, i) == c.Status.Main {
			return i, true
		}
	}
	return 0, false
}

// errAgent marks a failure to reach the backup agent.
var errAgent = errors.New("backup agent unavailable")

// take runs the snapshot and the upload, retrying, and writes the manifest.
func (ctl *controller) take(ctx context.Context, b *memgraphv1.MemgraphBackup, c *memgraphv1.MemgraphCluster, store *objectstore.Store, ordinal int32) (reconciler.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, ctl.cfg.Timeout)
	defer cancel()
	logger := log.FromContext(ctx)
	evs := reconciler.EventsOf(ctx)
	dir := Layout(b)
	var m snapshot.Manifest
	err := backupschedule.Retry(ctx, ctl.cfg.Attempts, ctl.cfg.RetryDelay, func(attempt int) error {
		b.Status.Attempts++
		var err error
		if m, err = ctl.once(ctx, b, c, store, ordinal, dir); err != nil {
			logger.Info("Backup attempt failed", "instance", b.Status.Instance, "attempt", attempt, "error", err.Error())
		}
		return err
	})
	if err != nil {
		// A partial backup is never restorable: it has no manifest; its files go too.
		if _, derr := store.DeleteAll(ctx, dir+"/"); derr != nil {
			logger.Info("Backup could not remove its partial objects", "error", derr.Error())
		}
		reason, msg := memgraphv1.BackupReasonUploadFailed, fmt.Sprintf("the snapshot could not be taken, read or stored after %d attempts; see the operator's log", ctl.cfg.Attempts)
		if errors.Is(err, errAgent) {
			reason, msg = memgraphv1.BackupReasonAgentUnavailable, fmt.Sprintf("the backup agent of the MAIN's pod did not answer after %d attempts: pods made before spec.backup was set get it when they are rolled; see the operator's log", ctl.cfg.Attempts)
		}
		fail(b, reason, msg)
		evs.OnTransition(reconciler.Transition{Type: memgraphv1.BackupConditionCompleted, Status: metav1.ConditionFalse, Reason: reason},
			reconciler.Event{Type: corev1.EventTypeWarning, Reason: reason, Note: msg})
		return reconciler.Done(), nil
	}
	stopped := metav1.NewTime(m.StoppedAt)
	b.Status.Phase, b.Status.StoppedAt = memgraphv1.BackupPhaseCompleted, &stopped
	b.Status.Size, b.Status.ServerVersion = m.Size, m.ServerVersion
	b.Status.Files = nil
	for _, f := range m.Files {
		b.Status.Files = append(b.Status.Files, memgraphv1.BackupFileStatus{Name: f.Name, Object: store.Key(path.Join(dir, f.Name)), Size: f.Size, SHA256: f.SHA256})
	}
	setCompleted(b, metav1.ConditionTrue, memgraphv1.BackupReasonBackupCompleted, "the snapshot and its manifest are stored")
	evs.OnTransition(reconciler.Transition{Type: memgraphv1.BackupConditionCompleted, Status: metav1.ConditionTrue, Reason: memgraphv1.BackupReasonBackupCompleted},
		reconciler.Event{Type: corev1.EventTypeNormal, Reason: memgraphv1.BackupReasonBackupCompleted,
			Note: fmt.Sprintf("Snapshot %s of %s, %d bytes, stored in %s.", path.Base(m.Snapshot), m.Instance, m.Size, b.Status.Path)})
	logger.Info("Backup completed", "instance", m.Instance, "snapshot", m.Snapshot, "bytes", m.Size,
		"seconds", m.StoppedAt.Sub(m.StartedAt).Seconds())
	return reconciler.Done(), nil
}

// once is one attempt: lock, snapshot, upload, unlock, manifest.
func (ctl *controller) once(ctx context.Context, b *memgraphv1.MemgraphBackup, c *memgraphv1.MemgraphCluster, store *objectstore.Store, ordinal int32, dir string) (snapshot.Manifest, error) {
	m := snapshot.Manifest{Format: snapshot.ManifestFormat, Kind: "MemgraphBackup", Instance: c.Status.Main, Role: memgraph.RoleMain,
		Cluster:   snapshot.Ref{Namespace: c.Namespace, Name: c.Name, UID: string(c.UID)},
		Backup:    snapshot.Ref{Namespace: b.Namespace, Name: b.Name, UID: string(b.UID)},
		StartedAt: time.Now().UTC()}
	token, err := ctl.cfg.Token(ctx, c)
	if err != nil || token == "" {
		return m, fmt.Errorf("%w: the agent token Secret %s is not there yet", errAgent, resources.BackupAgentSecretName(c.Name))
	}
	host := resources.PodFQDN(c, resources.RoleData, ordinal)
	agent := snapshot.Client{BaseURL: "http://" + ctl.cfg.Resolve(net.JoinHostPort(host, strconv.Itoa(int(agentPort(c))))), Token: token}
	if _, err := agent.List(ctx); err != nil {
		return m, fmt.Errorf("%w: %w", errAgent, err)
	}
	dialer, err := ctl.cfg.Dialer(ctx, c)
	if err != nil {
		return m, err
	}
	s, err := dialer.Dial(ctx, net.JoinHostPort(host, strconv.Itoa(int(resources.Ports(c).Bolt))))
	if err != nil {
		return m, err
	}
	defer func() { _ = s.Close(context.WithoutCancel(ctx)) }()
	role, err := s.ReplicationRole(ctx)
	if err != nil {
		return m, err
	}
	if role != memgraph.RoleMain {
		return m, fmt.Errorf("%s is no longer the MAIN (role %q)", c.Status.Main, role)
	}
	if rows, err := s.Query(ctx, "SHOW VERSION"); err == nil && len(rows) == 1 {
		m.ServerVersion, _ = rows[0]["version"].(string)
	}
	// No durability file is deleted while the directory is locked, so the snapshot stays
	// until it is uploaded even if Memgraph's retention would drop it.
	if err := s.Exec(ctx, "LOCK DATA DIRECTORY"); err != nil {
		return m, err
	}
	defer func() {
		if err := s.Exec(context.WithoutCancel(ctx), "UNLOCK DATA DIRECTORY"); err != nil {
			log.FromContext(ctx).Info("Could not unlock the data directory", "instance", c.Status.Main, "error", err.Error())
		}
	}()
	before, err := agent.List(ctx)
	if err != nil {
		return m, fmt.Errorf("%w: %w", errAgent, err)
	}
	rows, err := s.Query(ctx, "CREATE SNAPSHOT")
	if err != nil {
		return m, err
	}
	after, err := agent.List(ctx)
	if err != nil {
		return m, fmt.Errorf("%w: %w", errAgent, err)
	}
	snap, err := newSnapshot(rows, before, after)
	if err != nil {
		return m, err
	}
	r, announced, err := agent.Open(ctx, snap.Name)
	if err != nil {
		return m, fmt.Errorf("%w: %w", errAgent, err)
	}
	up, err := store.Put(ctx, path.Join(dir, snap.Name), r, "application/octet-stream")
	_ = r.Close()
	if err != nil {
		return m, err
	}
	if announced >= 0 && up.Size != announced {
		return m, fmt.Errorf("stored %d bytes of %s, the agent announced %d", up.Size, snap.Name, announced)
	}
	m.Snapshot, m.SnapshotTimestamp = snap.Name, snapshot.SnapshotTimestamp(snap.Name)
	m.Files = []snapshot.ManifestFile{{Name: snap.Name, Size: up.Size, SHA256: up.SHA256}}
	m.Size = up.Size
	m.StoppedAt = time.Now().UTC()
	body, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return m, err
	}
	if err := store.PutBytes(ctx, path.Join(dir, snapshot.ManifestName), body, "application/json"); err != nil {
		return m, err
	}
	return m, nil
}

// newSnapshot is the file CREATE SNAPSHOT wrote: the one its answer names when it names
// one the agent lists, else the newest snapshot that was not there before.
func newSnapshot(rows []map[string]any, before, after []snapshot.File) (snapshot.File, error) {
	if len(rows) == 1 {
		if p, ok := rows[0]["path"].(string); ok && p != "" {
			name := path.Join(snapshot.SnapshotsDir, path.Base(p))
			for _, f := range after {
				if f.Name == name {
					return f, nil
				}
			}
		}
	}
	old := map[string]bool{}
	for _, f := range before {
		old[f.Name] = true
	}
	var found snapshot.File
	for _, f := range after {
		if path.Dir(f.Name) == snapshot.SnapshotsDir && !old[f.Name] && f.Name > found.Name {
			found = f
		}
	}
	if found.Name == "" {
		return found, errors.New("CREATE SNAPSHOT answered, but the agent sees no new snapshot file (is the agent's data directory the instance's?)")
	}
	return found, nil
}

func agentPort(c *memgraphv1.MemgraphCluster) int32 {
	if c.Spec.Backup != nil && c.Spec.Backup.AgentPort != 0 {
		return c.Spec.Backup.AgentPort
	}
	return memgraphv1.DefaultBackupAgentPort
}

func setCompleted(b *memgraphv1.MemgraphBackup, status metav1.ConditionStatus, reason, msg string) {
	conditions.Set(&b.Status.Conditions, metav1.Condition{Type: memgraphv1.BackupConditionCompleted, Status: status, Reason: reason, Message: msg}, b.Generation)
}

func pending(b *memgraphv1.MemgraphBackup, reason, msg string) {
	b.Status.Phase = memgraphv1.BackupPhasePending
	setCompleted(b, metav1.ConditionFalse, reason, msg)
}

func fail(b *memgraphv1.MemgraphBackup, reason, msg string) {
	now := metav1.Now()
	b.Status.Phase, b.Status.StoppedAt = memgraphv1.BackupPhaseFailed, &now
	b.Status.Files = nil
	setCompleted(b, metav1.ConditionFalse, reason, msg)
}
