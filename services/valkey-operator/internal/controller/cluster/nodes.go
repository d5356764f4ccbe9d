package cluster

import (
	"context"
	"fmt"
	"sort"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	"github.com/opsuite/suite/services/valkey-operator/internal/resources"
	"github.com/opsuite/suite/shared/children"
	"github.com/opsuite/suite/shared/conditions"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// member is one ValkeyNode as the topology sees it.
type member struct {
	node *valkeyv1.ValkeyNode
	want *valkeyv1.ValkeyNode // the desired object; nil for a node being removed
	addr string
}

// ready: the node's controller has seen its current spec and its pod is ready and rolled
// out; with spec.external, the server announces its address too, so no slot moves to a
// member that outside clients could not follow a MOVED or ASK to.
func (m member) ready() bool {
	n := m.node
	return m.addr != "" && n.Status.Ready && n.Status.ObservedGeneration == n.Generation &&
		(n.Spec.External == nil || n.Status.ExternalAddress != "")
}

// outdated: the node does not hold its desired spec yet (a rolling update is due).
func (m member) outdated() bool { return m.want != nil && !children.UpToDate(m.want, m.node) }

// liveConfigFailed is the documented blocking rule: LiveConfigApplied=False stops the
// one-at-a-time progress past this node.
func (m member) liveConfigFailed() bool {
	c := conditions.Get(m.node.Status.Conditions, valkeyv1.NodeConditionLiveConfigApplied)
	return c != nil && c.Status == metav1.ConditionFalse
}

// nodeSet is the cluster's ValkeyNodes: the desired positions and the ones to remove.
type nodeSet struct {
	desired []member // in position order
	removed []member // nodes beyond spec.shards/replicas, drained then deleted
	missing []resources.Position
}

// nodes creates the missing ValkeyNodes (all at once: new members hold no data) and sorts
// the existing ones into desired and removed. It does not update existing ones: that is
// the rolling update, one at a time, once the cluster is healthy.
func (p *pass) nodes(ctx context.Context) (nodeSet, bool) {
	c := p.c
	var list valkeyv1.ValkeyNodeList
	if err := p.ctl.client.List(ctx, &list, client.InNamespace(c.Namespace), client.MatchingLabels{resources.LabelCluster: c.Name}); err != nil {
		p.fail(valkeyv1.ReasonValkeyNodeListError, "", fmt.Sprintf("Failed to list ValkeyNodes: %v", err))
		return nodeSet{}, false
	}
	live := map[string]*valkeyv1.ValkeyNode{}
	for i := range list.Items {
		n := &list.Items[i]
		if owner := metav1.GetControllerOf(n); owner == nil || owner.UID != c.UID {
			continue
		}
		live[n.Name] = n
	}
	var set nodeSet
	wanted := map[string]bool{}
	for _, pos := range resources.Positions(c) {
		want := resources.ValkeyNode(c, pos, p.restartHash())
		wanted[want.Name] = true
		if err := controllerutil.SetControllerReference(c, want, p.ctl.client.Scheme()); err != nil {
			p.fail(valkeyv1.ReasonValkeyNodeError, "", err.Error())
			return set, false
		}
		n, ok := live[want.Name]
		if !ok {
			_, answer, err := p.applyOwned(ctx, want.DeepCopy())
			if err != nil {
				p.fail(valkeyv1.ReasonValkeyNodeError, valkeyv1.EventValkeyNodeFailed, fmt.Sprintf("Failed to create ValkeyNode %s: %v", want.Name, err))
				return set, false
			}
			p.normalAbout(answer, valkeyv1.EventValkeyNodeCreated, fmt.Sprintf("Created ValkeyNode for shard %d node %d", pos.Shard, pos.Index))
			set.missing = append(set.missing, pos)
			continue
		}
		if !n.DeletionTimestamp.IsZero() {
			set.missing = append(set.missing, pos)
			continue
		}
		if !equality.Semantic.DeepEqual(n.Spec.External, want.Spec.External) {
			if n, ok = p.setExternal(ctx, n, want.Spec.External); !ok {
				return set, false
			}
		}
		set.desired = append(set.desired, member{node: n, want: want, addr: p.ctl.cfg.Addr(n)})
	}
	for name, n := range live {
		if !wanted[name] && n.DeletionTimestamp.IsZero() {
			set.removed = append(set.removed, member{node: n, addr: p.ctl.cfg.Addr(n)})
		}
	}
	sort.Slice(set.removed, func(i, j int) bool { return set.removed[i].node.Name < set.removed[j].node.Name })
	p.refusedMember(set)
	return set, true
}

// setExternal gives a member the cluster's networking.external at once, outside the
// rolling update: the pod template does not hold it, so no pod restarts and no primary
// owes a failover. Only that field changes: the rest of the spec waits for the roll.
func (p *pass) setExternal(ctx context.Context, n *valkeyv1.ValkeyNode, ext *valkeyv1.ExternalSpec) (*valkeyv1.ValkeyNode, bool) {
	cur := &valkeyv1.ValkeyNode{
		TypeMeta:   metav1.TypeMeta{APIVersion: valkeyv1.GroupVersion.String(), Kind: "ValkeyNode"},
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, Namespace: n.Namespace, Labels: resources.NodeLabels(n)},
		Spec:       *n.Spec.DeepCopy(),
	}
	cur.Spec.External = ext.DeepCopy()
	// Applied as is (not through applyOwned, whose up-to-date check cannot see a field
	// removed): the node is the cluster's, as nodes() found.
	err := controllerutil.SetControllerReference(p.c, cur, p.ctl.client.Scheme())
	if err == nil {
		err = p.ctl.apply.Apply(ctx, cur)
	}
	if err != nil {
		p.fail(valkeyv1.ReasonValkeyNodeError, valkeyv1.EventValkeyNodeFailed, fmt.Sprintf("Failed to update ValkeyNode %s: %v", n.Name, err))
		return n, false
	}
	return cur, true
}

// restartHash is what rolls the members when it changes: the restart-requiring config and
// the TLS certificate.
func (p *pass) restartHash() string {
	if p.certHash == "" {
		return p.config.RestartHash
	}
	return p.config.RestartHash + "-" + p.certHash
}

// update applies m's desired spec (one step of the rolling update).
func (p *pass) update(ctx context.Context, m member) bool {
	if _, _, err := p.applyOwned(ctx, m.want.DeepCopy()); err != nil {
		p.fail(valkeyv1.ReasonValkeyNodeError, valkeyv1.EventValkeyNodeFailed, fmt.Sprintf("Failed to update ValkeyNode %s: %v", m.node.Name, err))
		return false
	}
	p.normalAbout(m.node, valkeyv1.EventValkeyNodeUpdated, fmt.Sprintf("Updated ValkeyNode %s (shard %d node %d)", m.node.Name, m.node.Spec.ShardIndex, m.node.Spec.NodeIndex))
	return true
}

// remove deletes a drained ValkeyNode.
func (p *pass) remove(ctx context.Context, m member) bool {
	uid := m.node.UID
	if err := p.ctl.client.Delete(ctx, m.node, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
		p.fail(valkeyv1.ReasonValkeyNodeError, valkeyv1.EventValkeyNodeFailed, fmt.Sprintf("Failed to delete ValkeyNode %s: %v", m.node.Name, err))
		return false
	}
	p.normalAbout(m.node, valkeyv1.EventValkeyNodeDeleted, fmt.Sprintf("Deleted ValkeyNode %s (shard %d node %d) after it left the cluster", m.node.Name, m.node.Spec.ShardIndex, m.node.Spec.NodeIndex))
	return true
}

// unschedulable names a member pod the scheduler cannot place, if any.
func (p *pass) unschedulable(ctx context.Context) (string, string) {
	var pods corev1.PodList
	if err := p.ctl.client.List(ctx, &pods, client.InNamespace(p.c.Namespace), client.MatchingLabels(resources.PodSelector(p.c.Name))); err != nil {
		return "", ""
	}
	for _, pod := range pods.Items {
		for _, cond := range pod.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable {
				return pod.Name, cond.Message
			}
		}
	}
	return "", ""
}
