package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	veltrixv1 "github.com/opsuite/suite/api/veltrix/v1alpha1"
	"github.com/opsuite/suite/services/veltrix-operator/internal/disks"
	"github.com/opsuite/suite/services/veltrix-operator/internal/executor"
	"github.com/opsuite/suite/services/veltrix-operator/internal/planner"
	"github.com/opsuite/suite/services/veltrix-operator/internal/resources"
	"github.com/opsuite/suite/shared/lostnodes"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// observeLost finds the members whose node is lost and decides (internal/planner's
// PlanLost) what to do about them; it stores the decision's status.lostNodes. It runs
// before the disks are prepared: a listed node is not prepared again.
func (p *pass) observeLost(ctx context.Context) error {
	c := p.c
	var nodes corev1.NodeList
	if err := p.ctl.client.List(ctx, &nodes); err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	in := planner.LostInput{
		Now: p.now, Automatic: c.Spec.LostNodes.Replace == veltrixv1.LostNodeReplaceAutomatic,
		GracePeriod: c.Spec.LostNodes.GracePeriodOrDefault(), ReplicationFactor: c.Spec.ReplicationFactor,
		Lost:             c.Status.LostNodes,
		ReplaceRequested: c.Annotations[veltrixv1.AnnotationReplaceMember],
		ReofferRequested: c.Annotations[veltrixv1.AnnotationReofferNode],
		Reported:         map[string][]string{},
	}
	in.Nodes = lostnodes.Observe(nodes.Items)
	if p.sts != nil && p.sts.Spec.Replicas != nil && *p.sts.Spec.Replicas > 0 {
		members, err := p.placedMembers(ctx, *p.sts.Spec.Replicas)
		if err != nil {
			return err
		}
		in.Members = members
	}
	// A listed node that is back: what its agent reports prepared (read only).
	if p.ctl.cfg.Agents != nil {
		for _, r := range c.Status.LostNodes {
			if s, ok := in.Nodes[r.Node]; !ok || s.Health != planner.NodeReady || r.Replacement == "" {
				continue
			}
			if uuids, ok := disks.PreparedFor(ctx, p.ctl.cfg.Agents.Node(r.Node), c, p.ctl.cfg.PVRoot(r.Node), r.Disks); ok {
				in.Reported[r.Node] = uuids
			}
		}
	}
	d := planner.PlanLost(in)
	p.lost = &d
	c.Status.LostNodes = d.Lost
	if n := d.Reoffered; n != "" && !contains(c.Status.Nodes, n) {
		// Its disks are the cluster's again: asked among the used nodes, and released
		// with reclaim policy Delete.
		c.Status.Nodes = append(c.Status.Nodes, n)
		sort.Strings(c.Status.Nodes)
	}
	return p.clearLostAnnotations(ctx, d)
}

// placedMembers are the StatefulSet's ordinals with the node their bound claims' volumes
// are on and whether their pod serves. The claims are read from the API server: the
// operator's role lists and deletes them, and a decision to delete must see what exists.
func (p *pass) placedMembers(ctx context.Context, replicas int32) ([]planner.PlacedMember, error) {
	c := p.c
	var pods corev1.PodList
	if err := p.ctl.client.List(ctx, &pods, client.InNamespace(c.Namespace), client.MatchingLabels(resources.SelectorLabels(c))); err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	serves := map[string]bool{}
	for i := range pods.Items {
		serves[pods.Items[i].Name] = serving(&pods.Items[i])
	}
	claims, err := p.memberClaims(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]planner.PlacedMember, 0, replicas)
	for o := range replicas {
		pod := resources.PodName(c, o)
		m := planner.PlacedMember{Pod: pod, Serving: serves[pod]}
		for _, pvc := range claims[pod] {
			pv, err := p.volume(ctx, pvc.Spec.VolumeName)
			if err != nil {
				return nil, err
			}
			if pv == nil {
				continue
			}
			m.Node = resources.VolumeNode(pv)
			if u := pv.Annotations[resources.AnnotationFilesystemUUID]; u != "" {
				m.Disks = append(m.Disks, u)
			}
		}
		out = append(out, m)
	}
	return out, nil
}

// memberClaims are the cluster's claims by member pod: <template>-<pod> for each claim
// template.
func (p *pass) memberClaims(ctx context.Context) (map[string][]corev1.PersistentVolumeClaim, error) {
	c := p.c
	var list corev1.PersistentVolumeClaimList
	if err := p.ctl.cfg.Reader.List(ctx, &list, client.InNamespace(c.Namespace), client.MatchingLabels(resources.SelectorLabels(c))); err != nil {
		return nil, fmt.Errorf("listing the claims: %w", err)
	}
	var templates []string
	for i := range max(c.Spec.DisksPerNode, 1) {
		templates = append(templates, resources.DataClaimName(i), resources.VLogClaimName(i))
	}
	out := map[string][]corev1.PersistentVolumeClaim{}
	for _, pvc := range list.Items {
		for _, t := range templates {
			if pod, ok := strings.CutPrefix(pvc.Name, t+"-"); ok && pod != "" {
				out[pod] = append(out[pod], pvc)
			}
		}
	}
	return out, nil
}

// volume reads a PersistentVolume of the cluster; nil when name is "" or it is gone.
func (p *pass) volume(ctx context.Context, name string) (*corev1.PersistentVolume, error) {
	if name == "" {
		return nil, nil
	}
	var pv corev1.PersistentVolume
	err := p.ctl.client.Get(ctx, client.ObjectKey{Name: name}, &pv)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading PersistentVolume %s: %w", name, err)
	}
	return &pv, nil
}

// clearLostAnnotations removes the annotations the decision acted on, so that a name left
// there never approves a later loss.
func (p *pass) clearLostAnnotations(ctx context.Context, d planner.LostDecision) error {
	drop := map[string]any{}
	if d.ClearReplace {
		drop[veltrixv1.AnnotationReplaceMember] = nil
	}
	if d.ClearReoffer {
		drop[veltrixv1.AnnotationReofferNode] = nil
	}
	if len(drop) == 0 {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": drop}})
	if err != nil {
		return err
	}
	obj := &veltrixv1.VeltrixCluster{ObjectMeta: metav1.ObjectMeta{Name: p.c.Name, Namespace: p.c.Namespace}}
	if err := p.ctl.client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("removing the annotations %v: %w", sortedKeys(drop), err)
	}
	for k := range drop {
		delete(p.c.Annotations, k)
	}
	return nil
}

func sortedKeys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// excludedNodes are the nodes not to prepare disks on: the lost ones.
func (p *pass) excludedNodes() []string {
	if p.lost == nil {
		return nil
	}
	return p.lost.Excluded
}

// replaceLost carries out the lost-member decision, one member at a time, each step
// idempotent and known from what exists (so an operator restarting mid-way goes on): remove
// the member from membership at once (its co-owners copy its partitions again), then
// delete its claims bound to the lost node's volumes and its pod (grace 0: a lost node's
// kubelet never confirms), so that the StatefulSet makes it anew and its claims bind
// volumes on another prepared node, where it joins; and delete the lost node's volumes.
func (p *pass) replaceLost(ctx context.Context) error {
	d := p.lost
	if d == nil || p.admin == nil {
		return nil
	}
	logger := log.FromContext(ctx)
	if r := d.Start; r != nil {
		if err := executor.ForceRemove(ctx, p.admin, p.servingAdmins(ctx, r.Member), r.Member); err != nil {
			logger.Info("Could not remove the lost member from membership", "member", r.Member, "node", r.Node, "err", err.Error())
			d.MemberLost = metav1.Condition{Type: veltrixv1.ConditionMemberLost, Status: metav1.ConditionTrue, Reason: veltrixv1.ReasonReplacementRefused,
				Message: fmt.Sprintf("member %s of lost node %s (%s) could not be removed from membership at once (DELETE ?force=true); retrying", r.Member, r.Node, r.Reason)}
			return nil
		}
		logger.Info("Removed the lost member from membership", "member", r.Member, "node", r.Node)
		// The failover: the member's co-owners serve its partitions from now on.
		failover := metav1.NewTime(p.now)
		p.c.Status.LastFailoverTime = &failover
		p.ctl.metrics.Add(p.c.Namespace, p.c.Name, counterFailovers, 1)
		for i := range p.c.Status.LostNodes {
			if l := &p.c.Status.LostNodes[i]; l.Node == r.Node {
				l.Replacement = veltrixv1.ReplacementReplacing
				started := *l
				d.Replace = &started
			}
		}
	}
	if d.Replace == nil {
		return nil
	}
	return p.releaseLost(ctx, *d.Replace)
}

// releaseLost deletes the member's claims on the lost node (and then its pod), and every
// volume of the cluster on that node.
func (p *pass) releaseLost(ctx context.Context, r veltrixv1.LostNode) error {
	c := p.c
	logger := log.FromContext(ctx)
	claims, err := p.memberClaims(ctx)
	if err != nil {
		return err
	}
	deletePod := false
	for i := range claims[r.Member] {
		pvc := &claims[r.Member][i]
		pv, err := p.volume(ctx, pvc.Spec.VolumeName)
		if err != nil {
			return err
		}
		if pv == nil || resources.VolumeNode(pv) != r.Node {
			continue
		}
		deletePod = true
		if !pvc.DeletionTimestamp.IsZero() {
			continue
		}
		if err := client.IgnoreNotFound(p.ctl.client.Delete(ctx, pvc, client.Preconditions{UID: &pvc.UID})); err != nil {
			return fmt.Errorf("deleting claim %s: %w", pvc.Name, err)
		}
		logger.Info("Deleted the lost member's claim", "claim", pvc.Name, "node", r.Node)
	}
	var pod corev1.Pod
	err = p.ctl.client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: r.Member}, &pod)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("reading pod %s: %w", r.Member, err)
	case deletePod || pod.Spec.NodeName == r.Node:
		err := p.ctl.client.Delete(ctx, &pod, client.GracePeriodSeconds(0), client.Preconditions{UID: &pod.UID})
		if client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting pod %s: %w", r.Member, err)
		}
		logger.Info("Deleted the lost member's pod", "pod", r.Member, "node", r.Node)
	}
	// The lost node's volumes go; its disks are not touched (the node is gone or
	// unreachable, and a node that comes back keeps them until they are offered again).
	var pvs corev1.PersistentVolumeList
	if err := p.ctl.client.List(ctx, &pvs, client.MatchingLabels(resources.VolumeLabels(c))); err != nil {
		return fmt.Errorf("listing the volumes: %w", err)
	}
	for i := range pvs.Items {
		pv := &pvs.Items[i]
		if resources.VolumeNode(pv) != r.Node || !pv.DeletionTimestamp.IsZero() {
			continue
		}
		if err := client.IgnoreNotFound(p.ctl.client.Delete(ctx, pv)); err != nil {
			return fmt.Errorf("deleting PersistentVolume %s: %w", pv.Name, err)
		}
		logger.Info("Released the lost node's volume", "volume", pv.Name, "node", r.Node)
	}
	return nil
}

// servingAdmins are the admin addresses of the serving pods but the member's own.
func (p *pass) servingAdmins(ctx context.Context, except string) []planner.Endpoint {
	var pods corev1.PodList
	if err := p.ctl.client.List(ctx, &pods, client.InNamespace(p.c.Namespace), client.MatchingLabels(resources.SelectorLabels(p.c))); err != nil {
		return nil
	}
	sort.Slice(pods.Items, func(i, j int) bool { return ordinal(p.c, &pods.Items[i]) < ordinal(p.c, &pods.Items[j]) })
	var out []planner.Endpoint
	for i := range pods.Items {
		pod := &pods.Items[i]
		if pod.Name == except || !serving(pod) {
			continue
		}
		if a := p.ctl.cfg.AdminAddr(p.c, pod); a != "" {
			out = append(out, planner.Endpoint{Pod: pod.Name, Addr: a})
		}
	}
	return out
}
