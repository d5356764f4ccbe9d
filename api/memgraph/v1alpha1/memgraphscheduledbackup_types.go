package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BackupOwnerReference says which object owns the MemgraphBackups a schedule creates, as
// CloudNativePG's ScheduledBackup spec.backupOwnerReference: none (they outlive both),
// self (deleted with the MemgraphScheduledBackup) or cluster (deleted with the
// MemgraphCluster). Deleting a MemgraphBackup never deletes its objects in the store; only
// retention (spec.backup.retentionPolicy, keepLast) does.
// +kubebuilder:validation:Enum=none;self;cluster
type BackupOwnerReference string

// Owners of scheduled backups.
const (
	BackupOwnerNone    BackupOwnerReference = "none"
	BackupOwnerSelf    BackupOwnerReference = "self"
	BackupOwnerCluster BackupOwnerReference = "cluster"
)

// MemgraphScheduledBackupSpec is when to back a cluster up. The shape is CloudNativePG's
// ScheduledBackup.
type MemgraphScheduledBackupSpec struct {
	// Cluster is the MemgraphCluster in this namespace to back up.
	// +required
	Cluster ClusterReference `json:"cluster"`

	// Schedule is a cron schedule in UTC: six fields with seconds first, as
	// CloudNativePG's ("0 0 3 * * *": 03:00:00 every day), or five with minutes first, as
	// a Kubernetes CronJob's ("0 3 * * *", seconds 0), or one of @yearly, @monthly,
	// @weekly, @daily and @hourly. Fields take numbers, ranges (1-5), lists (1,15), steps
	// (*/10) and names (JAN, SUN). A time missed while the operator was down or the
	// schedule suspended is not made up one by one: the latest one runs once.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="self.matches('^(@(yearly|annually|monthly|weekly|daily|midnight|hourly)|([0-9A-Za-z*?/,-]+ +){4,5}[0-9A-Za-z*?/,-]+)$')",message="schedule must be cron in UTC: 6 fields with seconds first (0 0 3 * * *), 5 with minutes first (0 3 * * *), or @daily, @hourly, @weekly, @monthly, @yearly; no time zone, no @every"
	// +required
	Schedule string `json:"schedule"`

	// Suspend stops the schedule: no backup is created while it is true. When it turns
	// false again, the latest time missed meanwhile runs once at once, as a CronJob does.
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// Immediate takes the first backup as soon as the schedule is created, then follows
	// the schedule.
	// +optional
	Immediate bool `json:"immediate,omitempty"`

	// BackupOwnerReference is which object owns the backups created: none (default),
	// self or cluster.
	// +kubebuilder:default=none
	// +optional
	BackupOwnerReference BackupOwnerReference `json:"backupOwnerReference,omitempty"`
}

// MemgraphScheduledBackupStatus is what the schedule did last and does next.
type MemgraphScheduledBackupStatus struct {
	// ObservedGeneration is the generation last judged.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// LastScheduleTime is the scheduled time of the last backup created (the creation
	// time for an immediate first backup). Backups are named
	// <schedule>-<YYYYMMDDhhmmss> of that time, so one time makes one backup however
	// often the operator restarts.
	// +optional
	LastScheduleTime *metav1.Time `json:"lastScheduleTime,omitempty"`
	// NextScheduleTime is the next time a backup is due; unset while suspended.
	// +optional
	NextScheduleTime *metav1.Time `json:"nextScheduleTime,omitempty"`
	// LastBackupName is the MemgraphBackup created last.
	// +optional
	LastBackupName string `json:"lastBackupName,omitempty"`
	// Conditions: Scheduled.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ScheduledBackupConditionScheduled is True while the schedule creates backups at its
// times; False with the reason it does not.
const ScheduledBackupConditionScheduled = "Scheduled"

// MemgraphScheduledBackup condition reasons; the reasons of its events too.
const (
	// ScheduledBackupReasonActive (True): backups are created at the schedule's times.
	ScheduledBackupReasonActive = "Active"
	// ScheduledBackupReasonSuspended (False): spec.suspend is true.
	ScheduledBackupReasonSuspended = "Suspended"
	// ScheduledBackupReasonInvalidSchedule (False, Warning event): spec.schedule passed
	// the API server's check but names no time the operator can compute (a field out
	// of range, the 30th of February); the event says which.
	ScheduledBackupReasonInvalidSchedule = "InvalidSchedule"
	// ScheduledBackupReasonClusterNotFound (False): the MemgraphCluster named does not
	// exist; the schedule looks again at its next time.
	ScheduledBackupReasonClusterNotFound = "ClusterNotFound"
	// ScheduledBackupReasonBackupCreated (Normal event): a MemgraphBackup was created.
	ScheduledBackupReasonBackupCreated = "BackupCreated"
)

// Retention event reasons, on the MemgraphCluster whose spec.backup holds the policy.
const (
	// BackupReasonBackupPruned (Normal): retention deleted a backup, its objects first.
	BackupReasonBackupPruned = "BackupPruned"
	// BackupReasonPruneSkipped (Warning): retention would delete a backup stored in
	// another bucket or folder than spec.backup.objectStore names now; it leaves the
	// backup and its objects alone (delete them by hand).
	BackupReasonPruneSkipped = "PruneSkipped"
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
	Spec MemgraphScheduledBackupSpec `json:"spec"`
	// +optional
	Status MemgraphScheduledBackupStatus `json:"status,omitempty"`
}

// MemgraphScheduledBackupList is a list of MemgraphScheduledBackup.
// +kubebuilder:object:root=true
type MemgraphScheduledBackupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MemgraphScheduledBackup `json:"items"`
}
