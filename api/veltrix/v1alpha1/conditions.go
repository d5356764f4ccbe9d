package v1alpha1

// Names other parts of the operator and the tests rely on.
const (
	// ConditionReady is True when every member is Ready and search-ready.
	ConditionReady = "Ready"
	// ConditionReplicationFactorMet is True when at least replicationFactor members are ready.
	ConditionReplicationFactorMet = "ReplicationFactorMet"

	// Finalizer holds a cluster until every pod was checkpointed (and, with reclaim
	// policy Delete, its disks released).
	Finalizer = "veltrix.io/finalizer"
	// SearchReadyGate is the pod readiness gate the operator sets once INFO reports
	// search_ready=1.
	SearchReadyGate = "veltrix.io/search-ready"
)

// More condition types the operator reports.
const (
	// ConditionDisksPrepared is True when the node agents prepared disks on enough nodes for
	// the cluster's members.
	ConditionDisksPrepared = "DisksPrepared"
	// ConditionMaxMapCountLow (negative polarity) is True when vm.max_map_count is below
	// 262144 on nodes whose agent may not raise it.
	ConditionMaxMapCountLow = "MaxMapCountLow"
	// ConditionMembershipSettled is True when the server's membership matches the spec's
	// size; Unknown while members join or leave, False when a removal is refused or stuck.
	ConditionMembershipSettled = "MembershipSettled"
	// ConditionServiceMonitor is True when the ServiceMonitor was written, False when its
	// CRD is not installed (best-effort: the cluster runs without it).
	ConditionServiceMonitor = "ServiceMonitor"
)

// Condition reasons.
const (
	ReasonReady                  = "Ready"
	ReasonProvisioning           = "Provisioning"
	ReasonMembersNotReady        = "MembersNotReady"
	ReasonUpgrading              = "Upgrading"
	ReasonChildrenFailed         = "ChildrenFailed"
	ReasonDisksNotPrepared       = "DisksNotPrepared"
	ReasonReplicationFactorMet   = "ReplicationFactorMet"
	ReasonBelowReplicationFactor = "BelowReplicationFactor"
	ReasonPrepared               = "Prepared"
	ReasonNotEnoughNodes         = "NotEnoughNodes"
	ReasonMaxMapCountMet         = "MaxMapCountMet"
	// ReasonIndexMapFallback: the low nodes run with VELTRIXDB_INDEX=map (spec.indexMapFallback).
	ReasonIndexMapFallback = "IndexMapFallback"
	// ReasonNodesExcluded: the low nodes are not used (spec.indexMapFallback is off).
	ReasonNodesExcluded     = "NodesExcluded"
	ReasonSettled           = "Settled"
	ReasonApplied           = "Applied"
	ReasonCRDMissing        = "CRDMissing"
	ReasonAgentsMissing     = "NodeAgentsNotConfigured"
	ReasonAdminTokenMissing = "AdminTokenMissing"
	// ReasonVersionUnsupported (on Ready): spec.version reads as a version older than
	// MinVersion (a cluster stored before the CRD refused such versions); the operator
	// leaves the StatefulSet as it is.
	ReasonVersionUnsupported = "VersionUnsupported"
	// ReasonVolumeDeviceMoved: a raw VLog partition now has another kernel name than its
	// Block PersistentVolume points at (a PV's path cannot change).
	ReasonVolumeDeviceMoved = "VolumeDeviceMoved"
)
