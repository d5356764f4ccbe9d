package v1alpha1

import (
	backupv1 "github.com/opsuite/suite/api/backup/v1alpha1"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BootstrapConfiguration is how a new cluster starts (spec.bootstrap), in CloudNativePG's
// shape: unset, it starts empty; with recovery, from a backup. Not in upstream.
type BootstrapConfiguration struct {
	// Recovery starts the cluster from a completed backup: each shard's primary loads its
	// shard's RDB before it first serves, the slots are laid out as the backup recorded
	// them and the replicas sync from the primaries.
	// +required
	Recovery *BootstrapRecovery `json:"recovery"`
}

// BootstrapRecovery names the backup to start from: a ValkeyBackup of this namespace, or
// the key of a backup's manifest in an object store (for a backup whose ValkeyBackup is
// gone, or one taken in another namespace or Kubernetes cluster).
// +kubebuilder:validation:XValidation:rule="has(self.backup) != has(self.manifest)",message="bootstrap.recovery needs exactly one of backup (a ValkeyBackup's name) and manifest (the key of a backup's manifest.json in the object store)"
// +kubebuilder:validation:XValidation:rule="!has(self.manifest) || self.manifest.endsWith('/manifest.json')",message="bootstrap.recovery.manifest is the key of a backup's manifest: <ValkeyBackup status.path>/manifest.json"
type BootstrapRecovery struct {
	// Backup is a Completed ValkeyBackup in the cluster's namespace; its status names the
	// bucket and folder.
	// +optional
	Backup *BackupReference `json:"backup,omitempty"`

	// Manifest is the key of a backup's manifest.json in the bucket, prefix included:
	// a ValkeyBackup's status.path followed by /manifest.json.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Manifest string `json:"manifest,omitempty"`

	// ObjectStore is the store holding the backup, with its credentials Secret in this
	// namespace; unset means spec.backup.objectStore. Its prefix is not used: backup and
	// manifest name the objects by their whole key.
	// +optional
	ObjectStore *backupv1.ObjectStoreSpec `json:"objectStore,omitempty"`
}

// BackupReference names a ValkeyBackup in the same namespace.
type BackupReference struct {
	// Name of the ValkeyBackup.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`
}

// RestorePhase is a restore's one-word state.
// +kubebuilder:validation:Enum=Pending;Loading;Completed;Failed
type RestorePhase string

// Restore phases. Pending: the backup is being found and checked (nothing is created
// yet). Loading: the members exist and each shard's primary loads its RDB. Completed: the
// backup's keys are served; the cluster goes on to spec.shards. Failed: the backup cannot
// be restored (a checksum or the manifest is wrong); nothing was created.
const (
	RestorePhasePending   RestorePhase = "Pending"
	RestorePhaseLoading   RestorePhase = "Loading"
	RestorePhaseCompleted RestorePhase = "Completed"
	RestorePhaseFailed    RestorePhase = "Failed"
)

// RestoreStatus is the progress of spec.bootstrap.recovery.
type RestoreStatus struct {
	// Phase summarises the restore.
	// +optional
	Phase RestorePhase `json:"phase,omitempty"`
	// Bucket and Path are the backup's folder (its manifest is <path>/manifest.json).
	// +optional
	Bucket string `json:"bucket,omitempty"`
	// +optional
	Path string `json:"path,omitempty"`
	// Shards is the backup's shard count, the cluster's until the restore completed.
	// +optional
	Shards int32 `json:"shards,omitempty"`
	// Keys is the key count the backup's RDBs declare.
	// +optional
	Keys int64 `json:"keys,omitempty"`
	// Size is the bytes of the backup's RDBs, each read and checked against its SHA-256.
	// +optional
	Size int64 `json:"size,omitempty"`
	// StartedAt is when the members were created to load the backup.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// CompletedAt is when every shard served its backed-up slots.
	// +optional
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`
}

// ConditionRestored is a bootstrapped cluster's restore: True once every shard serves
// the backup's keys; False with the reason it is not (yet). Absent without
// spec.bootstrap.
const ConditionRestored = "Restored"

// Reasons of the Restored condition, and of the events (Warning for the refusals).
const (
	// ReasonRestoreCompleted: Restored=True.
	ReasonRestoreCompleted = "RestoreCompleted"
	// ReasonRestoreLoading: the primaries are loading their shards' RDBs.
	ReasonRestoreLoading = "RestoreLoading"
	// ReasonBackupNotFound: the ValkeyBackup named does not exist.
	ReasonBackupNotFound = "BackupNotFound"
	// ReasonBackupNotCompleted: the ValkeyBackup named is not Completed (yet).
	ReasonBackupNotCompleted = "BackupNotCompleted"
	// ReasonRestoreNoObjectStore: neither bootstrap.recovery.objectStore nor
	// spec.backup.objectStore says where the backup is.
	ReasonRestoreNoObjectStore = "RestoreNoObjectStore"
	// ReasonRestoreCredentialsMissing: the store's credentials or CA Secret is missing.
	ReasonRestoreCredentialsMissing = "RestoreCredentialsMissing"
	// ReasonManifestNotFound: the folder has no manifest.json: the backup is partial or
	// still running, and a partial backup is never restored.
	ReasonManifestNotFound = "ManifestNotFound"
	// ReasonManifestInvalid: the manifest cannot be read, is of an unknown format, or its
	// shards do not cover the 16384 slots once each.
	ReasonManifestInvalid = "ManifestInvalid"
	// ReasonChecksumMismatch: a shard's object is missing, or its size or SHA-256 differs
	// from the manifest's: the backup is corrupt and is not restored.
	ReasonChecksumMismatch = "ChecksumMismatch"
	// ReasonRestoreInitFailed: a primary's restore-rdb init container failed (its object
	// changed since it was checked, the store is unreachable from the pod, or its data
	// volume holds data); the kubelet retries it. Its log says why.
	ReasonRestoreInitFailed = "RestoreInitFailed"
	// ReasonClusterNotEmpty: data volumes of the cluster's members already exist (kept from
	// an earlier cluster of this name); a restore never writes over data.
	ReasonClusterNotEmpty = "ClusterNotEmpty"
)
