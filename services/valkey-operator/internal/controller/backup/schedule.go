package backup

import (
	backupv1 "github.com/opsuite/suite/api/backup/v1alpha1"

	"context"
	"time"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	"github.com/opsuite/suite/services/valkey-operator/internal/connect"
	"github.com/opsuite/suite/shared/backupschedule"
	"github.com/opsuite/suite/shared/objectstore"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The schedule and retention controllers' names: events come from them.
const (
	ScheduleName  = "valkeyscheduledbackup-controller"
	RetentionName = "valkeybackup-retention"
)

// +kubebuilder:rbac:groups=valkey.io,resources=valkeyscheduledbackups,verbs=list;watch
// +kubebuilder:rbac:groups=valkey.io,resources=valkeyscheduledbackups/status,verbs=patch
// +kubebuilder:rbac:groups=valkey.io,resources=valkeybackups,verbs=create;delete

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

// SetupSchedule registers the ValkeyScheduledBackup controller with mgr: it creates a
// ValkeyBackup at each time of a schedule, named after that time, and sleeps (RequeueAfter)
// until the next one (backupschedule.SetupSchedule).
func SetupSchedule(mgr ctrl.Manager, cfg ScheduleConfig) error {
	if cfg.Operator == "" {
		cfg.Operator = "valkey-operator"
	}
	return backupschedule.SetupSchedule(mgr, newProduct(mgr), backupschedule.ScheduleConfig{Name: ScheduleName, Operator: cfg.Operator, Now: cfg.Now})
}

// SetupRetention registers the retention controller with mgr: it applies a cluster's
// spec.backup.retentionPolicy and keepLast to its ValkeyBackups, their objects in the
// store first (backupschedule.SetupRetention).
func SetupRetention(mgr ctrl.Manager, cfg RetentionConfig) error {
	return backupschedule.SetupRetention(mgr, newProduct(mgr), backupschedule.RetentionConfig{Name: RetentionName, Now: cfg.Now})
}

// product is Valkey's kinds for the shared schedule and retention controllers.
type product struct{ secrets client.Reader }

var _ backupschedule.Product[*valkeyv1.ValkeyScheduledBackup, *valkeyv1.ValkeyCluster, *valkeyv1.ValkeyBackup] = product{}

func newProduct(mgr ctrl.Manager) product {
	return product{secrets: connect.CacheThenAPI(mgr.GetClient(), mgr.GetAPIReader())}
}

func (product) Names() backupschedule.Names {
	return backupschedule.Names{Schedule: "ValkeyScheduledBackup", Cluster: "ValkeyCluster", Backup: "ValkeyBackup",
		LabelScheduledBackup: valkeyv1.LabelScheduledBackup, AnnotationScheduledTime: valkeyv1.AnnotationScheduledTime}
}

func (product) NewSchedule() *valkeyv1.ValkeyScheduledBackup {
	return &valkeyv1.ValkeyScheduledBackup{}
}
func (product) NewCluster() *valkeyv1.ValkeyCluster { return &valkeyv1.ValkeyCluster{} }
func (product) NewBackup() *valkeyv1.ValkeyBackup   { return &valkeyv1.ValkeyBackup{} }
func (product) NewBackupList() client.ObjectList    { return &valkeyv1.ValkeyBackupList{} }

func (product) Schedule(sb *valkeyv1.ValkeyScheduledBackup) backupschedule.ScheduleSpec {
	return backupschedule.ScheduleSpec{Cluster: sb.Spec.Cluster.Name, Schedule: sb.Spec.Schedule, Suspend: sb.Spec.Suspend,
		Immediate: sb.Spec.Immediate, Owner: string(sb.Spec.BackupOwnerReference)}
}

func (product) ScheduleStatus(sb *valkeyv1.ValkeyScheduledBackup) *backupschedule.ScheduleStatus {
	return (*backupschedule.ScheduleStatus)(&sb.Status)
}

func (product) ScheduledBackup(meta metav1.ObjectMeta, cluster string) *valkeyv1.ValkeyBackup {
	return &valkeyv1.ValkeyBackup{ObjectMeta: meta, Spec: valkeyv1.ValkeyBackupSpec{Cluster: backupv1.ClusterReference{Name: cluster}}}
}

func (product) Retention(vc *valkeyv1.ValkeyCluster) (string, int32, bool) {
	if vc.Spec.Backup == nil {
		return "", 0, false
	}
	return vc.Spec.Backup.RetentionPolicy, vc.Spec.Backup.KeepLast, true
}

func (product) Backup(b *valkeyv1.ValkeyBackup) backupschedule.BackupInfo {
	info := backupschedule.BackupInfo{Cluster: b.Spec.Cluster.Name, Phase: string(b.Status.Phase), Bucket: b.Status.Bucket, Path: b.Status.Path}
	if b.Status.StoppedAt != nil {
		info.StoppedAt = &b.Status.StoppedAt.Time
	}
	return info
}

func (p product) OpenStore(ctx context.Context, vc *valkeyv1.ValkeyCluster) (*objectstore.Store, error) {
	return (&controller{secrets: p.secrets}).openStore(ctx, vc)
}

func (product) Folder(b *valkeyv1.ValkeyBackup) string { return Layout(b) }
