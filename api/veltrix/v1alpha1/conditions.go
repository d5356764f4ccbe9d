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
