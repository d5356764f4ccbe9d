package backupschedule

import (
	"context"
	"path"
	"time"

	"k8s.io/apimachinery/pkg/types"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opsuite/suite/shared/objectstore"
)

// Product is what the schedule and retention controllers (SetupSchedule, SetupRetention)
// need to know of one product's kinds: its ScheduledBackup S, its cluster C and its
// backup B. Each operator implements it once over its API types; the reconcile logic,
// the same for every product, is here.
type Product[S, C, B client.Object] interface {
	// Names are the kinds' names and the product's label and annotation keys.
	Names() Names
	NewSchedule() S
	NewCluster() C
	NewBackup() B
	NewBackupList() client.ObjectList
	// Schedule reads a ScheduledBackup's spec.
	Schedule(S) ScheduleSpec
	// ScheduleStatus points at a ScheduledBackup's status, which the controller changes.
	ScheduleStatus(S) *ScheduleStatus
	// ScheduledBackup is the backup of cluster to create, its metadata set.
	ScheduledBackup(meta metav1.ObjectMeta, cluster string) B
	// Retention is a cluster's spec.backup.retentionPolicy and keepLast; ok is false
	// when the cluster has no spec.backup.
	Retention(C) (window string, keepLast int32, ok bool)
	// Backup reads what retention judges of a backup.
	Backup(B) BackupInfo
	// OpenStore opens a cluster's object store (its spec.backup.objectStore and Secrets).
	OpenStore(ctx context.Context, c C) (*objectstore.Store, error)
	// Folder is where a backup's objects are, below the store's prefix.
	Folder(B) string
}

// Names are a product's kind names (messages, logs, events) and the keys it marks the
// backups a schedule creates with.
type Names struct {
	// Schedule, Cluster and Backup are kind names: "ValkeyScheduledBackup",
	// "ValkeyCluster", "ValkeyBackup".
	Schedule, Cluster, Backup string
	// LabelScheduledBackup names the schedule that created a backup;
	// AnnotationScheduledTime holds the time (RFC 3339, UTC) it was created for.
	LabelScheduledBackup, AnnotationScheduledTime string
}

// ScheduleSpec is a ScheduledBackup's spec, CloudNativePG's shape.
type ScheduleSpec struct {
	// Cluster names the cluster in the schedule's namespace.
	Cluster  string
	Schedule string
	Suspend  bool
	// Immediate takes a backup when the schedule is created.
	Immediate bool
	// Owner is spec.backupOwnerReference: OwnerNone, OwnerSelf or OwnerCluster.
	Owner string
}

// Owners of scheduled backups (spec.backupOwnerReference).
const (
	OwnerNone    = "none"
	OwnerSelf    = "self"
	OwnerCluster = "cluster"
)

// ScheduleStatus is a ScheduledBackup's status. Both products' status types have these
// fields, in this order, so a product's ScheduleStatus is a pointer conversion
// ((*ScheduleStatus)(&sb.Status)) the compiler checks.
type ScheduleStatus struct {
	ObservedGeneration int64
	LastScheduleTime   *metav1.Time
	NextScheduleTime   *metav1.Time
	LastBackupName     string
	Conditions         []metav1.Condition
}

// BackupInfo is what retention reads of one backup.
type BackupInfo struct {
	// Cluster is spec.cluster.name.
	Cluster string
	// Phase is status.phase: Pending, Running, Completed, Failed (or none yet).
	Phase string
	// StoppedAt is when it completed or failed; nil while it runs.
	StoppedAt *time.Time
	// Bucket and Path are where its status says it is stored ("" before it started).
	Bucket, Path string
}

// StateOf is how retention counts a backup of phase: Completed and Failed as such, any
// other (Pending, Running, none yet) as in progress.
func StateOf(phase string) State {
	switch phase {
	case "Completed":
		return Completed
	case "Failed":
		return Failed
	}
	return InProgress
}

// The ScheduledBackup's condition and its reasons, and the retention events' reasons;
// both products' API packages declare the same strings.
const (
	ConditionScheduled = "Scheduled"

	ReasonActive          = "Active"
	ReasonSuspended       = "Suspended"
	ReasonInvalidSchedule = "InvalidSchedule"
	ReasonClusterNotFound = "ClusterNotFound"
	ReasonBackupCreated   = "BackupCreated"

	ReasonBackupPruned = "BackupPruned"
	ReasonPruneSkipped = "PruneSkipped"
)

// Folder is where a backup's objects go below the store's prefix: one folder per product,
// one per cluster (namespace and name), one per backup in it (its name and the first 8
// characters of its UID, so a backup recreated under the same name never overwrites the
// first).
func Folder(product, namespace, cluster, backup string, uid types.UID) string {
	u := string(uid)
	if len(u) > 8 {
		u = u[:8]
	}
	return path.Join(product, namespace, cluster, backup+"-"+u)
}

// Retry runs try up to attempts times until it returns nil, pausing attempt times delay
// after a failed attempt (less when ctx ends), and returns the last error.
func Retry(ctx context.Context, attempts int, delay time.Duration, try func(attempt int) error) error {
	var err error
	for attempt := 1; attempt <= attempts; attempt++ {
		if err = try(attempt); err == nil {
			return nil
		}
		if attempt < attempts {
			select {
			case <-ctx.Done():
			case <-time.After(time.Duration(attempt) * delay):
			}
		}
	}
	return err
}
