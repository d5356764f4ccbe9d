package v1

// Lifecycle phases of a ValdOperatorRelease, in order. Each is a condition type; a phase's
// condition is added when the phase is reached and never removed.
const (
	// ConditionWaitingClusterCreate is True when every cluster of every active
	// infrastructure entry has an id and a name.
	ConditionWaitingClusterCreate = "WaitingClusterCreate"
	// ConditionWaitingCreateVrs is True when every ValdRelease the release needs exists with
	// the current generation, and those it no longer needs are gone.
	ConditionWaitingCreateVrs = "WaitingCreateVrs"
	// ConditionCompleted is True when every earlier phase is True. `kubectl wait
	// --for=condition=Completed` waits for a converged release.
	ConditionCompleted = "Completed"
)

// ConditionNodePoolMatchLost is not a phase: it is True while ValdReleases of entries whose
// node-pool match was lost are kept as last rendered (for the operator's
// NODEPOOL_LOSS_GRACE), and absent otherwise. Its lastTransitionTime is when the grace began.
const ConditionNodePoolMatchLost = "NodePoolMatchLost"

// ReasonHeld means ValdReleases are kept as last rendered although no longer built.
const ReasonHeld = "Held"

// ConditionSwitchover is not a phase: it appears when `active` moves from one
// infrastructure entry to another (blue/green). Unknown with reason Switching while the
// ValdReleases of the entries no longer active are kept, because those of the active
// entries are not all deployed yet; True with reason Switched once they are and the old
// ones were pruned. Each transition is an event.
const ConditionSwitchover = "Switchover"

// Reasons of the Switchover condition.
const (
	// ReasonSwitching: the old entries' ValdReleases are kept until the new ones are deployed.
	ReasonSwitching = "Switching"
	// ReasonSwitched: the new entries' ValdReleases are deployed and the old ones pruned.
	ReasonSwitched = "Switched"
)

// Reasons of lifecycle conditions. Status Unknown carries Progressing, Pending or Blocked;
// True carries Succeeded; False carries Failed.
const (
	// ReasonProgressing: the controller is doing the phase's work.
	ReasonProgressing = "Progressing"
	// ReasonPending: the phase waits for something outside the controller, such as an
	// external system setting a cluster id.
	ReasonPending = "Pending"
	// ReasonSucceeded: the phase is done.
	ReasonSucceeded = "Succeeded"
	// ReasonFailed: the phase cannot succeed until the spec (or the cluster) changes.
	ReasonFailed = "Failed"
	// ReasonBlocked: a phase reached earlier is True no longer, so this one waits for it.
	ReasonBlocked = "Blocked"
)

// Labels and annotations the controller puts on the ValdReleases it generates.
const (
	// LabelManagedGeneration holds the generation of the ValdOperatorRelease the
	// ValdRelease was last written from.
	LabelManagedGeneration = "managed-generation"
	// LabelOperatorRelease names the ValdOperatorRelease that owns the ValdRelease.
	LabelOperatorRelease = "vald.vdaas.org/operator-release"
	// LabelRole is the role of the infrastructure entry the ValdRelease is for.
	LabelRole = "vald.vdaas.org/role"
	// LabelCluster is the name of the cluster the ValdRelease is for.
	LabelCluster = "vald.vdaas.org/cluster"
	// LabelVectorEngine is spec.vectorEngine.name.
	LabelVectorEngine = "vald.vdaas.org/vector-engine"
	// AnnotationClusterID is the id of the cluster the ValdRelease is for (ids need not be
	// valid label values).
	AnnotationClusterID = "vald.vdaas.org/cluster-id"
)
