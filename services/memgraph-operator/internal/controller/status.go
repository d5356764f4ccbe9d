package controller

import (
	"fmt"
	"strings"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/services/memgraph-operator/internal/resources"
	"github.com/opsuite/suite/shared/conditions"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Stable condition messages (no volatile values, so a steady cluster writes nothing).
const (
	msgConverged      = "Registration matches the spec and both StatefulSets run the declared counts"
	msgRetiring       = "Members above the declared counts are leaving the cluster before their pods are removed"
	msgRegistration   = "A registration command failed; the next pass observes the cluster again (the operator's log has the cause)"
	msgReady          = "A MAIN serves and the coordinators have a leader (status.main, status.leader)"
	msgNoLeader       = "No coordinator names a Raft leader: the coordinators have lost their quorum"
	msgNoMain         = "The coordinators' leader answers, but no data instance holds MAIN"
	msgNoRegistrar    = "The operator runs without a data-plane client; registration is off"
	msgUpdated        = "Every pod runs its StatefulSet's current template"
	msgNodesPrepared  = "vm.max_map_count is at least 262144 on every node running a pod of the cluster"
	reasonNoRegistrar = "RegistrationDisabled"
)

// writeStatus turns what the pass found into the status fields and conditions.
func (p *pass) writeStatus() {
	c := p.c
	st := &c.Status
	gen := c.Generation
	set := func(t string, s metav1.ConditionStatus, reason, msg string) {
		conditions.Set(&st.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg}, gen)
	}
	if sts := p.sts[resources.RoleCoordinator]; sts != nil {
		st.ReadyCoordinators = sts.Status.ReadyReplicas
	}
	if sts := p.sts[resources.RoleData]; sts != nil {
		st.ReadyDataInstances = sts.Status.ReadyReplicas
	}
	// The membership as the coordinators' leader reported it. While no leader answers
	// (the coordinators cut off, or an election under way) status.leader says so, empty,
	// and the rest keeps what a leader last reported, the conditions saying why it is not
	// current: the data instances keep their roles without a leader, kubectl still shows
	// the MAIN the clients were sent to, and an operator that restarted meanwhile tells
	// the coordinators' failover from its own switchover (noteMain).
	if seen := p.reg; seen != nil || p.seen != nil {
		if seen == nil {
			seen = p.seen
		}
		st.Leader = seen.Leader
		if seen.Leader != "" {
			st.Main = seen.Main
			st.Coordinators, st.DataInstances = seen.Coordinators, seen.DataInstances
		}
	}
	workloads := strings.Join(p.notReady, ", ")

	switch {
	case p.restoreBlocked():
		set(memgraphv1.ConditionConverged, metav1.ConditionFalse, p.restore.reason, p.restore.msg)
		set(memgraphv1.ConditionReady, metav1.ConditionFalse, p.restore.reason, p.restore.msg)
	case len(p.sts) < len(roles):
		// The children could not be written; the error is returned and retried.
	case p.volumes.replacing:
		set(memgraphv1.ConditionConverged, metav1.ConditionFalse, ReasonVolumesResizing, msgVolumesResizing)
	case p.authErr != "":
		// The root cause before WorkloadsNotReady: pods referencing a missing Secret key
		// cannot start. Ready keeps what the last observation said (running pods serve on).
		set(memgraphv1.ConditionConverged, metav1.ConditionFalse, ReasonAuthSecretUnavailable, p.authErr)
		if conditions.Get(st.Conditions, memgraphv1.ConditionReady) == nil {
			set(memgraphv1.ConditionReady, metav1.ConditionUnknown, ReasonAuthSecretUnavailable, p.authErr)
		}
	case p.tlsErr != "":
		// Likewise: pods mounting a missing Secret cannot start.
		set(memgraphv1.ConditionConverged, metav1.ConditionFalse, memgraphv1.ReasonTLSSecretUnavailable, p.tlsErr)
		if conditions.Get(st.Conditions, memgraphv1.ConditionReady) == nil {
			set(memgraphv1.ConditionReady, metav1.ConditionUnknown, memgraphv1.ReasonTLSSecretUnavailable, p.tlsErr)
		}
	case len(p.notReady) > 0:
		set(memgraphv1.ConditionConverged, metav1.ConditionFalse, memgraphv1.ReasonWorkloadsNotReady, "Waiting for pods: "+workloads)
		set(memgraphv1.ConditionReady, metav1.ConditionFalse, memgraphv1.ReasonWorkloadsNotReady, "Waiting for pods: "+workloads)
	case p.ctl.cfg.Registrar == nil:
		set(memgraphv1.ConditionConverged, metav1.ConditionUnknown, reasonNoRegistrar, msgNoRegistrar)
		set(memgraphv1.ConditionReady, metav1.ConditionUnknown, reasonNoRegistrar, msgNoRegistrar)
	case p.regErr != nil:
		set(memgraphv1.ConditionConverged, metav1.ConditionFalse, memgraphv1.ReasonRegistrationFailed, msgRegistration)
		// Ready keeps what the last observation said: one failed command is no outage.
		if conditions.Get(st.Conditions, memgraphv1.ConditionReady) == nil {
			set(memgraphv1.ConditionReady, metav1.ConditionUnknown, memgraphv1.ReasonRegistrationFailed, msgRegistration)
		}
	default:
		setConverged(set, p.reg, p.retiring())
		setReady(set, p.reg)
	}
	p.setUpdated(set)
	p.setNodesPrepared(set)
	p.setCredentialsSynced(set)
	p.setVolumesResized(set)
	p.setRestored(set)
	p.setMetricsMonitored(set)
	p.setMemberLost(set)
	st.State, st.Reason = summarize(st.Conditions)
}

type setFunc func(t string, s metav1.ConditionStatus, reason, msg string)

// msgUnanswered is Ready's and Converged's message for members that do not answer the
// operator. The causes are memgraph.Cause's few stable words, so the message holds while
// the partition does.
func msgUnanswered(unanswered []string) string {
	return fmt.Sprintf("The operator cannot reach %d member(s) whose pods are ready: %s; it changes nothing in the cluster until they answer or the coordinators mark them down (failovers are the coordinators')",
		len(unanswered), strings.Join(unanswered, ", "))
}

// setConverged: converged when the registration reports so and no StatefulSet is left
// above its declared count.
func setConverged(set setFunc, reg *Registration, retiring bool) {
	switch {
	case len(reg.Unanswered) > 0:
		// Unknown, not False: the operator cannot tell, and Ready carries the Warning.
		set(memgraphv1.ConditionConverged, metav1.ConditionUnknown, memgraphv1.ReasonMembersUnreachable, msgUnanswered(reg.Unanswered))
	case !reg.Converged:
		reason, msg := reg.Reason, reg.Message
		if reason == "" {
			reason = memgraphv1.ReasonRegistrationInProgress
		}
		if msg == "" {
			msg = "Registering the declared members"
		}
		set(memgraphv1.ConditionConverged, metav1.ConditionFalse, reason, msg)
	case retiring:
		set(memgraphv1.ConditionConverged, metav1.ConditionFalse, memgraphv1.ReasonRetirementInProgress, msgRetiring)
	default:
		set(memgraphv1.ConditionConverged, metav1.ConditionTrue, memgraphv1.ReasonConverged, msgConverged)
	}
}

// setReady: ready with a leader and a MAIN, every member answering the operator; the
// registration's reason explains a missing leader. Members the operator cannot reach
// come first: with no leader found they are every coordinator that gave no answer, and
// their names say more than CoordinatorUnreachable.
func setReady(set setFunc, reg *Registration) {
	switch {
	case len(reg.Unanswered) > 0:
		set(memgraphv1.ConditionReady, metav1.ConditionFalse, memgraphv1.ReasonMembersUnreachable, msgUnanswered(reg.Unanswered))
	case reg.Reason == memgraphv1.ReasonCoordinatorUnreachable || reg.Reason == memgraphv1.ReasonNoCoordinatorLeader ||
		reg.Reason == memgraphv1.ReasonTLSVerificationFailed:
		msg := reg.Message
		if msg == "" {
			msg = msgNoLeader
		}
		set(memgraphv1.ConditionReady, metav1.ConditionFalse, reg.Reason, msg)
	case reg.Leader == "":
		set(memgraphv1.ConditionReady, metav1.ConditionFalse, memgraphv1.ReasonNoCoordinatorLeader, msgNoLeader)
	case reg.Main == "":
		set(memgraphv1.ConditionReady, metav1.ConditionFalse, memgraphv1.ReasonNoMain, msgNoMain)
	default:
		set(memgraphv1.ConditionReady, metav1.ConditionTrue, memgraphv1.ReasonReady, msgReady)
	}
}

// setUpdated: updates are OnDelete, so a pod runs an older template until it is deleted.
func (p *pass) setUpdated(set setFunc) {
	if len(p.sts) < len(roles) {
		return
	}
	var pending []string
	for _, r := range roles {
		s := p.sts[r]
		switch {
		case s.Status.ObservedGeneration == 0:
			// Never observed: a new StatefulSet, whose pods all start on its template.
		case s.Status.ObservedGeneration < s.Generation:
			pending = append(pending, fmt.Sprintf("the %s StatefulSet's new template is not observed yet", r))
		case s.Status.UpdatedReplicas < s.Status.Replicas:
			pending = append(pending, fmt.Sprintf("%d %s pods run an older template", s.Status.Replicas-s.Status.UpdatedReplicas, r))
		}
	}
	if len(pending) > 0 {
		msg := strings.Join(pending, "; ") +
			" (updates are OnDelete: the operator replaces one pod at a time on a converged cluster, replicas first, then the MAIN after a handover, the Raft leader last)"
		if p.rolled.waiting != "" {
			msg += ": " + p.rolled.waiting
		}
		set(memgraphv1.ConditionUpdated, metav1.ConditionFalse, memgraphv1.ReasonUpdatePending, msg)
		return
	}
	set(memgraphv1.ConditionUpdated, metav1.ConditionTrue, memgraphv1.ReasonUpdated, msgUpdated)
}

// setNodesPrepared names the nodes whose vm.max_map_count is too low or whose agent did
// not answer; without a node agent the condition is absent.
func (p *pass) setNodesPrepared(set setFunc) {
	n := p.nodes
	switch {
	case !n.checked:
		if p.ctl.cfg.Sysctls == nil {
			meta.RemoveStatusCondition(&p.c.Status.Conditions, memgraphv1.ConditionNodesPrepared)
		}
	case len(n.unmet) > 0:
		set(memgraphv1.ConditionNodesPrepared, metav1.ConditionFalse, memgraphv1.ReasonMaxMapCountTooLow, fmt.Sprintf(
			"vm.max_map_count is below %d on node(s) %s: Memgraph can fail to map memory there; allow the node agent to raise it, or set it on those nodes",
			resources.MaxMapCountMinimum, strings.Join(n.unmet, ", ")))
	case len(n.failed) > 0:
		set(memgraphv1.ConditionNodesPrepared, metav1.ConditionUnknown, memgraphv1.ReasonNodeAgentUnavailable,
			"The node agent did not answer on node(s) "+strings.Join(n.failed, ", ")+"; vm.max_map_count is unchecked there")
	case len(n.nodes) > 0:
		set(memgraphv1.ConditionNodesPrepared, metav1.ConditionTrue, memgraphv1.ReasonNodesPrepared, msgNodesPrepared)
	}
}

// stateRules map the MemgraphCluster's conditions onto the suite's state words: Ready when
// serving, converged and updated; Reconciling while serving with work in flight (Converged
// or Updated not True), while pods start or commands run; Degraded when it serves in part
// (no MAIN, no leader, coordinators unreachable), when members whose pods are ready do not
// answer the operator, or while a member is lost (MemberLost True, its reason the
// state's); Failed otherwise.
var stateRules = []conditions.StateOption{
	conditions.DegradedTypes(memgraphv1.ConditionMemberLost),
	conditions.Settling(memgraphv1.ConditionConverged, memgraphv1.ConditionUpdated),
	conditions.InProgress(memgraphv1.ReasonWorkloadsNotReady, memgraphv1.ReasonRegistrationInProgress,
		memgraphv1.ReasonRetirementInProgress, memgraphv1.ReasonLeadershipTransferInProgress,
		memgraphv1.ReasonBackupNotCompleted, memgraphv1.ReasonBackupUnreadable, memgraphv1.ReasonRestoreInProgress),
	conditions.DegradedReasons(memgraphv1.ReasonNoMain, memgraphv1.ReasonNoCoordinatorLeader, memgraphv1.ReasonCoordinatorUnreachable,
		memgraphv1.ReasonMembersUnreachable),
}

// summarize is the one-word state and the reason of the condition that decided it.
func summarize(conds []metav1.Condition) (memgraphv1.ClusterState, string) {
	state, why := conditions.StateOf(conds, stateRules...)
	return memgraphv1.ClusterState(state), why.Reason
}
