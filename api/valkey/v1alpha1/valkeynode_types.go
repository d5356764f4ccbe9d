package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeRole is a Valkey replication role.
// +kubebuilder:validation:Enum=primary;replica
type NodeRole string

const (
	// RolePrimary owns slots.
	RolePrimary NodeRole = "primary"
	// RoleReplica replicates a primary.
	RoleReplica NodeRole = "replica"
)

// ValkeyNodeSpec is one member of a ValkeyCluster: its position, and what it inherits from
// the cluster's spec. The operator writes it; people should edit the ValkeyCluster.
// +kubebuilder:validation:XValidation:rule="!(has(self.persistence) && has(self.workloadType) && self.workloadType == 'Deployment')",message="persistence needs workloadType StatefulSet"
// +kubebuilder:validation:XValidation:rule="has(oldSelf.persistence) == has(self.persistence)",message="persistence cannot be added or removed on a ValkeyNode: its PVC holds the node's data"
// +kubebuilder:validation:XValidation:rule="!has(self.persistence) || !has(oldSelf.persistence) || quantity(self.persistence.size).compareTo(quantity(oldSelf.persistence.size)) >= 0",message="persistence.size can only grow (a PVC cannot shrink)"
// +kubebuilder:validation:XValidation:rule="!has(self.persistence) || !has(oldSelf.persistence) || (has(self.persistence.storageClassName) == has(oldSelf.persistence.storageClassName) && (!has(self.persistence.storageClassName) || self.persistence.storageClassName == oldSelf.persistence.storageClassName))",message="persistence.storageClassName is immutable"
type ValkeyNodeSpec struct {
	// ClusterName is the ValkeyCluster this node belongs to (also its controller owner).
	// It names the Service the pod's DNS name is under and labels the node's objects, so
	// it follows the ValkeyCluster's name rules.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=46
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="clusterName must be a ValkeyCluster's name: at most 46 characters, a lowercase letter first, then lowercase letters, digits and '-'"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="clusterName is immutable: a node never moves to another cluster"
	// +required
	ClusterName string `json:"clusterName"`

	// ShardIndex is the shard (0-based) this node is created for, the one in its name;
	// below MaxShards. status.shard is the one it serves.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:XValidation:rule="self <= 999",message="shardIndex must be at most 999: a cluster has at most 1000 shards"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="shardIndex is immutable: a node never moves to another shard"
	// +required
	ShardIndex int32 `json:"shardIndex"`

	// NodeIndex is the node's position (0-based) within its shard; 0 is created as the
	// primary. At most MaxReplicas.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:XValidation:rule="self <= 15",message="nodeIndex must be at most 15: a shard has a primary and at most 15 replicas"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="nodeIndex is immutable"
	// +required
	NodeIndex int32 `json:"nodeIndex"`

	// RoleHint is the role the node is created for; after failovers the running role
	// (status.role) may differ, and the operator does not fight it.
	// +optional
	RoleHint NodeRole `json:"roleHint,omitempty"`

	// Image is the Valkey server image.
	// +kubebuilder:validation:MaxLength=512
	// +optional
	Image string `json:"image,omitempty"`

	// ImagePullSecrets for the pod.
	// +kubebuilder:validation:MaxItems=16
	// +optional
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`

	// WorkloadType runs the pod; fixed at creation.
	// +kubebuilder:default=StatefulSet
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="workloadType is immutable"
	// +optional
	WorkloadType WorkloadType `json:"workloadType,omitempty"`

	// Persistence is the node's PVC.
	// +optional
	Persistence *PersistenceSpec `json:"persistence,omitempty"`

	// Resources of the server container.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// NodeSelector of the pod.
	// +kubebuilder:validation:MaxProperties=64
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// Affinity of the pod.
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`

	// Tolerations of the pod.
	// +kubebuilder:validation:MaxItems=64
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// TopologySpreadConstraints of the pod.
	// +kubebuilder:validation:MaxItems=16
	// +optional
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`

	// PriorityClassName of the pod.
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`

	// Exporter sidecar.
	// +optional
	Exporter ExporterSpec `json:"exporter,omitempty"`

	// ServerConfigMapName names the ConfigMap with the node's valkey.conf and scripts.
	// +optional
	ServerConfigMapName string `json:"serverConfigMapName,omitempty"`

	// ConfigHash is the hash of the restart-requiring part of the server config: a change
	// rolls the pod (in the spec, so it bumps the generation the cluster waits on).
	// +kubebuilder:validation:MaxLength=128
	// +optional
	ConfigHash string `json:"configHash,omitempty"`

	// UsersACLSecretName names the Secret with the ACL file the node loads.
	// +optional
	UsersACLSecretName string `json:"usersACLSecretName,omitempty"`

	// RestoreSecretName, set on the members of a cluster bootstrapped from a backup, names
	// the Secret the pod's restore-rdb init container reads (optional keys: the shard's
	// object and checksum, the store's keys). While the Secret has an entry for the node's
	// shard, a node whose data directory is empty starts with that RDB; the cluster
	// deletes the Secret once the restore completed, so a pod that comes back empty later
	// never loads the old backup. Fixed at creation, so the pod template never changes.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	RestoreSecretName string `json:"restoreSecretName,omitempty"`

	// Containers merged into the pod's containers by name.
	// +kubebuilder:validation:MaxItems=16
	// +optional
	Containers []corev1.Container `json:"containers,omitempty"`

	// TLS of the node; its certificate Secret is resolved by the cluster.
	// +optional
	TLS *TLSConfig `json:"tls,omitempty"`

	// TerminationGracePeriodSeconds of the pod; at most a day, as the cluster's.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=86400
	// +optional
	TerminationGracePeriodSeconds *int64 `json:"terminationGracePeriodSeconds,omitempty"`

	// PodSecurityContext of the pod.
	// +optional
	PodSecurityContext *corev1.PodSecurityContext `json:"podSecurityContext,omitempty"`

	// External is the cluster's networking.external: the node gets a Service of its own
	// and announces its address to clients.
	// +optional
	External *ExternalSpec `json:"external,omitempty"`
}

// ValkeyNodeStatus is the observed state of one member.
type ValkeyNodeStatus struct {
	// ObservedGeneration is the generation the status was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Ready mirrors the Ready condition, for the printer column.
	// +optional
	Ready bool `json:"ready,omitempty"`

	// PodName is the node's pod.
	// +optional
	PodName string `json:"podName,omitempty"`

	// PodIP is the pod's address.
	// +optional
	PodIP string `json:"podIP,omitempty"`

	// NodeName is the Kubernetes node the pod runs on; the cluster places replicas on
	// other nodes than their primary's.
	// +optional
	NodeName string `json:"nodeName,omitempty"`

	// ValkeyNodeID is the member's cluster node id (CLUSTER MYID), once it answered.
	// +optional
	ValkeyNodeID string `json:"valkeyNodeID,omitempty"`

	// AppliedConfigHash is the hash of the live-settable config last applied with CONFIG
	// SET; AppliedACLHash that of the ACL rules last applied with ACL SETUSER.
	// +optional
	AppliedConfigHash string `json:"appliedConfigHash,omitempty"`
	// +optional
	AppliedACLHash string `json:"appliedACLHash,omitempty"`

	// Role is the node's running replication role, as Valkey reports it.
	// +optional
	Role NodeRole `json:"role,omitempty"`

	// Shard is the shard the node serves: a primary's own, a replica's primary's. The
	// ValkeyCluster numbers the running shards (a primary owning slots and its replicas),
	// each by the shard most of its members are named for (spec.shardIndex), then by the
	// number it showed before (a failover renumbers nothing), then by the primary's name,
	// every number once; on a fresh cluster it is spec.shardIndex. It differs from
	// spec.shardIndex for a replica attached to another shard's primary, and is unset
	// while the node serves no slots (a member not joined yet, an empty primary waiting
	// for slots, a pod being replaced).
	// +kubebuilder:validation:Minimum=0
	// +optional
	Shard *int32 `json:"shard,omitempty"`

	// ExternalAddress is the host:port the node announces to clients with spec.external,
	// once announced.
	// +optional
	ExternalAddress string `json:"externalAddress,omitempty"`

	// Conditions are Ready, PersistentVolumeClaimReady, PersistentVolumeClaimSizeReady,
	// LiveConfigApplied and, with spec.external, ExternalAddressAnnounced (see the
	// NodeCondition* and NodeReason* constants).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ValkeyNode is one member of a ValkeyCluster: one pod and, with persistence, one PVC,
// owned by the cluster. Internal: the operator creates and changes it. Its name is at most
// MaxNodeNameLength characters and a DNS-1123 label: its StatefulSet labels the pod
// controller-revision-hash <name>-<hash of up to 10 characters>, a 63-character label
// value at most, and the pod's hostname <name>-0 is a DNS label.
// The name rules apply on create only (a name never changes), so an object admitted
// before them stays updatable and its finalizer can still be removed.
// +kubebuilder:validation:XValidation:rule="oldSelf.hasValue() || self.metadata.name.size() <= 52",message="metadata.name must be at most 52 characters: the StatefulSet <name> labels its pod with controller-revision-hash <name>-<hash of up to 10 characters>, which must fit in 63",optionalOldSelf=true
// +kubebuilder:validation:XValidation:rule="oldSelf.hasValue() || self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must hold only lowercase letters, digits and '-' (no '.'): the pod's hostname <name>-0 is a DNS label",optionalOldSelf=true
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=vkn,categories=opsuite
// +kubebuilder:printcolumn:name="Role",type=string,JSONPath=`.status.role`,description="Running replication role"
// +kubebuilder:printcolumn:name="Shard",type=integer,JSONPath=`.status.shard`,description="Shard the node serves (its primary's); the name holds the shard it was created for"
// +kubebuilder:printcolumn:name="Ready",type=boolean,JSONPath=`.status.ready`
// +kubebuilder:printcolumn:name="Pod",type=string,JSONPath=`.status.podName`,priority=1
// +kubebuilder:printcolumn:name="IP",type=string,JSONPath=`.status.podIP`,priority=1
// +kubebuilder:printcolumn:name="External",type=string,JSONPath=`.status.externalAddress`,priority=1,description="Address announced to clients outside Kubernetes (spec.networking.external)"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ValkeyNode struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec ValkeyNodeSpec `json:"spec"`
	// +optional
	Status ValkeyNodeStatus `json:"status,omitempty"`
}

// ValkeyNodeList is a list of ValkeyNode.
// +kubebuilder:object:root=true
type ValkeyNodeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ValkeyNode `json:"items"`
}
