package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// State summarizes a cluster's conditions in the words every operator of the suite uses
// (shared/conditions.StateOf derives it).
// +kubebuilder:validation:Enum=Initializing;Reconciling;Ready;Degraded;Failed
type State string

// States of a cluster.
const (
	// StateInitializing: no status written yet.
	StateInitializing State = "Initializing"
	// StateReconciling: provisioning, scaling, upgrading or waiting for members to be
	// ready (Ready Unknown; status.reason says which).
	StateReconciling State = "Reconciling"
	// StateReady: every member serves and is search-ready, nothing under way (Ready True).
	StateReady State = "Ready"
	// StateDegraded: Ready False while at least replicationFactor members serve.
	StateDegraded State = "Degraded"
	// StateFailed: Ready False with fewer than replicationFactor members serving.
	StateFailed State = "Failed"
)

// MemberStatus is one member as the admin API reports it.
type MemberStatus struct {
	// ID is the member's node id (its pod name).
	ID string `json:"id"`
	// Address is its advertised address (pod FQDN:port).
	// +optional
	Address string `json:"address,omitempty"`
	// State is the server's word for it (e.g. active, leaving).
	// +optional
	State string `json:"state,omitempty"`
	// SearchReady is true once INFO reports search_ready=1.
	// +optional
	SearchReady bool `json:"searchReady,omitempty"`
}

// MemberRemoval records a member removal under way.
type MemberRemoval struct {
	// Member is the member id (its pod name).
	Member string `json:"member"`
	// StartedAt is when the removal started.
	StartedAt metav1.Time `json:"startedAt"`
}

// LostNode is a node lost while it held a member's volumes.
type LostNode struct {
	// Node is the Kubernetes node's name.
	Node string `json:"node"`
	// Reason is Deleted or NotReady.
	Reason string `json:"reason"`
	// Since is when the operator found the node lost.
	Since metav1.Time `json:"since"`
	// Member is the member (pod) whose volumes were on the node.
	// +optional
	Member string `json:"member,omitempty"`
	// Disks are the filesystem UUIDs of the node's disks the member's volumes were on.
	// +listType=set
	// +optional
	Disks []string `json:"disks,omitempty"`
	// Replacement is Replacing while the member is being replaced, Replaced once its new
	// pod serves on another node, empty before it started.
	// +optional
	Replacement string `json:"replacement,omitempty"`
	// ReturnedDisks are the prepared disks (filesystem UUIDs) the node's agent reports since
	// the node came back; they are not used until the node is offered again.
	// +listType=set
	// +optional
	ReturnedDisks []string `json:"returnedDisks,omitempty"`
}

// VeltrixClusterStatus is the observed state of a VeltrixCluster.
type VeltrixClusterStatus struct {
	// ObservedGeneration is the generation the status was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// State summarizes the conditions: Reconciling while Ready is Unknown, Ready, Degraded
	// or Failed (Ready False with or without replicationFactor members serving).
	// +optional
	State State `json:"state,omitempty"`

	// Reason is the reason of the condition that decided State (Scaling, Upgrading,
	// RemovalStuck, ...).
	// +optional
	Reason string `json:"reason,omitempty"`

	// Size is the number of members the StatefulSet runs now.
	// +optional
	Size int32 `json:"size,omitempty"`

	// ReadyMembers counts members that are Ready and search-ready.
	// +optional
	ReadyMembers int32 `json:"readyMembers,omitempty"`

	// Version is the version every member runs; empty during an upgrade.
	// +optional
	Version string `json:"version,omitempty"`

	// Epoch is the membership epoch /admin/cluster reports.
	// +optional
	Epoch int64 `json:"epoch,omitempty"`

	// PartitionCount is the number of partitions /admin/cluster reports.
	// +optional
	PartitionCount int32 `json:"partitionCount,omitempty"`

	// PartitionMap summarizes how partitions spread over members.
	// +optional
	PartitionMap string `json:"partitionMap,omitempty"`

	// LastScaleTime is when membership last changed.
	// +optional
	LastScaleTime *metav1.Time `json:"lastScaleTime,omitempty"`

	// LastFailoverTime is when the operator last failed a member over: removed the member
	// of a lost node (status.lostNodes) from membership at once (DELETE ?force=true), so
	// that its co-owners serve its partitions and copy them again while the StatefulSet
	// makes the member anew on another prepared node. That is the only failover the
	// operator performs: a member's pod restarting on its own node keeps its data and its
	// place, and VeltrixDB has no leader for the operator to move (mode replicated writes
	// to every owner; mode raft elects its partition leaders by itself). Unset until the
	// first.
	// +optional
	LastFailoverTime *metav1.Time `json:"lastFailoverTime,omitempty"`

	// MemberRemoval is the member removal under way: the member and when the operator sent
	// its DELETE (or first saw it leaving). RemovalStuck is measured from startedAt, so the
	// limit holds across operator restarts. Unset when no member is leaving.
	// +optional
	MemberRemoval *MemberRemoval `json:"memberRemoval,omitempty"`

	// LostNodes are the nodes found lost (deleted, or NotReady past
	// spec.lostNodes.gracePeriod) while they held a member's volumes, with the member and
	// the disks (by filesystem UUID) its volumes were on. A node stays listed after its
	// member was replaced, so that its disks are recognised if it comes back: they are
	// reported, never made into volumes again, until the annotation
	// veltrix.io/reoffer-node=<node> offers them again.
	// +listType=map
	// +listMapKey=node
	// +kubebuilder:validation:MaxItems=256
	// +optional
	LostNodes []LostNode `json:"lostNodes,omitempty"`

	// Members are the members in the server's membership.
	// +listType=map
	// +listMapKey=id
	// +optional
	Members []MemberStatus `json:"members,omitempty"`

	// Nodes are the Kubernetes nodes whose disks the cluster uses.
	// +listType=set
	// +optional
	Nodes []string `json:"nodes,omitempty"`

	// Conditions describe the current state.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}
