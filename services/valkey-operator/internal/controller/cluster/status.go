package cluster

import (
	"fmt"
	"strings"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	"github.com/opsuite/suite/services/valkey-operator/internal/resources"
	"github.com/opsuite/suite/shared/conditions"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// minShardsForFailover: with fewer primaries, losing one loses the majority that elects
// a replica, so the cluster cannot fail over on its own.
const minShardsForFailover = 3

// writeStatus turns what the pass found into the conditions, the summary fields and the
// event of becoming ready (ClusterReady).
func (p *pass) writeStatus() {
	c := p.c
	st := &c.Status
	gen := c.Generation
	set := func(t string, s metav1.ConditionStatus, reason, msg string) {
		conditions.Set(&st.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg}, gen)
	}

	// Every risky value is named; the reason is the first one's.
	var reasons, messages []string
	if warn, msg := resources.GracePeriodWarning(c); warn {
		reasons, messages = append(reasons, valkeyv1.ReasonGracePeriodTooShort), append(messages, msg)
	}
	if c.Spec.Shards < minShardsForFailover {
		reasons, messages = append(reasons, valkeyv1.ReasonTooFewShards), append(messages,
			fmt.Sprintf("spec.shards is %d: with fewer than %d primaries the cluster cannot elect a replica when a primary fails; use at least %d shards for automatic failover", c.Spec.Shards, minShardsForFailover, minShardsForFailover))
	}
	if c.Spec.Replicas == 0 && c.Spec.Persistence == nil {
		reasons, messages = append(reasons, valkeyv1.ReasonNoRedundancy), append(messages,
			"spec.replicas is 0 and spec.persistence is unset: a restarted pod comes back empty and its shard's keys are lost for good; set replicas to 1 or more, or persistence")
	}
	if len(reasons) > 0 {
		set(valkeyv1.ConditionConfigurationWarning, metav1.ConditionTrue, reasons[0], strings.Join(messages, "; "))
	} else {
		meta.RemoveStatusCondition(&st.Conditions, valkeyv1.ConditionConfigurationWarning)
	}

	p.setMonitoringCondition(set, &st.Conditions)
	if l := p.lost; l != nil {
		set(valkeyv1.ConditionMemberLost, l.status, l.reason, l.message)
	}

	if p.failReason != "" {
		set(valkeyv1.ConditionReady, metav1.ConditionFalse, p.failReason, p.failMessage)
		set(valkeyv1.ConditionProgressing, metav1.ConditionFalse, p.failReason, p.failMessage)
	} else {
		if p.formed != "" {
			set(valkeyv1.ConditionClusterFormed, p.formed, p.formedReason, p.formedMsg)
		}
		if p.slotsAssigned != nil {
			if *p.slotsAssigned {
				set(valkeyv1.ConditionSlotsAssigned, metav1.ConditionTrue, valkeyv1.ReasonAllSlotsAssigned, "All slots assigned")
			} else {
				set(valkeyv1.ConditionSlotsAssigned, metav1.ConditionFalse, valkeyv1.ReasonSlotsUnassigned, "Assigning slots to nodes")
			}
		}
		if p.degraded != "" {
			set(valkeyv1.ConditionDegraded, metav1.ConditionTrue, p.degraded, p.degradedMsg)
		} else {
			meta.RemoveStatusCondition(&st.Conditions, valkeyv1.ConditionDegraded)
		}
		if p.progress != "" {
			set(valkeyv1.ConditionProgressing, metav1.ConditionTrue, p.progress, p.progressMsg)
		} else {
			set(valkeyv1.ConditionProgressing, metav1.ConditionFalse, valkeyv1.ReasonReconcileComplete, "No changes needed")
		}
		switch {
		case p.healthy:
			set(valkeyv1.ConditionReady, metav1.ConditionTrue, valkeyv1.ReasonClusterHealthy, "Cluster is healthy")
		case p.progress == valkeyv1.ReasonUpdatingNodes || p.progress == valkeyv1.ReasonRollBlocked:
			set(valkeyv1.ConditionReady, metav1.ConditionFalse, p.progress, p.progressMsg)
		case p.degraded == valkeyv1.ReasonPodUnschedulable || p.degraded == valkeyv1.ReasonMembersUnreachable:
			set(valkeyv1.ConditionReady, metav1.ConditionFalse, p.degraded, p.degradedMsg)
		case p.formed == metav1.ConditionFalse && p.formedReason == valkeyv1.ReasonMissingShards:
			set(valkeyv1.ConditionReady, metav1.ConditionFalse, valkeyv1.ReasonMissingShards, "Waiting for all shards to be created")
		case p.formed == metav1.ConditionFalse:
			set(valkeyv1.ConditionReady, metav1.ConditionFalse, valkeyv1.ReasonMissingReplicas, "Waiting for all replicas to be created")
		default:
			set(valkeyv1.ConditionReady, metav1.ConditionFalse, valkeyv1.ReasonReconciling, "Cluster is Reconciling")
		}
		st.Shards, st.ReadyShards = p.shards, p.readyShards
	}
	if p.failedOver {
		st.LastFailoverTime = &metav1.Time{Time: p.now}
	}

	// The summary, in the documented priority (Degraded=True, Ready=True, Progressing=True,
	// else Failed), which is the kit's without options.
	state, why := conditions.StateOf(st.Conditions)
	st.State, st.Reason, st.Message = valkeyv1.ClusterState(state), why.Reason, why.Message
	p.normalOn(valkeyv1.ConditionReady, metav1.ConditionTrue, valkeyv1.ReasonClusterHealthy, valkeyv1.EventClusterReady,
		fmt.Sprintf("Cluster ready with %d shards and %d replicas", c.Spec.Shards, c.Spec.Replicas))
}
