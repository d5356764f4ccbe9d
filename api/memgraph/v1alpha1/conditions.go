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
	// ConditionNodesPrepared says every node running a pod of the cluster has
	// vm.max_map_count at Memgraph's minimum (262144), as the node agent reports it.
	ConditionNodesPrepared = "NodesPrepared"
	// ConditionMetricsMonitored says the ServiceMonitor scraping every member's metrics
	// port was written (True), or why not (False); absent with spec.serviceMonitor.enabled
	// false. Never a reason for Ready: the cluster serves without it. The same type and
	// reasons as a ValkeyCluster's and a VeltrixCluster's.
	ConditionMetricsMonitored = "MetricsMonitored"
	// ConditionMemberLost (negative polarity) is True while a member's volumes are on a
	// lost node (or one NotReady within spec.lostNodes.gracePeriod) and the member does
	// not serve again elsewhere. Absent until a member was first found so. While True
	// the cluster is Degraded with its reason.
	ConditionMemberLost = "MemberLost"
)

// MemberLost reasons, the same as a VeltrixCluster's and a ValkeyCluster's.
const (
	// ReasonNodeNotReady (True): a member's node is NotReady, within the grace period.
	ReasonNodeNotReady = "NodeNotReady"
	// ReasonReplacementManual (True): lost, and spec.lostNodes.replace is Manual.
	ReasonReplacementManual = "ReplacementManual"
	// ReasonReplacementRefused (True): lost, but replacing it now could lose data or the
	// coordinators' quorum; the message says why and what would change it.
	ReasonReplacementRefused = "ReplacementRefused"
	// ReasonReplacing (True): the member is being replaced (or waits for the coordinators'
	// failover before it is).
	ReasonReplacing = "Replacing"
	// ReasonReplaced (False): every lost member serves again on another node.
	ReasonReplaced = "Replaced"
	// ReasonNoMemberLost (False): no member is on a lost node any more.
	ReasonNoMemberLost = "NoMemberLost"

	// AnnotationReplaceMember on a MemgraphCluster names a lost member (its pod) to replace
	// with spec.lostNodes.replace Manual (or one whose node is NotReady within the grace
	// period). The operator removes it once acted on, or when it names no lost member.
	AnnotationReplaceMember = "memgraph.com/replace-member"

	// LostNodeDeleted and LostNodeNotReady are status.lostNodes[].reason.
	LostNodeDeleted  = "Deleted"
	LostNodeNotReady = "NotReady"
	// ReplacementReplacing and ReplacementReplaced are status.lostNodes[].replacement.
	ReplacementReplacing = "Replacing"
	ReplacementReplaced  = "Replaced"
)

// MetricsMonitored reasons.
const (
	ReasonServiceMonitorApplied    = "ServiceMonitorApplied"
	ReasonServiceMonitorCRDMissing = "ServiceMonitorCRDMissing"
	ReasonServiceMonitorError      = "ServiceMonitorError"
)

// RoleAssignedGate is the readiness gate of data-instance pods: the operator sets it True
// once the Raft leader's SHOW INSTANCES shows the instance up as MAIN or replica, that is
// once the coordinators have given it its role, and False while it is unregistered, down
// or of unknown role. Until then the pod is not Ready: a rolling update waits for it and
// it counts as unavailable.
const RoleAssignedGate = "memgraph.com/role-assigned"

// EventReasonFailover is the Warning event of a failover: the coordinators promoted
// another data instance to MAIN without the operator asking (status.lastFailoverTime).
const EventReasonFailover = "Failover"

// Condition reasons named by the product document; stable, since users wait on them.
const (
	ReasonConverged                    = "Converged"
	ReasonRetirementInProgress         = "RetirementInProgress"
	ReasonLeadershipTransferInProgress = "LeadershipTransferInProgress"
	ReasonWorkloadsNotReady            = "WorkloadsNotReady"
	ReasonNoCoordinatorLeader          = "NoCoordinatorLeader"
	ReasonCoordinatorUnreachable       = "CoordinatorUnreachable"
)

// Further reasons of this operator.
const (
	// ReasonReady: Ready is True.
	ReasonReady = "Ready"
	// ReasonNoMain: a leader answers, but no data instance holds MAIN.
	ReasonNoMain = "NoMain"
	// ReasonTLSSecretUnavailable: spec.tls.bolt names a Secret that is missing, lacks
	// tls.crt, tls.key or ca.crt, or holds a certificate that ca.crt does not verify.
	ReasonTLSSecretUnavailable = "TLSSecretUnavailable"
	// ReasonTLSVerificationFailed: the coordinators' Bolt TLS could not be verified with
	// ca.crt (another CA, a certificate not naming the pods, or no TLS served).
	ReasonTLSVerificationFailed = "TLSVerificationFailed"
	// ReasonRegistrationFailed: a registration command failed; the next pass observes again.
	ReasonRegistrationFailed = "RegistrationFailed"
	// ReasonRegistrationInProgress: registrations were issued this pass (bootstrap or a
	// lost registration restored).
	ReasonRegistrationInProgress = "RegistrationInProgress"
	// ReasonMembersDown: declared members are registered but down in the leader's view
	// (no health check answered): Converged waits for them, while Ready holds as long as a
	// leader and a MAIN serve.
	ReasonMembersDown = "MembersDown"
	// ReasonMembersUnreachable: declared members do not answer the operator while the
	// leader shows them up, or no leader is reachable to say (a partition between the
	// operator and the data plane): Ready is False (state Degraded) and names them with
	// the cause, Converged is Unknown; the operator changes nothing in the cluster until
	// they answer or the coordinators mark them down.
	ReasonMembersUnreachable = "MembersUnreachable"
	// ReasonUpdated: every pod runs the StatefulSets' current template.
	ReasonUpdated = "Updated"
	// ReasonUpdatePending: some pods run an older template (updates are OnDelete).
	ReasonUpdatePending = "UpdatePending"
	// ReasonNodesPrepared: vm.max_map_count is high enough on every node of the cluster.
	ReasonNodesPrepared = "NodesPrepared"
	// ReasonMaxMapCountTooLow: some node's vm.max_map_count is below 262144.
	ReasonMaxMapCountTooLow = "MaxMapCountTooLow"
	// ReasonNodeAgentUnavailable: the node agent could not be asked on some node.
	ReasonNodeAgentUnavailable = "NodeAgentUnavailable"
)

// ConditionRestored is a cluster with spec.bootstrap: True once the first data instance
// started from the backup's snapshot, False with the reason it has not (yet). A cluster
// without spec.bootstrap has no such condition.
const ConditionRestored = "Restored"

// Reasons of the Restored condition.
const (
	// ReasonRestored: the snapshot was verified and the first data instance loaded it.
	ReasonRestored = "Restored"
	// ReasonRestoreInProgress: the snapshot was verified; the pods download and load it.
	ReasonRestoreInProgress = "RestoreInProgress"
	// ReasonBackupNotFound: spec.bootstrap.backup names no MemgraphBackup here.
	ReasonBackupNotFound = "BackupNotFound"
	// ReasonBackupNotCompleted: the MemgraphBackup is not Completed (a partial backup is
	// never restored).
	ReasonBackupNotCompleted = "BackupNotCompleted"
	// ReasonBackupUnreadable: the manifest or a file could not be read from the store.
	ReasonBackupUnreadable = "BackupUnreadable"
	// ReasonRestoreFailed: the restore init container of the first data instance failed
	// (a volume that already holds data, a file that changed since it was verified, the
	// store unreachable); its termination message says which.
	ReasonRestoreFailed = "RestoreFailed"
	// ReasonBackupCorrupted: a stored file is missing or does not match its manifest
	// entry (size, SHA-256, or the epoch and commit timestamps it records); no pod is
	// created, nothing is written, the backup stays as it is.
	ReasonBackupCorrupted = "BackupCorrupted"
	// ReasonManifestInvalid: the backup's manifest is not one the operator restores (an
	// unknown format, or files, timestamps and epoch that do not agree, such as WAL files
	// with a gap after the snapshot); no pod is created.
	ReasonManifestInvalid = "ManifestInvalid"
)
