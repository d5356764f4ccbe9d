package controller

import (
	"fmt"
	"sort"
	"strings"

	veltrixv1 "github.com/opsuite/suite/api/veltrix/v1alpha1"
	"github.com/opsuite/suite/services/veltrix-operator/internal/disks"
	"github.com/opsuite/suite/services/veltrix-operator/internal/planner"
	"github.com/opsuite/suite/services/veltrix-operator/internal/veltrix"
	"github.com/opsuite/suite/shared/conditions"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// updateStatus computes every condition and the summary state from what the pass saw. Each
// condition comes from a small pure function; messages name nodes, members and counts,
// never raw errors or times, so a steady cluster writes nothing.
func (p *pass) updateStatus() {
	c := p.c
	st := &c.Status
	gen := c.Generation
	set := func(cond metav1.Condition) { conditions.Set(&st.Conditions, cond, gen) }

	if p.versionUnsupported {
		// Nothing was looked at: the rest of the status stays as last reported.
		ready := versionCondition(c.Spec.Version)
		set(ready)
		summarize(st)
		return
	}

	if p.sts != nil && p.sts.Spec.Replicas != nil {
		st.Size = *p.sts.Spec.Replicas
	}
	st.ReadyMembers = p.ready
	if upgraded(p.sts, p.ready) {
		st.Version = c.Spec.Version
	}
	if t := p.topology; t != nil {
		if st.Epoch != 0 && t.Epoch != st.Epoch {
			now := metav1.NewTime(p.now)
			st.LastScaleTime = &now
		}
		st.Epoch, st.PartitionCount = t.Epoch, t.PartitionCount
		st.PartitionMap = partitionMap(t, c.Spec.ReplicationFactor)
		st.Members = memberStatuses(t, p.searchReady())
	}

	if p.prepared != nil {
		dc := disksCondition(*p.prepared, c.Spec.IndexMapFallback)
		if len(p.movedVolumes) > 0 && dc.Status == metav1.ConditionTrue {
			dc = metav1.Condition{Type: veltrixv1.ConditionDisksPrepared, Status: metav1.ConditionFalse, Reason: veltrixv1.ReasonVolumeDeviceMoved,
				Message: "raw VLog partitions found under another device path than their PersistentVolume names (delete the volume and its claim once the member is gone to recreate it): " + strings.Join(p.movedVolumes, "; ")}
		}
		set(dc)
		if asked := p.prepared.Nodes; len(asked) > 0 {
			set(maxMapCountCondition(*p.prepared, c.Spec.IndexMapFallback))
		}
	}
	if p.decision != nil {
		set(membershipCondition(*p.decision))
	}
	if p.admin != nil {
		set(serviceMonitorCondition(p.serviceMonitorMissing, p.serviceMonitorFailed))
		meta.RemoveStatusCondition(&st.Conditions, veltrixv1.ConditionServiceMonitor)
	}
	if p.lost != nil {
		set(p.lost.MemberLost)
		set(p.lost.DisksReturned)
	}
	set(replicationCondition(p.ready, c.Spec.ReplicationFactor))
	ready := p.readyCondition()
	set(ready)
	summarize(st)
}

// settled: Ready by this pass's own findings (not the status it started from), so nothing
// is left to do but look again at the next resync.
func (p *pass) settled() bool {
	return p.readyCondition().Status == metav1.ConditionTrue
}

func (p *pass) searchReady() map[string]bool {
	out := map[string]bool{}
	for i := range p.pods {
		out[p.pods[i].Name] = isTrue(&p.pods[i], veltrixv1.SearchReadyGate)
	}
	return out
}

// upgraded: every pod runs the StatefulSet's latest template and is serving.
func upgraded(sts *appsv1.StatefulSet, ready int32) bool {
	if sts == nil || sts.Spec.Replicas == nil {
		return false
	}
	s := sts.Status
	return s.ObservedGeneration >= sts.Generation && s.UpdateRevision != "" && s.CurrentRevision == s.UpdateRevision &&
		s.UpdatedReplicas == *sts.Spec.Replicas && ready == *sts.Spec.Replicas
}

// upgrading: the StatefulSet is replacing pods with a newer template.
func upgrading(sts *appsv1.StatefulSet) bool {
	if sts == nil || sts.Spec.Replicas == nil {
		return false
	}
	s := sts.Status
	return s.UpdateRevision != "" && s.CurrentRevision != s.UpdateRevision
}

func partitionMap(t *veltrix.Cluster, rf int32) string {
	states := map[string]int{}
	for _, n := range t.Nodes {
		states[n.State]++
	}
	keys := make([]string, 0, len(states))
	for k := range states {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d %s", states[k], k))
	}
	return fmt.Sprintf("%d partitions x %d replicas over %d members (%s), epoch %d",
		t.PartitionCount, rf, len(t.Nodes), strings.Join(parts, ", "), t.Epoch)
}

func memberStatuses(t *veltrix.Cluster, searchReady map[string]bool) []veltrixv1.MemberStatus {
	out := make([]veltrixv1.MemberStatus, 0, len(t.Nodes))
	for _, n := range t.Nodes {
		addr := n.Address
		if n.Port != 0 && !strings.Contains(addr, ":") {
			addr = fmt.Sprintf("%s:%d", addr, n.Port)
		}
		out = append(out, veltrixv1.MemberStatus{ID: n.NodeID, Address: addr, State: n.State, SearchReady: searchReady[n.NodeID]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// disksCondition: True when enough nodes have their disks; otherwise False with the first
// node's problem as the reason and every node's problem in the message.
func disksCondition(r disks.Result, fallback bool) metav1.Condition {
	usable := len(r.Usable(fallback))
	if usable >= r.Wanted {
		return metav1.Condition{Type: veltrixv1.ConditionDisksPrepared, Status: metav1.ConditionTrue, Reason: veltrixv1.ReasonPrepared,
			Message: fmt.Sprintf("disks prepared on %d nodes", usable)}
	}
	reason := veltrixv1.ReasonNotEnoughNodes
	var problems []string
	for _, n := range r.Nodes {
		switch {
		case n.Problem != disks.ProblemNone:
			problems = append(problems, fmt.Sprintf("%s: %s (%s)", n.Node, n.Problem, n.Message))
			if reason == veltrixv1.ReasonNotEnoughNodes {
				reason = string(n.Problem)
			}
		case n.SysctlProblem != disks.ProblemNone:
			problems = append(problems, fmt.Sprintf("%s: %s on vm.max_map_count (%s)", n.Node, n.SysctlProblem, n.SysctlMessage))
			if reason == veltrixv1.ReasonNotEnoughNodes {
				reason = string(n.SysctlProblem)
			}
		case n.MaxMapCountLow && !fallback:
			problems = append(problems, fmt.Sprintf("%s: vm.max_map_count below %d", n.Node, disks.MinMaxMapCount))
		}
	}
	msg := fmt.Sprintf("%d of %d nodes usable", usable, r.Wanted)
	if len(problems) > 0 {
		msg += "; " + strings.Join(problems, "; ")
	} else {
		msg += ": too few nodes match nodeSelector, the required nodeAffinity, tolerations, the DoNotSchedule spread constraints' topology labels and the node-pool namespace label"
	}
	return metav1.Condition{Type: veltrixv1.ConditionDisksPrepared, Status: metav1.ConditionFalse, Reason: reason, Message: msg}
}

// maxMapCountCondition names the nodes whose vm.max_map_count is too low for the native
// index and whose agent may not raise it, among the nodes asked in this pass: the nodes
// the cluster uses first, then others only while it needs more. A node excluded once is
// therefore not named again after the cluster found enough nodes elsewhere (the
// NodesExcluded event records it); it is named again when a scale-up needs it.
func maxMapCountCondition(r disks.Result, fallback bool) metav1.Condition {
	var low, met []string
	for _, n := range r.Nodes {
		switch {
		case n.Problem != disks.ProblemNone || n.SysctlProblem != disks.ProblemNone:
		case n.MaxMapCountLow:
			low = append(low, n.Node)
		default:
			met = append(met, n.Node)
		}
	}
	if len(low) == 0 {
		return metav1.Condition{Type: veltrixv1.ConditionMaxMapCountLow, Status: metav1.ConditionFalse, Reason: veltrixv1.ReasonMaxMapCountMet,
			Message: fmt.Sprintf("vm.max_map_count is at least %d on %s", disks.MinMaxMapCount, nodeList(met))}
	}
	if fallback {
		return metav1.Condition{Type: veltrixv1.ConditionMaxMapCountLow, Status: metav1.ConditionTrue, Reason: veltrixv1.ReasonIndexMapFallback,
			Message: fmt.Sprintf("vm.max_map_count is below %d on %s and the node agent may not raise it: members run with VELTRIXDB_INDEX=map", disks.MinMaxMapCount, strings.Join(low, ", "))}
	}
	return metav1.Condition{Type: veltrixv1.ConditionMaxMapCountLow, Status: metav1.ConditionTrue, Reason: veltrixv1.ReasonNodesExcluded,
		Message: fmt.Sprintf("vm.max_map_count is below %d on %s and the node agent may not raise it: those nodes are not used (raise it, let the agent raise it, or set spec.indexMapFallback)", disks.MinMaxMapCount, strings.Join(low, ", "))}
}

// membershipCondition turns the membership decision into a condition: Unknown while members
// join or leave, False when a removal is refused or stuck.
func membershipCondition(d planner.Decision) metav1.Condition {
	cond := metav1.Condition{Type: veltrixv1.ConditionMembershipSettled, Reason: d.Reason, Message: d.Waiting}
	switch d.Reason {
	case "":
		if d.Waiting != "" {
			cond.Status, cond.Reason = metav1.ConditionUnknown, planner.ReasonScaling
			return cond
		}
		cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, veltrixv1.ReasonSettled, fmt.Sprintf("membership holds %d members", d.Replicas)
	case planner.ReasonRemovalRefused, planner.ReasonRemovalStuck, planner.ReasonBelowReplicationFactor:
		cond.Status = metav1.ConditionFalse
	default:
		cond.Status = metav1.ConditionUnknown
	}
	return cond
}

// versionCondition is Ready for a spec.version older than online membership.
func versionCondition(version string) metav1.Condition {
	return metav1.Condition{Type: veltrixv1.ConditionReady, Status: metav1.ConditionFalse, Reason: veltrixv1.ReasonVersionUnsupported,
		Message: fmt.Sprintf("spec.version %s is older than %s, the first VeltrixDB with online membership (--join, --advertise-addr, /admin/cluster/members) that the operator scales with: set spec.version to %s or later; until then the StatefulSet is left as it is",
			version, veltrixv1.MinVersion, veltrixv1.MinVersion)}
}

func serviceMonitorCondition(missing, failed bool) metav1.Condition {
	switch {
	case missing:
		return metav1.Condition{Type: veltrixv1.ConditionMetricsMonitored, Status: metav1.ConditionFalse, Reason: veltrixv1.ReasonServiceMonitorCRDMissing,
			Message: "The ServiceMonitor CRD (monitoring.coreos.com/v1) is not installed: install the Prometheus Operator (or its CRDs) and the operator writes the ServiceMonitor on its next pass (every 30 s); the headless Service lists every member's metrics port meanwhile"}
	case failed:
		return metav1.Condition{Type: veltrixv1.ConditionMetricsMonitored, Status: metav1.ConditionFalse, Reason: veltrixv1.ReasonServiceMonitorError,
			Message: "Writing the ServiceMonitor failed; the operator's log has the cause"}
	}
	return metav1.Condition{Type: veltrixv1.ConditionMetricsMonitored, Status: metav1.ConditionTrue, Reason: veltrixv1.ReasonServiceMonitorApplied,
		Message: "ServiceMonitor <cluster> scrapes every member's metrics port through Service <cluster>-headless"}
}

func replicationCondition(ready, rf int32) metav1.Condition {
	if ready >= rf {
		return metav1.Condition{Type: veltrixv1.ConditionReplicationFactorMet, Status: metav1.ConditionTrue, Reason: veltrixv1.ReasonReplicationFactorMet,
			Message: fmt.Sprintf("%d members ready, replication factor %d", ready, rf)}
	}
	return metav1.Condition{Type: veltrixv1.ConditionReplicationFactorMet, Status: metav1.ConditionFalse, Reason: veltrixv1.ReasonBelowReplicationFactor,
		Message: fmt.Sprintf("%d members ready, fewer than the replication factor %d", ready, rf)}
}

// readyCondition is True when every member serves and nothing is under way; Unknown while
// work is under way; False when something needs a person.
func (p *pass) readyCondition() metav1.Condition {
	c := p.c
	cond := func(s metav1.ConditionStatus, reason, msg string) metav1.Condition {
		return metav1.Condition{Type: veltrixv1.ConditionReady, Status: s, Reason: reason, Message: msg}
	}
	usable := 0
	if p.prepared != nil {
		usable = len(p.prepared.Usable(c.Spec.IndexMapFallback))
	}
	desired := max(c.Spec.Size, c.Spec.ReplicationFactor)
	switch {
	case p.ctl.cfg.Agents == nil:
		return cond(metav1.ConditionFalse, veltrixv1.ReasonAgentsMissing, "the operator has no node agents configured (NODE_AGENT_* environment): install charts/node-agent and the operator's chart with nodeAgent.enabled")
	case p.childrenErr != "":
		return cond(metav1.ConditionFalse, veltrixv1.ReasonChildrenFailed, p.childrenErr)
	case p.sts == nil && usable == 0:
		return cond(metav1.ConditionFalse, veltrixv1.ReasonDisksNotPrepared, "no node has its disks prepared: see the DisksPrepared condition")
	case p.tokenMissing != "":
		return cond(metav1.ConditionFalse, veltrixv1.ReasonAdminTokenMissing, p.tokenMissing)
	}
	// A lost member is the cause to report while it is: False when a person has to act,
	// Unknown while it is replaced or its node's grace period runs.
	if l := p.lost; l != nil && l.Blocking() {
		switch l.MemberLost.Reason {
		case veltrixv1.ReasonReplacementManual, veltrixv1.ReasonReplacementRefused:
			return cond(metav1.ConditionFalse, l.MemberLost.Reason, l.MemberLost.Message)
		default:
			return cond(metav1.ConditionUnknown, l.MemberLost.Reason, l.MemberLost.Message)
		}
	}
	// Members without disks cannot start: that is the cause to report, whatever else waits.
	if p.ready < desired && usable < int(desired) {
		return cond(metav1.ConditionFalse, veltrixv1.ReasonDisksNotPrepared, fmt.Sprintf("%d of %d members ready; disks are prepared on %d nodes: see the DisksPrepared condition", p.ready, desired, usable))
	}
	if d := p.decision; d != nil && !d.Converged() {
		switch d.Reason {
		case planner.ReasonRemovalRefused, planner.ReasonRemovalStuck, planner.ReasonBelowReplicationFactor,
			planner.ReasonMembersUnreachable:
			return cond(metav1.ConditionFalse, d.Reason, d.Waiting)
		case "":
			return cond(metav1.ConditionUnknown, planner.ReasonScaling, d.Waiting)
		default:
			return cond(metav1.ConditionUnknown, d.Reason, d.Waiting)
		}
	}
	if upgrading(p.sts) {
		return cond(metav1.ConditionUnknown, veltrixv1.ReasonUpgrading, fmt.Sprintf("rolling the members to version %s one at a time", c.Spec.Version))
	}
	if p.ready < desired {
		return cond(metav1.ConditionUnknown, veltrixv1.ReasonMembersNotReady, fmt.Sprintf("%d of %d members ready and search-ready", p.ready, desired))
	}
	return cond(metav1.ConditionTrue, veltrixv1.ReasonReady, fmt.Sprintf("%d members ready and search-ready", p.ready))
}

// stateRules map the VeltrixCluster's conditions onto the suite's state words: Ready
// Unknown (scaling, upgrading, members starting) is Reconciling; Ready False is Degraded
// while the replication factor is met, Failed below it.
var stateRules = []conditions.StateOption{conditions.PartlyServing(veltrixv1.ConditionReplicationFactorMet)}

// summarize sets the state and the reason of the condition that decided it.
func summarize(st *veltrixv1.VeltrixClusterStatus) {
	state, why := conditions.StateOf(st.Conditions, stateRules...)
	st.State, st.Reason = veltrixv1.State(state), why.Reason
}

// nodeList names nodes for a message: "no node" for none.
func nodeList(nodes []string) string {
	if len(nodes) == 0 {
		return "no node"
	}
	return strings.Join(nodes, ", ")
}
