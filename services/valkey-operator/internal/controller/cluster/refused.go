package cluster

import (
	"fmt"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	"github.com/opsuite/suite/shared/conditions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// refusedMember marks the cluster Degraded when the API server refuses a member's
// workload or claim (the ValkeyNode's Ready reason says so): nothing the cluster does
// gets that member running, so `kubectl get vkc` says why, with the node's reason and
// message, instead of only waiting for it. The first such member in position order.
func (p *pass) refusedMember(set nodeSet) {
	for _, m := range set.desired {
		r := conditions.Get(m.node.Status.Conditions, valkeyv1.NodeConditionReady)
		if r == nil || r.Status != metav1.ConditionFalse {
			continue
		}
		if r.Reason == valkeyv1.NodeReasonWorkloadRefused || r.Reason == valkeyv1.NodeReasonPersistentVolumeClaimRefused {
			p.degraded, p.degradedMsg = r.Reason, fmt.Sprintf("ValkeyNode %s: %s", m.node.Name, r.Message)
			return
		}
	}
}
