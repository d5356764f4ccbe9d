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
	// ConditionMetricsMonitored is True when the ServiceMonitor scraping the members was
	// written, False when its CRD is not installed or writing it failed (best-effort: the
	// cluster runs without it). The same type and reasons as a ValkeyCluster's.
	ConditionMetricsMonitored = "MetricsMonitored"
	// ConditionServiceMonitor is the type MetricsMonitored replaced; the operator removes it
	// from a status an older operator wrote.
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
	ReasonNodesExcluded = "NodesExcluded"
	ReasonSettled       = "Settled"
	// ReasonServiceMonitorApplied, ReasonServiceMonitorCRDMissing and
	// ReasonServiceMonitorError are MetricsMonitored's reasons.
	ReasonServiceMonitorApplied    = "ServiceMonitorApplied"
	ReasonServiceMonitorCRDMissing = "ServiceMonitorCRDMissing"
	ReasonServiceMonitorError      = "ServiceMonitorError"
	ReasonAgentsMissing            = "NodeAgentsNotConfigured"
	ReasonAdminTokenMissing        = "AdminTokenMissing"
	// ReasonVersionUnsupported (on Ready): spec.version reads as a version older than
	// MinVersion (a cluster stored before the CRD refused such versions); the operator
	// leaves the StatefulSet as it is.
	ReasonVersionUnsupported = "VersionUnsupported"
	// ReasonVolumeDeviceMoved: a raw VLog partition now has another kernel name than its
	// Block PersistentVolume points at (a PV's path cannot change).
	ReasonVolumeDeviceMoved = "VolumeDeviceMoved"
	// ReasonMembersUnreachable (Ready=False, MembershipSettled=Unknown): members whose
	// pods are Ready and search-ready do not answer the operator's admin requests (a
	// partition between the operator and the data plane); the message names each with
	// the cause. The operator removes, adds back and marks lost nothing on that account,
	// and changes no membership until they answer.
	ReasonMembersUnreachable = "MembersUnreachable"
)

// Lost nodes: the condition, its reasons, the annotations that act by hand and the
// replacement states of status.lostNodes.
const (
	// ConditionMemberLost (negative polarity) is True while a member's node is lost (or
	// NotReady within the grace period) and the member is not replaced yet.
	ConditionMemberLost = "MemberLost"
	// ConditionDisksReturned (negative polarity) is True while a lost node is back with
	// prepared disks the cluster does not use.
	ConditionDisksReturned = "DisksReturned"

	ReasonNoMemberLost = "NoMemberLost"
	// ReasonNodeNotReady: a member's node is NotReady, within spec.lostNodes.gracePeriod.
	ReasonNodeNotReady = "NodeNotReady"
	// ReasonReplacementManual: a member is lost and spec.lostNodes.replace is Manual.
	ReasonReplacementManual = "ReplacementManual"
	// ReasonReplacementRefused: replacing the lost member now could lose data.
	ReasonReplacementRefused = "ReplacementRefused"
	// ReasonReplacing: the lost member is being replaced on another node.
	ReasonReplacing = "Replacing"
	// ReasonReplaced: every lost member was replaced.
	ReasonReplaced = "Replaced"
	// ReasonNoDisksReturned: no lost node came back with disks.
	ReasonNoDisksReturned = "NoDisksReturned"
	// ReasonDisksReturned: a lost node came back with prepared disks that are not used.
	ReasonDisksReturned = "DisksReturned"

	// AnnotationReplaceMember on a VeltrixCluster names a lost member (its pod) to replace
	// now, with spec.lostNodes.replace Manual. The operator removes it once acted on.
	AnnotationReplaceMember = "veltrix.io/replace-member"
	// AnnotationReofferNode on a VeltrixCluster names a lost node whose disks may be used
	// again: the node leaves status.lostNodes. The operator removes it once acted on.
	AnnotationReofferNode = "veltrix.io/reoffer-node"

	// LostNodeDeleted and LostNodeNotReady are status.lostNodes[].reason.
	LostNodeDeleted  = "Deleted"
	LostNodeNotReady = "NotReady"
	// ReplacementReplacing and ReplacementReplaced are status.lostNodes[].replacement.
	ReplacementReplacing = "Replacing"
	ReplacementReplaced  = "Replaced"
)
