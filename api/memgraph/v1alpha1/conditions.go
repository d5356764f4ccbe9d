package v1alpha1

// Condition types of a MemgraphCluster.
const (
	// ConditionReady says the cluster serves as declared (one MAIN, a leader, all registered).
	ConditionReady = "Ready"
	// ConditionConverged says registration matches the spec and both StatefulSets run the
	// declared counts, so a scale is finished.
	ConditionConverged = "Converged"
	// ConditionUpdated says every pod runs the declared template.
	ConditionUpdated = "Updated"
)

// Condition reasons named by the product document; stable, since users wait on them.
const (
	ReasonConverged                    = "Converged"
	ReasonRetirementInProgress         = "RetirementInProgress"
	ReasonLeadershipTransferInProgress = "LeadershipTransferInProgress"
	ReasonWorkloadsNotReady            = "WorkloadsNotReady"
	ReasonNoCoordinatorLeader          = "NoCoordinatorLeader"
	ReasonCoordinatorUnreachable       = "CoordinatorUnreachable"
)
