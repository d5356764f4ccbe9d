package v1alpha1

import (
	backupv1 "github.com/opsuite/suite/api/backup/v1alpha1"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BackupConfiguration is where a cluster's backups go (spec.backup). Not in upstream:
// valkey-io/valkey-operator has no backups; the shape follows CloudNativePG's
// spec.backup.barmanObjectStore.
type BackupConfiguration struct {
	// ObjectStore is the S3-compatible store the backups are streamed to.
	// +required
	ObjectStore backupv1.ObjectStoreSpec `json:"objectStore"`

	// RetentionPolicy is how long backups are kept, as CloudNativePG's: a count and a
	// unit, d (days), w (weeks) or m (months), e.g. 30d. A backup older than that (from
	// when it completed or failed) is deleted, its objects from the store first. The
	// newest completed backup is kept whatever its age, and a backup in progress is never
	// deleted. Unset: kept until keepLast says otherwise.
	// +kubebuilder:validation:MaxLength=5
	// +kubebuilder:validation:XValidation:rule="self.matches('^[1-9][0-9]{0,3}[dwm]$')",message="retentionPolicy must be a count (1-9999) and a unit, d (days), w (weeks) or m (months), e.g. 30d"
	// +optional
	RetentionPolicy string `json:"retentionPolicy,omitempty"`

	// KeepLast keeps at most this many completed backups, the newest; older ones are
	// deleted with their objects in the store. Failed backups never count among them:
	// one is deleted once a later backup completes. Unset: no count limit.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	// +optional
	KeepLast int32 `json:"keepLast,omitempty"`
}

// BackupPhase is a backup's one-word state.
// +kubebuilder:validation:Enum=Pending;Running;Completed;Failed
type BackupPhase string

// Backup phases. Pending: waiting for the cluster, its settings or a reshard to end.
// Running: the shards are being streamed. Completed: every shard and the manifest are
// stored; only such a backup is restorable. Failed: stopped for good (status says why).
const (
	BackupPhasePending   BackupPhase = "Pending"
	BackupPhaseRunning   BackupPhase = "Running"
	BackupPhaseCompleted BackupPhase = "Completed"
	BackupPhaseFailed    BackupPhase = "Failed"
)

// BackupConditionCompleted is True once the backup is stored whole (kubectl wait
// --for=condition=Completed); False with the reason it is not (yet).
const BackupConditionCompleted = "Completed"

// ValkeyBackup condition reasons; the reasons of Warning events too.
const (
	// BackupReasonBackupCompleted: Completed=True.
	BackupReasonBackupCompleted = "BackupCompleted"
	// BackupReasonRunning: the shards are being streamed.
	BackupReasonRunning = "Running"
	// BackupReasonClusterNotFound: the named ValkeyCluster does not exist (yet).
	BackupReasonClusterNotFound = "ClusterNotFound"
	// BackupReasonNoObjectStore: the cluster has no spec.backup.objectStore.
	BackupReasonNoObjectStore = "NoObjectStore"
	// BackupReasonCredentialsMissing: the credentials or CA Secret, or a key of it, is missing.
	BackupReasonCredentialsMissing = "CredentialsMissing"
	// BackupReasonClusterNotReady: a shard has no reachable member, or the members
	// disagree about the slots.
	BackupReasonClusterNotReady = "ClusterNotReady"
	// BackupReasonReshardInProgress: slots are migrating; the backup waits for the
	// reshard to end, since an RDB taken mid-move holds a slot's keys split over two shards.
	BackupReasonReshardInProgress = "ReshardInProgress"
	// BackupReasonUploadFailed: a shard could not be read or stored after the retries.
	BackupReasonUploadFailed = "UploadFailed"
	// BackupReasonBackupFromPrimary (Warning event): a shard had no in-sync replica, so
	// its primary served the snapshot (a fork on the member taking writes).
	BackupReasonBackupFromPrimary = "BackupFromPrimary"
)

// ValkeyBackupSpec names the cluster to back up. A backup is taken once; its spec never
// changes.
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="a ValkeyBackup's spec is immutable: create another backup"
type ValkeyBackupSpec struct {
	// Cluster is the ValkeyCluster in this namespace to back up.
	// +required
	Cluster backupv1.ClusterReference `json:"cluster"`
}

// ShardBackupStatus is one shard's part of a backup.
type ShardBackupStatus struct {
	// Index is the shard's place in slot order (the shard owning slot 0 first).
	Index int32 `json:"index"`
	// Slots are the shard's slot ranges, "0-5460" or "0-100,200-300".
	Slots string `json:"slots"`
	// Role is the member the RDB came from: replica, or primary when the shard had no
	// in-sync replica.
	Role string `json:"role"`
	// Object is the RDB's key in the bucket.
	Object string `json:"object"`
	// Size is the RDB's size in bytes.
	Size int64 `json:"size"`
	// Keys is the key count the RDB declares (-1 when it does not say).
	Keys int64 `json:"keys"`
	// SHA256 is the hex SHA-256 of the stored RDB.
	SHA256 string `json:"sha256"`
}

// ValkeyBackupStatus is a backup's progress and result.
type ValkeyBackupStatus struct {
	// ObservedGeneration is the generation last judged.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Phase summarises the backup.
	// +optional
	Phase BackupPhase `json:"phase,omitempty"`
	// StartedAt is when the shards started streaming.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// StoppedAt is when the backup completed or failed.
	// +optional
	StoppedAt *metav1.Time `json:"stoppedAt,omitempty"`
	// Endpoint and Bucket are where the backup is stored.
	// +optional
	Endpoint string `json:"endpoint,omitempty"`
	// +optional
	Bucket string `json:"bucket,omitempty"`
	// Path is the backup's folder in the bucket; its manifest is <path>/manifest.json.
	// +optional
	Path string `json:"path,omitempty"`
	// ServerVersion is the Valkey (or Redis) version of the members read.
	// +optional
	ServerVersion string `json:"serverVersion,omitempty"`
	// Size is the stored bytes of every shard's RDB.
	// +optional
	Size int64 `json:"size,omitempty"`
	// Keys is the sum of the shards' key counts.
	// +optional
	Keys int64 `json:"keys,omitempty"`
	// Shards are the per-shard results, in slot order.
	// +listType=atomic
	// +optional
	Shards []ShardBackupStatus `json:"shards,omitempty"`
	// Attempts counts the uploads tried (a failed shard is retried).
	// +optional
	Attempts int32 `json:"attempts,omitempty"`
	// Conditions: Completed.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ValkeyBackup is one backup of a ValkeyCluster to its object store: per shard a
// consistent RDB streamed from an in-sync replica, plus a manifest. Not in upstream.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=vkb,categories=opsuite
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.cluster.name`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Size",type=integer,JSONPath=`.status.size`,description="Stored bytes"
// +kubebuilder:printcolumn:name="Keys",type=integer,JSONPath=`.status.keys`,priority=1,description="Keys stored"
// +kubebuilder:printcolumn:name="Stopped",type=date,JSONPath=`.status.stoppedAt`,description="When the backup completed or failed"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ValkeyBackup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec ValkeyBackupSpec `json:"spec"`
	// +optional
	Status ValkeyBackupStatus `json:"status,omitempty"`
}

// ValkeyBackupList is a list of ValkeyBackup.
// +kubebuilder:object:root=true
type ValkeyBackupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ValkeyBackup `json:"items"`
}
