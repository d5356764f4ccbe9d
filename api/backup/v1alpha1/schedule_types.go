package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BackupOwnerReference says which object owns the backups a schedule creates, as
// CloudNativePG's ScheduledBackup spec.backupOwnerReference: none (they outlive both),
// self (deleted with the scheduled backup) or cluster (deleted with the
// cluster). Deleting a backup never deletes its objects in the store; only
// retention (spec.backup.retentionPolicy, keepLast) does.
// +kubebuilder:validation:Enum=none;self;cluster
type BackupOwnerReference string

// Owners of scheduled backups.
const (
	BackupOwnerNone    BackupOwnerReference = "none"
	BackupOwnerSelf    BackupOwnerReference = "self"
	BackupOwnerCluster BackupOwnerReference = "cluster"
)

// ScheduledBackupSpec is when to back a cluster up. The shape is CloudNativePG's
// ScheduledBackup.
type ScheduledBackupSpec struct {
	// Cluster is the cluster in this namespace to back up.
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

// ScheduledBackupStatus is what the schedule did last and does next.
type ScheduledBackupStatus struct {
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
	// LastBackupName is the backup created last.
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

// Scheduled backup condition reasons; the reasons of its events too.
const (
	// ScheduledBackupReasonActive (True): backups are created at the schedule's times.
	ScheduledBackupReasonActive = "Active"
	// ScheduledBackupReasonSuspended (False): spec.suspend is true.
	ScheduledBackupReasonSuspended = "Suspended"
	// ScheduledBackupReasonInvalidSchedule (False, Warning event): spec.schedule passed
	// the API server's check but names no time the operator can compute (a field out
	// of range, the 30th of February); the event says which.
	ScheduledBackupReasonInvalidSchedule = "InvalidSchedule"
	// ScheduledBackupReasonClusterNotFound (False): the cluster named does not
	// exist; the schedule looks again at its next time.
	ScheduledBackupReasonClusterNotFound = "ClusterNotFound"
	// ScheduledBackupReasonBackupCreated (Normal event): a backup was created.
	ScheduledBackupReasonBackupCreated = "BackupCreated"
)

// Retention event reasons, on the cluster whose spec.backup holds the policy.
const (
	// BackupReasonBackupPruned (Normal): retention deleted a backup, its objects first.
	BackupReasonBackupPruned = "BackupPruned"
	// BackupReasonPruneSkipped (Warning): retention would delete a backup stored in
	// another bucket or folder than spec.backup.objectStore names now; it leaves the
	// backup and its objects alone (delete them by hand).
	BackupReasonPruneSkipped = "PruneSkipped"
)
