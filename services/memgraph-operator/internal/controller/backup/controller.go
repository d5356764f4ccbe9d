// Package backup is the MemgraphBackup controller. A backup follows Memgraph's own
// procedure (docs: database-management/backup-and-restore) on a replica the MAIN's SHOW
// REPLICAS shows caught up, or on the MAIN when none is: LOCK DATA DIRECTORY (no
// durability file is removed meanwhile), CREATE SNAPSHOT, then the new snapshot file and
// the WAL files that hold the commits after it are copied out, and UNLOCK DATA
// DIRECTORY. The copy goes through the backup agent, a sidecar of the operator's own
// binary in every data-instance pod (package snapshot), since the operator cannot read a
// pod's volume: the agent serves the files and what they record (epoch, commit
// timestamps), the operator streams them into the object store while hashing them, then
// writes a manifest, which makes the backup restorable.
package backup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
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
	if _, ok := ordinalOf(&c, c.Status.Main); !ok {
		pending(b, memgraphv1.BackupReasonNoMain, "no data instance holds MAIN (status.main of the cluster is empty); the backup starts once one does")
		return reconciler.Wait(ctl.cfg.Poll), nil
	}
	if b.Status.Phase != memgraphv1.BackupPhaseRunning {
		// Say Running first; the status write starts the pass that takes the snapshot.
		now := metav1.Now()
		b.Status.Phase, b.Status.StartedAt = memgraphv1.BackupPhaseRunning, &now
		b.Status.Endpoint, b.Status.Bucket = c.Spec.Backup.ObjectStore.Endpoint, store.Bucket()
		b.Status.Path = store.Key(Layout(b))
		b.Status.Main = c.Status.Main
		setCompleted(b, metav1.ConditionFalse, memgraphv1.BackupReasonRunning, "the snapshot is being taken on a replica caught up with the MAIN, or on the MAIN when none is, and uploaded with the WAL after it")
		return reconciler.Done(), nil
	}
	return ctl.take(ctx, b, &c, store)
}

// errAgent marks a failure to reach the backup agent.
var errAgent = errors.New("backup agent unavailable")

// Stable messages of a completed backup.
const (
	msgCompleted             = "the snapshot, taken on a replica caught up with the MAIN, its WAL and the manifest are stored"
	msgCompletedOnMainNoRepl = "the snapshot was taken on the MAIN, which carries the extra load: no replica was caught up with it (SHOW REPLICAS on the MAIN: ready, 0 behind); its WAL and the manifest are stored"
	msgCompletedOnMainFailed = "the snapshot was taken on the MAIN, which carries the extra load: the replicas caught up with it could not be backed up (see the operator's log); its WAL and the manifest are stored"
)

// take runs the snapshot and the upload, retrying, and writes the manifest.
func (ctl *controller) take(ctx context.Context, b *memgraphv1.MemgraphBackup, c *memgraphv1.MemgraphCluster, store *objectstore.Store) (reconciler.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, ctl.cfg.Timeout)
	defer cancel()
	logger := log.FromContext(ctx)
	evs := reconciler.EventsOf(ctx)
	dir := Layout(b)
	var m snapshot.Manifest
	var out outcome
	err := backupschedule.Retry(ctx, ctl.cfg.Attempts, ctl.cfg.RetryDelay, func(attempt int) error {
		b.Status.Attempts++
		var err error
		if m, out, err = ctl.once(ctx, b, c, store, dir); err != nil {
			logger.Info("Backup attempt failed", "main", c.Status.Main, "attempt", attempt, "error", err.Error())
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
			reason, msg = memgraphv1.BackupReasonAgentUnavailable, fmt.Sprintf("the backup agent of the MAIN's pod (and of every caught-up replica's) did not answer after %d attempts: pods made before spec.backup was set get it when they are rolled; see the operator's log", ctl.cfg.Attempts)
		}
		b.Status.Instance, b.Status.Role = out.last.Instance, out.last.Role
		fail(b, reason, msg)
		evs.OnTransition(reconciler.Transition{Type: memgraphv1.BackupConditionCompleted, Status: metav1.ConditionFalse, Reason: reason},
			reconciler.Event{Type: corev1.EventTypeWarning, Reason: reason, Note: msg})
		return reconciler.Done(), nil
	}
	stopped := metav1.NewTime(m.StoppedAt)
	b.Status.Phase, b.Status.StoppedAt = memgraphv1.BackupPhaseCompleted, &stopped
	b.Status.Size, b.Status.ServerVersion = m.Size, m.ServerVersion
	b.Status.Instance, b.Status.Role, b.Status.Main, b.Status.Epoch = m.Instance, m.Role, m.Main, m.Epoch
	b.Status.SnapshotTimestamp, b.Status.Timestamp = int64(m.SnapshotTimestamp), int64(m.Timestamp)
	b.Status.Files = nil
	for _, f := range m.Files {
		b.Status.Files = append(b.Status.Files, memgraphv1.BackupFileStatus{Name: f.Name, Object: store.Key(path.Join(dir, f.Name)), Size: f.Size, SHA256: f.SHA256})
	}
	note := fmt.Sprintf("Snapshot %s of %s (%s) and %d WAL files up to commit %d, %d bytes, stored in %s.",
		path.Base(m.Snapshot), m.Instance, m.Role, len(m.Files)-1, m.Timestamp, m.Size, b.Status.Path)
	reason, msg, typ := memgraphv1.BackupReasonBackupCompleted, msgCompleted, corev1.EventTypeNormal
	if m.Role == memgraphv1.BackupRoleMain {
		reason, msg, typ = memgraphv1.BackupReasonCompletedOnMain, msgCompletedOnMainNoRepl, corev1.EventTypeWarning
		if out.replicasFailed > 0 {
			msg = msgCompletedOnMainFailed
		}
		note = fmt.Sprintf("The snapshot was taken on the MAIN %s: %s. %s", m.Instance, out.why(), note)
	}
	setCompleted(b, metav1.ConditionTrue, reason, msg)
	evs.OnTransition(reconciler.Transition{Type: memgraphv1.BackupConditionCompleted, Status: metav1.ConditionTrue, Reason: reason},
		reconciler.Event{Type: typ, Reason: reason, Note: note})
	logger.Info("Backup completed", "instance", m.Instance, "role", m.Role, "snapshot", m.Snapshot, "walFiles", len(m.Files)-1,
		"timestamp", m.Timestamp, "bytes", m.Size, "seconds", m.StoppedAt.Sub(m.StartedAt).Seconds())
	return reconciler.Done(), nil
}

// outcome is what an attempt learnt about its sources, for the event of a backup taken
// on the MAIN.
type outcome struct {
	// replicasFailed counts the caught-up replicas tried before the MAIN.
	replicasFailed int
	// replicas is how many replicas SHOW REPLICAS listed.
	replicas int
	// last is the source tried last.
	last source
}

func (o outcome) why() string {
	if o.replicasFailed > 0 {
		return fmt.Sprintf("the replicas caught up with it could not be backed up (%d tried; see the operator's log)", o.replicasFailed)
	}
	return fmt.Sprintf("no replica was caught up with it (SHOW REPLICAS listed %d; caught up is ready, 0 behind)", o.replicas)
}

// once is one attempt: SHOW REPLICAS on the MAIN, then a backup from each source in
// turn (the caught-up replicas, the MAIN last) until one completes.
func (ctl *controller) once(ctx context.Context, b *memgraphv1.MemgraphBackup, c *memgraphv1.MemgraphCluster, store *objectstore.Store, dir string) (snapshot.Manifest, outcome, error) {
	var out outcome
	m := snapshot.Manifest{Format: snapshot.ManifestFormat, Kind: "MemgraphBackup", Main: c.Status.Main,
		Cluster:   snapshot.Ref{Namespace: c.Namespace, Name: c.Name, UID: string(c.UID)},
		Backup:    snapshot.Ref{Namespace: b.Namespace, Name: b.Name, UID: string(b.UID)},
		StartedAt: time.Now().UTC()}
	token, err := ctl.cfg.Token(ctx, c)
	if err != nil || token == "" {
		return m, out, fmt.Errorf("%w: the agent token Secret %s is not there yet", errAgent, resources.BackupAgentSecretName(c.Name))
	}
	dialer, err := ctl.cfg.Dialer(ctx, c)
	if err != nil {
		return m, out, err
	}
	mainOrd, _ := ordinalOf(c, c.Status.Main)
	var replicas []memgraph.Replica
	ms, err := dialer.Dial(ctx, ctl.boltAddr(c, mainOrd))
	if err == nil {
		defer func() { _ = ms.Close(context.WithoutCancel(ctx)) }()
		if role, err := ms.ReplicationRole(ctx); err != nil {
			return m, out, err
		} else if role != memgraph.RoleMain {
			return m, out, fmt.Errorf("%s is no longer the MAIN (role %q)", c.Status.Main, role)
		}
		if replicas, err = caughtUpReplicas(ctx, ms); err != nil {
			log.FromContext(ctx).Info("SHOW REPLICAS failed on the MAIN; the backup is taken on the MAIN", "main", c.Status.Main, "error", err.Error())
		}
	} else {
		// Nothing says a replica is caught up; the MAIN is tried, its agent first.
		log.FromContext(ctx).Info("The MAIN did not answer SHOW REPLICAS; the backup is tried on the MAIN", "main", c.Status.Main, "error", err.Error())
		ms = nil
	}
	out.replicas = len(replicas)
	for _, src := range sources(c, c.Status.Main, replicas) {
		out.last = src
		sm, err := ctl.from(ctx, c, m, src, ms, dialer, token, store, dir)
		if err == nil {
			return sm, out, nil
		}
		if _, derr := store.DeleteAll(ctx, dir+"/"); derr != nil {
			log.FromContext(ctx).Info("Backup could not remove its partial objects", "error", derr.Error())
		}
		if src.Role == memgraphv1.BackupRoleMain {
			return m, out, err
		}
		out.replicasFailed++
		log.FromContext(ctx).Info("Backup from a caught-up replica failed; trying the next source", "replica", src.Instance, "error", err.Error())
	}
	return m, out, fmt.Errorf("%s is no data instance of the cluster", c.Status.Main)
}

// caughtUpReplicas reads the MAIN's SHOW REPLICAS, up to three times a little apart
// while it shows no replica caught up: under steady writes a SYNC replica is one
// transaction behind while that transaction is shipped, which is no reason to load the
// MAIN with the snapshot.
func caughtUpReplicas(ctx context.Context, ms memgraph.Session) ([]memgraph.Replica, error) {
	var reps []memgraph.Replica
	var err error
	for i := range 3 {
		if i > 0 {
			select {
			case <-ctx.Done():
				return reps, ctx.Err()
			case <-time.After(200 * time.Millisecond):
			}
		}
		if reps, err = ms.Replicas(ctx); err != nil || len(reps) == 0 || slices.ContainsFunc(reps, memgraph.Replica.CaughtUp) {
			return reps, err
		}
	}
	return reps, err
}

func (ctl *controller) boltAddr(c *memgraphv1.MemgraphCluster, ordinal int32) string {
	return net.JoinHostPort(resources.PodFQDN(c, resources.RoleData, ordinal), strconv.Itoa(int(resources.Ports(c).Bolt)))
}

// from takes the backup on one source: lock, snapshot, upload the snapshot and the WAL
// after it, unlock, manifest. mainSession is the MAIN's open session, reused when the
// source is the MAIN.
func (ctl *controller) from(ctx context.Context, c *memgraphv1.MemgraphCluster, m snapshot.Manifest, src source, mainSession memgraph.Session,
	dialer memgraph.Dialer, token string, store *objectstore.Store, dir string) (snapshot.Manifest, error) {
	m.Instance, m.Role = src.Instance, src.Role
	host := resources.PodFQDN(c, resources.RoleData, src.Ordinal)
	agent := snapshot.Client{BaseURL: "http://" + ctl.cfg.Resolve(net.JoinHostPort(host, strconv.Itoa(int(agentPort(c))))), Token: token}
	if _, err := agent.List(ctx); err != nil {
		return m, fmt.Errorf("%w: %s: %w", errAgent, src.Instance, err)
	}
	s := mainSession
	if src.Role != memgraphv1.BackupRoleMain || s == nil {
		var err error
		if s, err = dialer.Dial(ctx, ctl.boltAddr(c, src.Ordinal)); err != nil {
			return m, err
		}
		defer func() { _ = s.Close(context.WithoutCancel(ctx)) }()
	}
	role, err := s.ReplicationRole(ctx)
	if err != nil {
		return m, err
	}
	if role != src.Role {
		return m, fmt.Errorf("%s is no longer a %s (role %q)", src.Instance, src.Role, role)
	}
	if rows, err := s.Query(ctx, "SHOW VERSION"); err == nil && len(rows) == 1 {
		m.ServerVersion, _ = rows[0]["version"].(string)
	}
	// No durability file is deleted while the directory is locked, so the snapshot and
	// the WAL files stay until they are uploaded even if Memgraph's retention would drop
	// them.
	if err := s.Exec(ctx, "LOCK DATA DIRECTORY"); err != nil {
		return m, err
	}
	defer func() {
		if err := s.Exec(context.WithoutCancel(ctx), "UNLOCK DATA DIRECTORY"); err != nil {
			log.FromContext(ctx).Info("Could not unlock the data directory", "instance", src.Instance, "error", err.Error())
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
	info, oldAgent, err := describe(ctx, agent, snap)
	if err != nil {
		return m, err
	}
	// A replica's snapshot holds at least what the MAIN saw it hold when it was caught up.
	if src.Role == memgraphv1.BackupRoleReplica && info.Timestamp < uint64(src.Timestamp) {
		return m, fmt.Errorf("the snapshot of %s is of commit %d, the MAIN saw it at %d", src.Instance, info.Timestamp, src.Timestamp)
	}
	f, err := upload(ctx, agent, store, dir, info)
	if err != nil {
		return m, err
	}
	m.Snapshot, m.SnapshotTimestamp, m.Epoch, m.Timestamp = snap.Name, info.Timestamp, info.Epoch, info.Timestamp
	m.Files, m.Size = []snapshot.ManifestFile{f}, f.Size

	// The WAL written since the snapshot started: the commits that went on while it was
	// written and uploaded. Listed after the upload, so the backup reaches that far. An
	// agent of an older operator (pods not rolled yet) cannot serve part of a file that
	// is being written: its backups hold the snapshot alone, as they did.
	var now []snapshot.File
	if !oldAgent {
		if now, err = agent.List(ctx); err != nil {
			return m, fmt.Errorf("%w: %w", errAgent, err)
		}
	}
	var infos []snapshot.Info
	for _, file := range now {
		if path.Dir(file.Name) != snapshot.WALDir {
			continue
		}
		in, _, err := describe(ctx, agent, file)
		if err != nil {
			return m, err
		}
		infos = append(infos, in)
	}
	wal, point := walToStore(info.Timestamp, infos)
	for _, in := range wal {
		f, err := upload(ctx, agent, store, dir, in)
		if err != nil {
			return m, err
		}
		m.Files = append(m.Files, f)
		m.Size += f.Size
	}
	m.Timestamp = point
	m.StoppedAt = time.Now().UTC()
	if err := m.Check(); err != nil {
		return m, err
	}
	body, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return m, err
	}
	if err := store.PutBytes(ctx, path.Join(dir, snapshot.ManifestName), body, "application/json"); err != nil {
		return m, err
	}
	return m, nil
}

// describe asks the agent what a file says of itself. An agent that does not answer the
// question (404: an older one, or a file gone meanwhile) leaves the file described by its
// name (named); one that finds the file unreadable (a corrupted snapshot) fails the
// attempt.
func describe(ctx context.Context, agent snapshot.Client, f snapshot.File) (info snapshot.Info, named bool, err error) {
	info, err = agent.Info(ctx, f.Name)
	if err == nil {
		return info, false, nil
	}
	if snapshot.IsAgentStatus(err, http.StatusNotFound) {
		info, err = snapshot.Inspect(strings.NewReader(""), f.Name, 0)
		info.Size, info.Length = f.Size, f.Size
		return info, true, err
	}
	return snapshot.Info{}, false, fmt.Errorf("%w: %w", errAgent, err)
}

// upload streams one file from the agent into the store, exactly info.Length bytes of it
// (a WAL file being written up to its last whole transaction), and returns its manifest
// entry.
func upload(ctx context.Context, agent snapshot.Client, store *objectstore.Store, dir string, info snapshot.Info) (snapshot.ManifestFile, error) {
	r, announced, err := agent.OpenLength(ctx, info.Name, info.Length)
	if err != nil {
		return snapshot.ManifestFile{}, fmt.Errorf("%w: %w", errAgent, err)
	}
	up, err := store.Put(ctx, path.Join(dir, info.Name), r, "application/octet-stream")
	_ = r.Close()
	if err != nil {
		return snapshot.ManifestFile{}, err
	}
	if up.Size != info.Length || (announced >= 0 && up.Size != announced) {
		return snapshot.ManifestFile{}, fmt.Errorf("stored %d bytes of %s, the agent announced %d of %d", up.Size, info.Name, announced, info.Length)
	}
	f := snapshot.ManifestFile{Name: info.Name, Size: up.Size, SHA256: up.SHA256}
	if info.Format != "" {
		f.Format, f.Epoch, f.Prev, f.Timestamp = info.Format, info.Epoch, info.Prev, info.Timestamp
	}
	return f, nil
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
