package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BackupConfiguration is where a cluster's backups go (spec.backup). Not in upstream:
// Memgraph's HA chart restores only from a VolumeSnapshot; the shape follows
// CloudNativePG's spec.backup and the suite's ValkeyCluster.
type BackupConfiguration struct {
	// ObjectStore is the S3-compatible store the snapshots are uploaded to.
	// +required
	ObjectStore ObjectStoreSpec `json:"objectStore"`

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

// ObjectStoreSpec is an S3-compatible object store: AWS S3, Google Cloud Storage (its S3
// interoperability endpoint with HMAC keys), MinIO, versitygw. Keys go under
// <prefix>/memgraph/<namespace>/<cluster>/, so two clusters sharing a bucket never
// overwrite each other.
type ObjectStoreSpec struct {
	// Endpoint is the store's URL: https://s3.amazonaws.com when unset,
	// https://storage.googleapis.com for GCS, http(s)://<host>:<port> for MinIO or
	// versitygw. Its scheme decides TLS.
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="self.matches('^https?://[^/?#]+/?$')",message="endpoint must be http://<host>[:port] or https://<host>[:port] with no path: put folders in prefix"
	// +optional
	Endpoint string `json:"endpoint,omitempty"`

	// Bucket must exist; the operator does not create it.
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=63
	// +required
	Bucket string `json:"bucket"`

	// Prefix is a folder in the bucket above the per-cluster folders.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	Prefix string `json:"prefix,omitempty"`

	// Region of the bucket; unset asks the endpoint (us-east-1 where it cannot say).
	// +kubebuilder:validation:MaxLength=64
	// +optional
	Region string `json:"region,omitempty"`

	// ForcePathStyle sends path-style requests (https://host/bucket/key), which MinIO
	// and most self-hosted stores need.
	// +optional
	ForcePathStyle bool `json:"forcePathStyle,omitempty"`

	// Credentials name the Secret in the cluster's namespace holding the access keys.
	// +required
	Credentials ObjectStoreCredentials `json:"credentials"`

	// CA names a Secret key holding PEM certificates to trust for an https endpoint signed
	// by a private CA (besides the system's).
	// +optional
	CA *SecretKeyRef `json:"ca,omitempty"`
}

// ObjectStoreCredentials name the keys of a Secret that hold S3 access keys. They are read
// by the operator when a backup runs, and by the restore init container from its
// environment; they are never copied into a spec, a status, a log line or an event.
type ObjectStoreCredentials struct {
	// SecretName is a Secret in the cluster's namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	SecretName string `json:"secretName"`
	// AccessKeyIDKey is the key holding the access key id.
	// +kubebuilder:default=AWS_ACCESS_KEY_ID
	// +optional
	AccessKeyIDKey string `json:"accessKeyIDKey,omitempty"`
	// SecretAccessKeyKey is the key holding the secret access key.
	// +kubebuilder:default=AWS_SECRET_ACCESS_KEY
	// +optional
	SecretAccessKeyKey string `json:"secretAccessKeyKey,omitempty"`
	// SessionTokenKey is the key holding a session token, read when present.
	// +kubebuilder:default=AWS_SESSION_TOKEN
	// +optional
	SessionTokenKey string `json:"sessionTokenKey,omitempty"`
}

// SecretKeyRef is one key of a Secret in the object's namespace.
type SecretKeyRef struct {
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`
	// Key in the Secret.
	// +kubebuilder:default=ca.crt
	// +optional
	Key string `json:"key,omitempty"`
}

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
	Cluster ClusterReference `json:"cluster"`
}

// ClusterReference names a MemgraphCluster in the same namespace.
type ClusterReference struct {
	// Name of the MemgraphCluster.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +required
	Name string `json:"name"`
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
