package backup

import (
	backupv1 "github.com/opsuite/suite/api/backup/v1alpha1"

	"context"
	"time"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/shared/backupschedule"
	"github.com/opsuite/suite/shared/objectstore"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The schedule and retention controllers' names: events come from them.
const (
	ScheduleName  = "memgraphscheduledbackup-controller"
	RetentionName = "memgraphbackup-retention"
)

// +kubebuilder:rbac:groups=memgraph.com,resources=memgraphscheduledbackups,verbs=list;watch
// +kubebuilder:rbac:groups=memgraph.com,resources=memgraphscheduledbackups/status,verbs=patch
// +kubebuilder:rbac:groups=memgraph.com,resources=memgraphbackups,verbs=create;delete

// ScheduleConfig is what the schedule controller needs besides the manager.
type ScheduleConfig struct {
	// Operator names the metrics.
	Operator string
	// Now is the clock (default time.Now); tests may drive it.
	Now func() time.Time
}

// RetentionConfig is what the retention controller needs besides the manager.
type RetentionConfig struct {
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// SetupSchedule registers the MemgraphScheduledBackup controller with mgr: it creates a
// MemgraphBackup at each time of a schedule, named after that time, and sleeps (RequeueAfter)
// until the next one (backupschedule.SetupSchedule).
func SetupSchedule(mgr ctrl.Manager, cfg ScheduleConfig) error {
	if cfg.Operator == "" {
		cfg.Operator = "memgraph-operator"
	}
	return backupschedule.SetupSchedule(mgr, newProduct(mgr), backupschedule.ScheduleConfig{Name: ScheduleName, Operator: cfg.Operator, Now: cfg.Now})
}

// SetupRetention registers the retention controller with mgr: it applies a cluster's
// spec.backup.retentionPolicy and keepLast to its MemgraphBackups, their objects in the
// store first (backupschedule.SetupRetention).
func SetupRetention(mgr ctrl.Manager, cfg RetentionConfig) error {
	return backupschedule.SetupRetention(mgr, newProduct(mgr), backupschedule.RetentionConfig{Name: RetentionName, Now: cfg.Now})
}

// product is Memgraph's kinds for the shared schedule and retention controllers.
type product struct{ secrets client.Reader }

var _ backupschedule.Product[*memgraphv1.MemgraphScheduledBackup, *memgraphv1.MemgraphCluster, *memgraphv1.MemgraphBackup] = product{}

func newProduct(mgr ctrl.Manager) product {
	return product{secrets: mgr.GetAPIReader()}
}

func (product) Names() backupschedule.Names {
	return backupschedule.Names{Schedule: "MemgraphScheduledBackup", Cluster: "MemgraphCluster", Backup: "MemgraphBackup",
		LabelScheduledBackup: memgraphv1.LabelScheduledBackup, AnnotationScheduledTime: memgraphv1.AnnotationScheduledTime}
}

func (product) NewSchedule() *memgraphv1.MemgraphScheduledBackup {
	return &memgraphv1.MemgraphScheduledBackup{}
}
func (product) NewCluster() *memgraphv1.MemgraphCluster { return &memgraphv1.MemgraphCluster{} }
func (product) NewBackup() *memgraphv1.MemgraphBackup   { return &memgraphv1.MemgraphBackup{} }
func (product) NewBackupList() client.ObjectList        { return &memgraphv1.MemgraphBackupList{} }

func (product) Schedule(sb *memgraphv1.MemgraphScheduledBackup) backupschedule.ScheduleSpec {
	return backupschedule.ScheduleSpec{Cluster: sb.Spec.Cluster.Name, Schedule: sb.Spec.Schedule, Suspend: sb.Spec.Suspend,
		Immediate: sb.Spec.Immediate, Owner: string(sb.Spec.BackupOwnerReference)}
}

func (product) ScheduleStatus(sb *memgraphv1.MemgraphScheduledBackup) *backupschedule.ScheduleStatus {
	return (*backupschedule.ScheduleStatus)(&sb.Status)
}

func (product) ScheduledBackup(meta metav1.ObjectMeta, cluster string) *memgraphv1.MemgraphBackup {
	return &memgraphv1.MemgraphBackup{ObjectMeta: meta, Spec: memgraphv1.MemgraphBackupSpec{Cluster: backupv1.ClusterReference{Name: cluster}}}
}

func (product) Retention(c *memgraphv1.MemgraphCluster) (string, int32, bool) {
	if c.Spec.Backup == nil {
		return "", 0, false
	}
	return c.Spec.Backup.RetentionPolicy, c.Spec.Backup.KeepLast, true
}

func (product) Backup(b *memgraphv1.MemgraphBackup) backupschedule.BackupInfo {
	info := backupschedule.BackupInfo{Cluster: b.Spec.Cluster.Name, Phase: string(b.Status.Phase), Bucket: b.Status.Bucket, Path: b.Status.Path}
	if b.Status.StoppedAt != nil {
		info.StoppedAt = &b.Status.StoppedAt.Time
	}
	return info
}

func (p product) OpenStore(ctx context.Context, c *memgraphv1.MemgraphCluster) (*objectstore.Store, error) {
	return OpenStore(ctx, p.secrets, c)
}

func (product) Folder(b *memgraphv1.MemgraphBackup) string { return Layout(b) }
