package v1alpha1

// Event reasons the operator emits, on transitions only. Warning events are marked; the
// rest are Normal.
const (
	// Infrastructure.
	EventServiceCreated             = "ServiceCreated"
	EventServiceUpdateFailed        = "ServiceUpdateFailed" // Warning
	EventConfigMapCreated           = "ConfigMapCreated"
	EventConfigMapUpdateFailed      = "ConfigMapUpdateFailed" // Warning
	EventValkeyNodeCreated          = "ValkeyNodeCreated"
	EventValkeyNodeUpdated          = "ValkeyNodeUpdated"
	EventValkeyNodeFailed           = "ValkeyNodeFailed" // Warning
	EventPodDisruptionBudgetCreated = "PodDisruptionBudgetCreated"
	EventPodDisruptionBudgetUpdated = "PodDisruptionBudgetUpdated"
	EventPodDisruptionBudgetDeleted = "PodDisruptionBudgetDeleted"
	// EventServiceMonitorCRDMissing: the exporter runs but no ServiceMonitor can be
	// written (MetricsMonitored=False, same reason).
	EventServiceMonitorCRDMissing = "ServiceMonitorCRDMissing" // Normal: the cluster serves; a missing CRD is the environment, not a fault

	// Topology.
	EventClusterMeetBatch      = "ClusterMeetBatch"
	EventClusterMeetFailed     = "ClusterMeetFailed" // Warning
	EventPrimariesCreated      = "PrimariesCreated"
	EventPrimaryCreated        = "PrimaryCreated"
	EventSlotAssignmentFailed  = "SlotAssignmentFailed" // Warning
	EventReplicasAttached      = "ReplicasAttached"
	EventReplicaCreated        = "ReplicaCreated"
	EventReplicaCreationFailed = "ReplicaCreationFailed" // Warning

	// Scale-out rebalancing.
	EventSlotsRebalancing      = "SlotsRebalancing"
	EventSlotsRebalancePending = "SlotsRebalancePending"
	EventSlotRebalanceFailed   = "SlotRebalanceFailed" // Warning

	// Scale-in.
	EventSlotsDraining     = "SlotsDraining"
	EventValkeyNodeDeleted = "ValkeyNodeDeleted"
	EventDrainFailed       = "DrainFailed" // Warning

	// Proactive failover.
	EventFailoverInitiated = "FailoverInitiated"
	EventFailoverFailed    = "FailoverFailed"  // Warning
	EventFailoverTimeout   = "FailoverTimeout" // Warning
	EventFailoverCompleted = "FailoverCompleted"
	// EventRollBlocked: a rolling update stopped before a primary without a replica.
	EventRollBlocked = "RollBlocked" // Warning
	// EventPrimaryReplacedAlone: a primary without a replica replaced as the user allowed.
	EventPrimaryReplacedAlone = "PrimaryReplacedAlone" // Warning

	// Recovery and maintenance.
	EventReplicasTakenOver  = "ReplicasTakenOver"
	EventConfigEpochBumped  = "ConfigEpochBumped"
	EventStaleNodeForgotten = "StaleNodeForgotten"
	EventNodeForgetFailed   = "NodeForgetFailed" // Warning
	EventWaitingForShards   = "WaitingForShards"
	EventWaitingForReplicas = "WaitingForReplicas"
	// EventMembersUnreachable: members whose pods are ready do not answer the operator.
	EventMembersUnreachable    = "MembersUnreachable" // Warning
	EventClusterReady          = "ClusterReady"
	EventLiveConfigApplyFailed = "LiveConfigApplyFailed" // Warning

	// Users.
	EventInternalSecretsCreated        = "InternalSecretsCreated"
	EventInternalSecretsUpdated        = "InternalSecretsUpdated"
	EventInternalSecretsCreationFailed = "InternalSecretsCreationFailed" // Warning
	EventInternalSecretsUpdateFailed   = "InternalSecretsUpdateFailed"   // Warning
)
