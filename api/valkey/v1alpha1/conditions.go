package v1alpha1

// ClusterState is the one-word summary in status.state.
// +kubebuilder:validation:Enum=Initializing;Reconciling;Ready;Degraded;Failed
type ClusterState string

// The summary states, derived from the conditions in this priority: Degraded=True,
// Ready=True, Progressing=True, otherwise Failed. Initializing is the CRD default, seen
// only before the operator's first status write.
const (
	StateInitializing ClusterState = "Initializing"
	StateReconciling  ClusterState = "Reconciling"
	StateReady        ClusterState = "Ready"
	StateDegraded     ClusterState = "Degraded"
	StateFailed       ClusterState = "Failed"
)

// ValkeyCluster condition types.
const (
	// ConditionReady: every shard has its primary and replicas, all slots are served.
	ConditionReady = "Ready"
	// ConditionProgressing: the operator is creating, scaling or updating the cluster.
	ConditionProgressing = "Progressing"
	// ConditionDegraded (negative polarity): impaired but may still serve traffic.
	ConditionDegraded = "Degraded"
	// ConditionClusterFormed: every node has joined in the desired shard/replica layout.
	ConditionClusterFormed = "ClusterFormed"
	// ConditionSlotsAssigned: all 16384 slots are owned by primaries.
	ConditionSlotsAssigned = "SlotsAssigned"
	// ConditionConfigurationWarning (negative polarity): a risky spec value was accepted
	// and applied.
	ConditionConfigurationWarning = "ConfigurationWarning"
	// ConditionMetricsMonitored: the members' exporters are scraped through the cluster's
	// ServiceMonitor. Present only while the exporter runs and the ServiceMonitor is
	// wanted; it never makes the cluster not Ready.
	ConditionMetricsMonitored = "MetricsMonitored"
	// ConditionMemberLost (negative polarity): a member's claim is on a lost Kubernetes
	// node (spec.lostNodes). Present once a member was first found so; False again once
	// none is. Our addition.
	ConditionMemberLost = "MemberLost"
)

// MemberLost reasons. While MemberLost is True the cluster is also Degraded with the same
// reason and message, and each transition into one is a Warning event of that reason.
const (
	// ReasonNodeNotReady (True): the node of a member's claim is NotReady, not yet for
	// spec.lostNodes.gracePeriod.
	ReasonNodeNotReady = "NodeNotReady"
	// ReasonReplacementManual (True): lost, and spec.lostNodes.replace is Manual.
	ReasonReplacementManual = "ReplacementManual"
	// ReasonReplacementRefused (True): lost, but replacing it now could lose data (it
	// still owns slots, no other member of its shard serves, or its server answers).
	ReasonReplacementRefused = "ReplacementRefused"
	// ReasonReplacing (True): the lost member's claim was deleted; a new one binds on
	// another node and the member rejoins as a replica.
	ReasonReplacing = "Replacing"
	// ReasonNoMemberLost (False): no member's claim is on a lost node.
	ReasonNoMemberLost = "NoMemberLost"
)

// MetricsMonitored reasons.
const (
	// ReasonServiceMonitorApplied (True): the metrics Service and ServiceMonitor are written.
	ReasonServiceMonitorApplied = "ServiceMonitorApplied"
	// ReasonServiceMonitorCRDMissing (False): the monitoring.coreos.com ServiceMonitor CRD
	// is not installed; the operator looks again every few minutes and writes the
	// ServiceMonitor once it is. Also a Normal event on the transition (the cluster serves: a
	// missing CRD is how the environment is, not a fault of the cluster).
	ReasonServiceMonitorCRDMissing = "ServiceMonitorCRDMissing"
	// ReasonServiceMonitorError (False): writing the metrics Service or the ServiceMonitor
	// failed (the operator's log has the cause), or one of that name is not the cluster's.
	ReasonServiceMonitorError = "ServiceMonitorError"
)

// ValkeyCluster condition reasons. A reason that is also an event reason is emitted with
// the same string.
const (
	// Ready=False: infrastructure the cluster needs could not be written or read.
	ReasonServiceError             = "ServiceError"
	ReasonConfigMapError           = "ConfigMapError"
	ReasonUsersACLError            = "UsersACLError"
	ReasonSystemUsersACLError      = "SystemUsersACLError"
	ReasonValkeyNodeError          = "ValkeyNodeError"
	ReasonValkeyNodeListError      = "ValkeyNodeListError"
	ReasonPodDisruptionBudgetError = "PodDisruptionBudgetError"

	// Ready=False or Progressing=True: work under way.
	ReasonReconciling   = "Reconciling"
	ReasonUpdatingNodes = "UpdatingNodes"
	// ReasonRollBlocked (Progressing=True, Ready=False): the rolling update stopped before
	// a primary no replica can take over from; spec.rollout.allowPrimaryWithoutReplica or
	// spec.replicas lets it go on.
	ReasonRollBlocked = "RollBlocked"

	// Ready=False and ClusterFormed=False: members still missing.
	ReasonMissingShards   = "MissingShards"
	ReasonMissingReplicas = "MissingReplicas"

	// Ready=False and Degraded=True: the scheduler cannot place a pod.
	ReasonPodUnschedulable = "PodUnschedulable"
	// ReasonMembersUnreachable (Ready=False, Degraded=True): members whose pods are ready
	// do not answer the operator (a partition between the operator and the data plane).
	// The operator cannot observe them, so it changes nothing about them until they answer
	// or the other members see them fail.
	ReasonMembersUnreachable = "MembersUnreachable"
	// Degraded=True also takes a member's NodeReasonWorkloadRefused or
	// NodeReasonPersistentVolumeClaimRefused: the API server refuses its workload or claim.

	// Ready=True.
	ReasonClusterHealthy = "ClusterHealthy"

	// Progressing.
	ReasonInitializing      = "Initializing"
	ReasonAddingNodes       = "AddingNodes"
	ReasonRebalancingSlots  = "RebalancingSlots"
	ReasonReconcileComplete = "ReconcileComplete"

	// Degraded=True.
	ReasonNodeAddFailed   = "NodeAddFailed"
	ReasonRebalanceFailed = "RebalanceFailed"

	// ClusterFormed=True. The document's reason table calls it "ClusterFormed", its
	// examples (and upstream) set TopologyComplete; we set the latter.
	ReasonTopologyComplete = "TopologyComplete"

	// SlotsAssigned.
	ReasonAllSlotsAssigned = "AllSlotsAssigned"
	ReasonSlotsUnassigned  = "SlotsUnassigned"

	// ConfigurationWarning=True: terminationGracePeriodSeconds is below
	// cluster-manual-failover-timeout plus a buffer.
	ReasonGracePeriodTooShort = "GracePeriodTooShort"
	// ConfigurationWarning=True: fewer than 3 shards, so losing a primary loses the
	// majority that elects its replica (our addition; the document lists only the one above).
	ReasonTooFewShards = "TooFewShards"
	// ConfigurationWarning=True: no replicas and no persistence, so a restarted pod loses
	// its shard's keys (our addition).
	ReasonNoRedundancy = "NoRedundancy"
)

// ValkeyNode condition types.
const (
	// NodeConditionReady: the pod runs, is ready, and its workload is rolled out.
	NodeConditionReady = "Ready"
	// NodeConditionPersistentVolumeClaimReady: the node's PVC exists and is Bound.
	NodeConditionPersistentVolumeClaimReady = "PersistentVolumeClaimReady"
	// NodeConditionPersistentVolumeClaimSizeReady: the PVC's capacity reaches
	// spec.persistence.size.
	NodeConditionPersistentVolumeClaimSizeReady = "PersistentVolumeClaimSizeReady"
	// NodeConditionLiveConfigApplied: the live-settable keys of the config were applied
	// with CONFIG SET. Absent when there are none, which counts as True. False blocks the
	// cluster's one-at-a-time progress past this node.
	NodeConditionLiveConfigApplied = "LiveConfigApplied"
	// NodeConditionExternalAddressAnnounced: with spec.external, the node's own Service
	// has an address and the server announces it (cluster-announce-hostname, and
	// cluster-preferred-endpoint-type hostname once the node knows every member's).
	// Absent without spec.external. Our addition.
	NodeConditionExternalAddressAnnounced = "ExternalAddressAnnounced"
)

// ValkeyNode condition reasons.
const (
	NodeReasonPodRunning  = "PodRunning"
	NodeReasonPodNotReady = "PodNotReady"

	NodeReasonPersistentVolumeClaimPending = "PersistentVolumeClaimPending"
	NodeReasonPersistentVolumeClaimBound   = "PersistentVolumeClaimBound"

	NodeReasonPersistentVolumeClaimSizeSatisfied    = "PersistentVolumeClaimSizeSatisfied"
	NodeReasonPersistentVolumeClaimResizePending    = "PersistentVolumeClaimResizePending"
	NodeReasonPersistentVolumeClaimResizeInProgress = "PersistentVolumeClaimResizeInProgress"
	NodeReasonPersistentVolumeClaimResizeInfeasible = "PersistentVolumeClaimResizeInfeasible"

	NodeReasonApplied     = "Applied"
	NodeReasonApplyFailed = "ApplyFailed"

	// Ready=False: the API server refused to write the node's StatefulSet or Deployment
	// (an invalid pod template, an admission webhook, a quota); the message is the API
	// server's. Also the reason of the Warning event. Our addition.
	NodeReasonWorkloadRefused = "WorkloadRefused"
	// PersistentVolumeClaimReady=False and Ready=False: the API server refused to create
	// the node's claim. Also the reason of the Warning event. Our addition.
	NodeReasonPersistentVolumeClaimRefused = "PersistentVolumeClaimRefused"

	// ExternalAddressAnnounced reasons.
	NodeReasonAnnounced = "Announced"
	// The node's Service has no address yet (the load balancer has not given one, or
	// the pod's Kubernetes node has none).
	NodeReasonAddressPending = "AddressPending"
	// The node announces its address, but has yet to learn every member's, so it still
	// sends clients to IPs.
	NodeReasonPeersPending = "PeersPending"
	// The server cannot announce what the mode needs (NodePort without
	// cluster-announce-client-port); the message says what to change.
	NodeReasonAnnounceUnsupported = "AnnounceUnsupported"
	// CONFIG SET of the announced address failed.
	NodeReasonAnnounceFailed = "AnnounceFailed"
)
