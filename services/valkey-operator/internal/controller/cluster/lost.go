package cluster

import (
	"context"
	"fmt"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	"github.com/opsuite/suite/services/valkey-operator/internal/planner"
	"github.com/opsuite/suite/services/valkey-operator/internal/resources"
	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
	"github.com/opsuite/suite/shared/conditions"
	"github.com/opsuite/suite/shared/lostnodes"
	"github.com/opsuite/suite/shared/reconciler"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// +kubebuilder:rbac:groups="",resources=nodes,verbs=list;watch
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=list;watch;delete
// +kubebuilder:rbac:groups="",resources=persistentvolumes,verbs=get
// +kubebuilder:rbac:groups="",resources=pods,verbs=delete

// lostState is the MemberLost condition a pass decided; nil when it sets none.
type lostState struct {
	status          metav1.ConditionStatus
	reason, message string
}

// lostMembers finds the members whose claim is on a lost Kubernetes node and replaces
// those that may be (planner.PlanLost): their claim is deleted, then their pod if it is
// on the lost node (grace 0: a lost node's kubelet never confirms), and the node
// controller makes a new claim, which binds on another node.
func (p *pass) lostMembers(ctx context.Context, snap valkey.Snapshot, set nodeSet, unreachable map[string]error) {
	if p.c.Spec.Persistence == nil {
		return
	}
	in, claims, err := p.lostInput(ctx, snap, set, unreachable)
	if err != nil {
		log.FromContext(ctx).Info("Could not look for lost nodes", "error", err.Error())
		p.lostRecheck = p.retry()
		return
	}
	d := planner.PlanLost(in)
	p.lostRecheck = d.Recheck
	nodes := map[string]*valkeyv1.ValkeyNode{}
	for _, m := range set.desired {
		nodes[m.node.Name] = m.node
	}
	for _, m := range d.Replace {
		if err := p.replaceLost(ctx, m, claims[m.Name], nodes[m.Name]); err != nil {
			log.FromContext(ctx).Info("Could not replace a lost member", "valkeyNode", m.Name, "node", m.Node, "error", err.Error())
			p.lostRecheck = p.retry()
			break
		}
	}
	p.setLost(d)
}

// lostInput reads what PlanLost needs: the Kubernetes nodes, and for each desired member
// the node its bound claim's volume is pinned to.
func (p *pass) lostInput(ctx context.Context, snap valkey.Snapshot, set nodeSet, unreachable map[string]error) (planner.LostInput, map[string]*corev1.PersistentVolumeClaim, error) {
	automatic, grace := p.c.Spec.LostNodesPolicy()
	in := planner.LostInput{Now: p.now, Automatic: automatic, GracePeriod: grace, Snapshot: snap}
	var nodes corev1.NodeList
	if err := p.ctl.client.List(ctx, &nodes); err != nil {
		return in, nil, fmt.Errorf("listing nodes: %w", err)
	}
	in.Nodes = lostnodes.Observe(nodes.Items)
	claims := map[string]*corev1.PersistentVolumeClaim{}
	for _, m := range set.desired {
		pvc := &corev1.PersistentVolumeClaim{}
		err := p.ctl.client.Get(ctx, client.ObjectKey{Namespace: p.c.Namespace, Name: resources.PVCName(m.node.Name)}, pvc)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return in, nil, fmt.Errorf("reading claim of %s: %w", m.node.Name, err)
		case pvc.Spec.VolumeName == "" || pvc.Labels[resources.LabelNode] != m.node.Name:
			continue // not bound yet, or not the member's
		}
		host, err := p.ctl.volumeHost(ctx, pvc.Spec.VolumeName)
		if err != nil {
			return in, nil, err
		}
		if host == "" {
			continue // not pinned to one node: it can follow the pod
		}
		_, answers := snap.View(m.addr)
		in.Members = append(in.Members, planner.PinnedMember{Name: m.node.Name, ID: m.node.Status.ValkeyNodeID, Node: host,
			Answers: m.addr != "" && answers && unreachable[m.addr] == nil, ClaimDeleting: !pvc.DeletionTimestamp.IsZero()})
		claims[m.node.Name] = pvc
	}
	return in, claims, nil
}

// volumeHost is the hostname a PersistentVolume's node affinity pins it to ("" when it is
// not pinned to one node). The affinity never changes once the volume exists, so it is
// read from the API server once per volume (the operator caches no volumes).
func (ctl *Controller) volumeHost(ctx context.Context, name string) (string, error) {
	if h, ok := ctl.volumeHosts.Load(name); ok {
		return h.(string), nil
	}
	var pv corev1.PersistentVolume
	if err := ctl.api.Get(ctx, client.ObjectKey{Name: name}, &pv); err != nil {
		if apierrors.IsNotFound(err) {
			return "", nil
		}
		return "", fmt.Errorf("reading PersistentVolume %s: %w", name, err)
	}
	host := lostnodes.PinnedHost(&pv)
	ctl.volumeHosts.Store(name, host)
	return host, nil
}

// replaceLost deletes m's claim (the one bound to the lost node's volume), then its pod.
// Both are idempotent: the next pass sees what is left.
func (p *pass) replaceLost(ctx context.Context, m planner.PinnedMember, pvc *corev1.PersistentVolumeClaim, node *valkeyv1.ValkeyNode) error {
	if pvc == nil {
		return nil
	}
	uid := pvc.UID
	if err := client.IgnoreNotFound(p.ctl.client.Delete(ctx, pvc, client.Preconditions{UID: &uid})); err != nil {
		return fmt.Errorf("deleting claim %s: %w", pvc.Name, err)
	}
	log.FromContext(ctx).Info("Deleted the claim of a member on a lost node", "persistentVolumeClaim", pvc.Name, "node", m.Node)
	// A scheduled pod that mounts the claim is on the claim's node, the lost one; an
	// unscheduled one is made again by its StatefulSet anyway.
	var pod corev1.Pod
	err := p.ctl.client.Get(ctx, client.ObjectKey{Namespace: p.c.Namespace, Name: resources.PodName(m.Name)}, &pod)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("reading pod of %s: %w", m.Name, err)
	case pod.Spec.NodeName != "":
		podUID := pod.UID
		if err := client.IgnoreNotFound(p.ctl.client.Delete(ctx, &pod, client.GracePeriodSeconds(0), client.Preconditions{UID: &podUID})); err != nil {
			return fmt.Errorf("deleting pod %s: %w", pod.Name, err)
		}
		log.FromContext(ctx).Info("Deleted the pod of a member on a lost node", "pod", pod.Name, "node", pod.Spec.NodeName)
	}
	p.events.Record(reconciler.Event{Related: node, Type: corev1.EventTypeWarning, Reason: valkeyv1.ReasonReplacing,
		Note: fmt.Sprintf("Deleted claim %s of %s on lost node %s: the member gets a new claim on another node and rejoins as a replica", pvc.Name, m.Name, m.Node)})
	return nil
}

// setLost turns the decision into the MemberLost condition (and Degraded while True). The
// condition appears once a member was first found on a lost node.
func (p *pass) setLost(d planner.LostDecision) {
	reason := map[planner.LostState]string{planner.LostReplacing: valkeyv1.ReasonReplacing, planner.LostWaitingGrace: valkeyv1.ReasonNodeNotReady,
		planner.LostManual: valkeyv1.ReasonReplacementManual, planner.LostRefused: valkeyv1.ReasonReplacementRefused}[d.State]
	if d.State == planner.LostNone {
		if conditions.Get(p.before.Conditions, valkeyv1.ConditionMemberLost) == nil {
			return
		}
		p.lost = &lostState{metav1.ConditionFalse, valkeyv1.ReasonNoMemberLost, "No member's claim is on a lost node"}
		p.normalOn(valkeyv1.ConditionMemberLost, metav1.ConditionFalse, valkeyv1.ReasonNoMemberLost, valkeyv1.ReasonNoMemberLost, p.lost.message)
		return
	}
	p.lost = &lostState{metav1.ConditionTrue, reason, d.Message}
	p.degraded, p.degradedMsg = reason, d.Message
	if d.State != planner.LostReplacing {
		// Replacing is announced per member as the claims are deleted.
		p.warnOn(valkeyv1.ConditionMemberLost, metav1.ConditionTrue, reason, reason, d.Message)
	}
}
