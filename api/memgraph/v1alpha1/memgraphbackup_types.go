package v1alpha1

import (
	backupv1 "github.com/opsuite/suite/api/backup/v1alpha1"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BackupConfiguration is where a cluster's backups go (spec.backup). Not in upstream:
// Memgraph's HA chart restores only from a VolumeSnapshot; the shape follows
// CloudNativePG's spec.backup and the suite's ValkeyCluster.
type BackupConfiguration struct {
	// ObjectStore is the S3-compatible store the snapshots are uploaded to.
	// +required
	ObjectStore backupv1.ObjectStoreSpec `json:"objectStore"`

	// AgentPort is the port of the backup agent, a sidecar of every data-instance pod
	// (the operator's own binary) that serves the snapshots Memgraph wrote to the
	// operator, which uploads them.
	// +kubebuilder:validation:Minimum=1024
	// +kubebuilder:validation:Maximum=65535
	// +kubebuilder:default=7690
	// +optional
	AgentPort int32 `json:"agentPort,omitempty"`

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

// DefaultBackupAgentPort is the backup agent's port when spec.backup.agentPort is unset.
const DefaultBackupAgentPort = 7690

// BootstrapSpec says what a new cluster starts from (spec.bootstrap, CloudNativePG's
// word). It is set when the cluster is created and never changes.
type BootstrapSpec struct {
	// Backup names a Completed MemgraphBackup in this namespace: the first data instance
	// (the MAIN at registration) starts from its snapshot, the replicas sync from it.
	// +required
	Backup BackupReference `json:"backup"`
}

// BackupReference names a MemgraphBackup in the same namespace.
type BackupReference struct {
	// Name of the MemgraphBackup.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`
}

// BackupPhase is a backup's one-word state.
// +kubebuilder:validation:Enum=Pending;Running;Completed;Failed
type BackupPhase string

// Backup phases. Pending: waiting for the cluster, its settings or a MAIN. Running: the
// snapshot is being taken and uploaded. Completed: the snapshot and the manifest are
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

// MemgraphBackup condition reasons; the reasons of Warning events too.
const (
	// BackupReasonBackupCompleted: Completed=True, the snapshot taken on a replica
	// caught up with the MAIN.
	BackupReasonBackupCompleted = "BackupCompleted"
	// BackupReasonCompletedOnMain: Completed=True, but the snapshot was taken on the MAIN
	// (which carries the extra load) because no replica was caught up with it, or none
	// that was could be backed up; a Warning event says so.
	BackupReasonCompletedOnMain = "CompletedOnMain"
	// BackupReasonRunning: the snapshot is being taken and uploaded.
	BackupReasonRunning = "Running"
	// BackupReasonClusterNotFound: the named MemgraphCluster does not exist (yet).
	BackupReasonClusterNotFound = "ClusterNotFound"
	// BackupReasonNoObjectStore: the cluster has no spec.backup.objectStore.
	BackupReasonNoObjectStore = "NoObjectStore"
	// BackupReasonCredentialsMissing: the credentials or CA Secret, or a key of it, is missing.
	BackupReasonCredentialsMissing = "CredentialsMissing"
	// BackupReasonNoMain: no data instance holds MAIN, so there is nothing consistent to
	// snapshot yet.
	BackupReasonNoMain = "NoMain"
	// BackupReasonAgentUnavailable: the MAIN's pod has no backup agent answering (pods
	// made before spec.backup was set are rolled to get one).
	BackupReasonAgentUnavailable = "AgentUnavailable"
	// BackupReasonUploadFailed: the snapshot could not be taken, read or stored after the
	// retries.
	BackupReasonUploadFailed = "UploadFailed"
)

// The roles a backup's source instance can have (status.role).
const (
	BackupRoleMain    = "main"
	BackupRoleReplica = "replica"
)

// MemgraphBackupSpec names the cluster to back up. A backup is taken once; its spec never
// changes.
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="a MemgraphBackup's spec is immutable: create another backup"
type MemgraphBackupSpec struct {
	// Cluster is the MemgraphCluster in this namespace to back up.
	// +required
	Cluster backupv1.ClusterReference `json:"cluster"`
}

// BackupFileStatus is one stored durability file.
type BackupFileStatus struct {
	// Name is the file's name in Memgraph's data directory, e.g.
	// snapshots/20261205023000123456_timestamp_42.
	Name string `json:"name"`
	// Object is its key in the bucket.
	Object string `json:"object"`
	// Size in bytes.
	Size int64 `json:"size"`
	// SHA256 is the hex SHA-256 of the stored bytes.
	SHA256 string `json:"sha256"`
}

// MemgraphBackupStatus is a backup's progress and result.
type MemgraphBackupStatus struct {
	// ObservedGeneration is the generation last judged.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Phase summarises the backup.
	// +optional
	Phase BackupPhase `json:"phase,omitempty"`
	// StartedAt is when the snapshot was asked for.
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
	// Instance is the data instance the snapshot was taken on: a replica caught up with
	// the MAIN when there is one, else the MAIN.
	// +optional
	Instance string `json:"instance,omitempty"`
	// Role is that instance's role when the snapshot was taken: replica or main.
	// +optional
	Role string `json:"role,omitempty"`
	// Main is the cluster's MAIN when the backup ran.
	// +optional
	Main string `json:"main,omitempty"`
	// Epoch is the MAIN's epoch as the snapshot file records it (Memgraph's epoch id,
	// which no query shows); empty when the backup agent does not read the file's format.
	// +optional
	Epoch string `json:"epoch,omitempty"`
	// SnapshotTimestamp is the snapshot's commit timestamp.
	// +optional
	SnapshotTimestamp int64 `json:"snapshotTimestamp,omitempty"`
	// Timestamp is the last commit the backup holds: the snapshot's, or that of the last
	// transaction in the WAL files stored with it, which a restore replays.
	// +optional
	Timestamp int64 `json:"timestamp,omitempty"`
	// ServerVersion is the Memgraph version (SHOW VERSION) of that instance.
	// +optional
	ServerVersion string `json:"serverVersion,omitempty"`
	// Size is the stored bytes of every file.
	// +optional
	Size int64 `json:"size,omitempty"`
	// Files are the stored durability files: the snapshot, then the WAL files.
	// +listType=atomic
	// +optional
	Files []BackupFileStatus `json:"files,omitempty"`
	// Attempts counts the snapshots tried (a failed upload is retried).
	// +optional
	Attempts int32 `json:"attempts,omitempty"`
	// Conditions: Completed.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// MemgraphBackup is one backup of a MemgraphCluster to its object store: a snapshot
// taken on a replica caught up with the MAIN, or on the MAIN when none is (CREATE
// SNAPSHOT), and the WAL files written after it, uploaded with a manifest. Not in
// upstream.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=mgb,categories=opsuite
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.cluster.name`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Instance",type=string,JSONPath=`.status.instance`
// +kubebuilder:printcolumn:name="Role",type=string,JSONPath=`.status.role`,description="The source instance's role: replica, or main when no replica was caught up"
// +kubebuilder:printcolumn:name="Size",type=integer,JSONPath=`.status.size`,description="Stored bytes"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type MemgraphBackup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec MemgraphBackupSpec `json:"spec"`
	// +optional
	Status MemgraphBackupStatus `json:"status,omitempty"`
}

// MemgraphBackupList is a list of MemgraphBackup.
// +kubebuilder:object:root=true
type MemgraphBackupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MemgraphBackup `json:"items"`
}
