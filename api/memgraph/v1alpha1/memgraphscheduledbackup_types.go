package v1alpha1

import (
	backupv1 "github.com/opsuite/suite/api/backup/v1alpha1"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Labels and annotations on the MemgraphBackups a schedule creates.
const (
	// LabelScheduledBackup names the MemgraphScheduledBackup that created a backup.
	LabelScheduledBackup = "memgraph.com/scheduled-backup"
	// AnnotationScheduledTime is the scheduled time (RFC 3339, UTC) a backup was taken for.
	AnnotationScheduledTime = "memgraph.com/scheduled-time"
)

// MemgraphScheduledBackup creates a MemgraphBackup of a cluster at the times of a cron
// schedule. Not in upstream: the shape is CloudNativePG's ScheduledBackup.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=mgsb,categories=opsuite
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 238",message="a MemgraphScheduledBackup's name must be at most 238 characters: its backups are named <name>-<YYYYMMDDhhmmss>"
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.cluster.name`
// +kubebuilder:printcolumn:name="Schedule",type=string,JSONPath=`.spec.schedule`
// +kubebuilder:printcolumn:name="Suspend",type=boolean,JSONPath=`.spec.suspend`
// +kubebuilder:printcolumn:name="Last Backup",type=string,JSONPath=`.status.lastBackupName`
// +kubebuilder:printcolumn:name="Next",type=string,JSONPath=`.status.nextScheduleTime`,description="When the next backup is due (UTC)"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type MemgraphScheduledBackup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec backupv1.ScheduledBackupSpec `json:"spec"`
	// +optional
	Status backupv1.ScheduledBackupStatus `json:"status,omitempty"`
}

// MemgraphScheduledBackupList is a list of MemgraphScheduledBackup.
// +kubebuilder:object:root=true
type MemgraphScheduledBackupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MemgraphScheduledBackup `json:"items"`
}
