package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/services/memgraph-operator/internal/executor"
	"github.com/opsuite/suite/services/memgraph-operator/internal/memgraph"
	"github.com/opsuite/suite/services/memgraph-operator/internal/planner"
	"github.com/opsuite/suite/services/memgraph-operator/internal/resources"
	"github.com/opsuite/suite/shared/conditions"
	"github.com/opsuite/suite/shared/lostnodes"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// A member on a lost node (spec.lostNodes, planner.PlanLost) leaves the HA membership
// through the leader, then its claims on that node and its pod are deleted.
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=delete
// +kubebuilder:rbac:groups="",resources=persistentvolumes,verbs=get
// +kubebuilder:rbac:groups=memgraph.com,resources=memgraphclusters,verbs=patch

// LostReplacer takes members on lost nodes out of the HA membership: executor.ReplaceLost
// on the cluster's leader. A Registrar that is one lets the operator replace them.
type LostReplacer interface {
	ReplaceLost(ctx context.Context, c *memgraphv1.MemgraphCluster, creds Credentials, want planner.Desired, in planner.LostInput) (executor.LostOutcome, error)
}

// lostFinding is what the lost-member step found and did.
type lostFinding struct {
	decision *planner.LostDecision
	// released: claims or pods were deleted this pass (the registration waits for the
	// pods the StatefulSet makes anew).
	released bool
	// recheck is how soon a node within its grace period counts as lost (0: none).
	recheck time.Duration
}

// memberClaim is a claim of a member and the node its volume is pinned to ("" when none).
type memberClaim struct {
	pvc  corev1.PersistentVolumeClaim
	host string
}

// lostMembers finds the members whose volumes are on a lost node and replaces those it
// may (planner.PlanLost through the LostReplacer), each step idempotent and known from
// what exists, so a restarted operator goes on: the membership removal on the leader,
// then the claims on the lost node and the pod (grace 0) deleted, so that the StatefulSet
// makes the pod and its claims anew and they bind volumes on another node. The
// registration then adds the member again once every pod runs. It reads nothing beyond
// the cache unless a pod of the cluster is unschedulable or on a node that is not Ready,
// or status.lostNodes, the annotation or the condition says a loss is being followed.
func (p *pass) lostMembers(ctx context.Context, creds Credentials, want planner.Desired) error {
	c := p.c
	var nodes corev1.NodeList
	if err := p.ctl.client.List(ctx, &nodes); err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	ns := lostnodes.Observe(nodes.Items)
	suspect, err := p.lostSuspected(ctx, ns)
	if err != nil || !suspect {
		return err
	}
	claims, err := p.memberClaims(ctx)
	if err != nil {
		return err
	}
	automatic, grace := c.Spec.LostNodesPolicy()
	in := planner.LostInput{Now: p.now, Automatic: automatic, GracePeriod: grace, Nodes: ns, Lost: c.Status.LostNodes,
		Reported: lostReported(c), ReplaceRequested: c.Annotations[memgraphv1.AnnotationReplaceMember]}
	for _, r := range roles {
		first := int32(0)
		if r == resources.RoleCoordinator {
			first = resources.FirstCoordinatorOrdinal
		}
		for o := first; o < first+*p.sts[r].Spec.Replicas; o++ {
			m := planner.PinnedMember{Pod: resources.PodName(c.Name, r, o), Instance: resources.DataInstanceName(c.Name, o)}
			if r == resources.RoleCoordinator {
				m.ID, m.Instance = int(o), memgraph.CoordinatorName(int(o))
			}
			for _, mc := range claims[m.Pod] {
				if mc.host != "" && mc.pvc.DeletionTimestamp.IsZero() {
					m.Node = mc.host
				}
			}
			in.Members = append(in.Members, m)
		}
	}

	var d planner.LostDecision
	lr, ok := p.ctl.cfg.Registrar.(LostReplacer)
	switch {
	case ok && planner.NeedsView(in):
		out, err := lr.ReplaceLost(ctx, c, creds, want, in)
		if err != nil {
			return fmt.Errorf("replacing lost members: %w", err)
		}
		for q, err := range out.Failed {
			log.FromContext(ctx).Info("The leader did not take a lost member's removal", "memgraphCluster", c.Name, "query", q, "error", err.Error())
		}
		d = out.Decision
		if len(out.Executed) > 0 {
			p.ctl.metrics.Add(c.Namespace, c.Name, counterRegistrations, len(out.Executed))
		}
	default:
		d = planner.PlanLost(in)
	}

	for _, s := range d.Start {
		d.MarkReplacing(s)
		if _, err := p.releaseLost(ctx, s.Entry, claims[s.Entry.Member]); err != nil {
			p.lost = lostFinding{decision: &d, released: true}
			c.Status.LostNodes = d.Lost
			return err
		}
		p.lost.released = true
		what := "was in no membership"
		if s.Remove != nil {
			what = "left the HA membership (" + s.Remove.String() + ")"
		}
		p.warnAbout(memgraphv1.ReasonReplacing, fmt.Sprintf("Member %s of lost node %s %s; its claims on the node and its pod were deleted: the StatefulSet makes it anew on another node, where it is registered again",
			s.Entry.Member, s.Entry.Node, what))
	}
	for _, r := range d.Release {
		deleted, err := p.releaseLost(ctx, r, claims[r.Member])
		if err != nil {
			p.lost = lostFinding{decision: &d, released: true}
			c.Status.LostNodes = d.Lost
			return err
		}
		p.lost.released = p.lost.released || deleted
	}
	p.lost.decision, p.lost.recheck = &d, d.Recheck
	c.Status.LostNodes = d.Lost
	if d.ClearReplace {
		return p.clearReplaceAnnotation(ctx)
	}
	return nil
}

// lostSuspected says whether a member may be on a lost node, from the cache: a pod of the
// cluster the scheduler could not place (its StatefulSet made it again after its node
// went, and its volumes pin it there) or on a node that is not Ready; or a loss being
// followed (status.lostNodes, the annotation, MemberLost not yet back to NoMemberLost).
func (p *pass) lostSuspected(ctx context.Context, ns lostnodes.Nodes) (bool, error) {
	c := p.c
	if len(c.Status.LostNodes) > 0 || c.Annotations[memgraphv1.AnnotationReplaceMember] != "" {
		return true, nil
	}
	if cond := conditions.Get(c.Status.Conditions, memgraphv1.ConditionMemberLost); cond != nil && cond.Reason != memgraphv1.ReasonNoMemberLost {
		return true, nil
	}
	var pods corev1.PodList
	if err := p.ctl.client.List(ctx, &pods, client.InNamespace(c.Namespace), client.MatchingLabels(resources.ClusterLabels(c.Name))); err != nil {
		return false, fmt.Errorf("listing pods: %w", err)
	}
	for i := range pods.Items {
		pod := &pods.Items[i]
		if n := pod.Spec.NodeName; n != "" && ns.Of(n).Health != lostnodes.Ready {
			return true, nil
		}
		for _, cond := range pod.Status.Conditions {
			// The scheduler found no node: a pod whose volumes are pinned to a lost one.
			if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse {
				return true, nil
			}
		}
	}
	return false, nil
}

// memberClaims are the claims of the cluster's members by pod (<template>-<pod>), read
// from the API server (a decision to delete must see what exists), each with the node its
// bound volume is pinned to.
func (p *pass) memberClaims(ctx context.Context) (map[string][]memberClaim, error) {
	c := p.c
	out := map[string][]memberClaim{}
	for _, r := range roles {
		var list corev1.PersistentVolumeClaimList
		if err := p.ctl.secrets.List(ctx, &list, client.InNamespace(c.Namespace), client.MatchingLabels(resources.Selector(c.Name, r))); err != nil {
			return nil, fmt.Errorf("listing claims: %w", err)
		}
		for _, pvc := range list.Items {
			pod := ""
			for _, t := range []string{resources.VolumeLib, resources.VolumeLog} {
				if rest, ok := strings.CutPrefix(pvc.Name, t+"-"); ok {
					pod = rest
				}
			}
			if pod == "" {
				continue
			}
			mc := memberClaim{pvc: pvc}
			if pvc.Spec.VolumeName != "" {
				host, err := p.ctl.volumeHost(ctx, pvc.Spec.VolumeName)
				if err != nil {
					return nil, err
				}
				mc.host = host
			}
			out[pod] = append(out[pod], mc)
		}
	}
	return out, nil
}

// volumeHost is the host a PersistentVolume is pinned to ("" when it is not pinned, or
// gone). A volume's node affinity never changes, so each is read from the API server once.
func (ctl *Controller) volumeHost(ctx context.Context, name string) (string, error) {
	if h, ok := ctl.volumeHosts.Load(name); ok {
		return h.(string), nil
	}
	var pv corev1.PersistentVolume
	if err := ctl.secrets.Get(ctx, client.ObjectKey{Name: name}, &pv); err != nil {
		if apierrors.IsNotFound(err) {
			return "", nil
		}
		return "", fmt.Errorf("reading PersistentVolume %s: %w", name, err)
	}
	host := lostnodes.PinnedHost(&pv)
	ctl.volumeHosts.Store(name, host)
	return host, nil
}

// releaseLost deletes the member's claims whose volumes are on the lost node, then its pod
// while it uses them or runs there (grace 0: a lost node's kubelet never confirms). Both
// deletions carry the object's UID, so nothing made anew since the read is touched.
func (p *pass) releaseLost(ctx context.Context, r memgraphv1.LostNode, claims []memberClaim) (deleted bool, err error) {
	logger := log.FromContext(ctx)
	uses := false
	for _, mc := range claims {
		if mc.host != r.Node {
			continue
		}
		uses = true
		if !mc.pvc.DeletionTimestamp.IsZero() {
			continue
		}
		pvc := mc.pvc
		if err := client.IgnoreNotFound(p.ctl.client.Delete(ctx, &pvc, client.Preconditions{UID: &pvc.UID})); err != nil {
			return deleted, fmt.Errorf("deleting claim %s: %w", pvc.Name, err)
		}
		deleted = true
		logger.Info("Deleted the claim of a member on a lost node", "memgraphCluster", p.c.Name, "claim", pvc.Name, "node", r.Node)
	}
	var pod corev1.Pod
	err = p.ctl.client.Get(ctx, client.ObjectKey{Namespace: p.c.Namespace, Name: r.Member}, &pod)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return deleted, fmt.Errorf("reading pod %s: %w", r.Member, err)
	case !pod.DeletionTimestamp.IsZero() && pod.DeletionGracePeriodSeconds != nil && *pod.DeletionGracePeriodSeconds == 0:
	case uses || pod.Spec.NodeName == r.Node:
		uid := pod.UID
		if err := client.IgnoreNotFound(p.ctl.client.Delete(ctx, &pod, client.GracePeriodSeconds(0), client.Preconditions{UID: &uid})); err != nil {
			return deleted, fmt.Errorf("deleting pod %s: %w", pod.Name, err)
		}
		deleted = true
		logger.Info("Deleted the pod of a member on a lost node", "memgraphCluster", p.c.Name, "pod", pod.Name, "node", r.Node)
	}
	return deleted, nil
}

// clearReplaceAnnotation removes memgraph.com/replace-member, so that a name left there
// never approves a later loss nobody looked at.
func (p *pass) clearReplaceAnnotation(ctx context.Context) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{memgraphv1.AnnotationReplaceMember: nil}}})
	if err != nil {
		return err
	}
	obj := &memgraphv1.MemgraphCluster{ObjectMeta: metav1.ObjectMeta{Name: p.c.Name, Namespace: p.c.Namespace}}
	if err := p.ctl.client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("removing the annotation %s: %w", memgraphv1.AnnotationReplaceMember, err)
	}
	delete(p.c.Annotations, memgraphv1.AnnotationReplaceMember)
	return nil
}

// setMemberLost writes the MemberLost condition the step decided; a pass that did not
// look leaves it as it was.
func (p *pass) setMemberLost(set setFunc) {
	if p.lost.decision == nil {
		return
	}
	if cond, ok := p.lost.decision.Condition(); ok {
		set(cond.Type, cond.Status, cond.Reason, cond.Message)
	}
}

func lostReported(c *memgraphv1.MemgraphCluster) bool {
	return conditions.Get(c.Status.Conditions, memgraphv1.ConditionMemberLost) != nil
}

func (p *pass) warnAbout(reason, message string) {
	p.ctl.recorder.Eventf(p.c, nil, corev1.EventTypeWarning, reason, reason, "%s", message)
}
