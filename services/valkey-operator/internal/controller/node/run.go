package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	"github.com/opsuite/suite/services/valkey-operator/internal/resources"
	"github.com/opsuite/suite/shared/children"
	"github.com/opsuite/suite/shared/conditions"
	"github.com/opsuite/suite/shared/reconciler"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// pass is one reconcile's working state: the node (the kit's copy, whose status this pass
// fills) and the soonest time to look again.
type pass struct {
	n     *valkeyv1.ValkeyNode
	after time.Duration
}

func (p *pass) wait(d time.Duration) {
	if d > 0 && (p.after == 0 || d < p.after) {
		p.after = d
	}
}

func (p *pass) set(c metav1.Condition) {
	conditions.Set(&p.n.Status.Conditions, c, p.n.Generation)
}

func (r *Reconciler) run(ctx context.Context, n *valkeyv1.ValkeyNode) (reconciler.Result, error) {
	p := &pass{n: n}
	objs := resources.NodeWorkload(n, r.buildOptions(ctx, n))

	// The PVC first, so the pod never waits on a claim that was never asked for. A pending
	// claim does not hold the workload back: with WaitForFirstConsumer binding, the claim
	// binds only once the pod is scheduled.
	var pvcCond *metav1.Condition
	if objs.PVC != nil {
		pvc, refused, blocked, err := r.syncPVC(ctx, n, objs.PVC)
		if msg, ok := refusal(err); ok {
			r.writeRefused(p, valkeyv1.NodeReasonPersistentVolumeClaimRefused, "the API server refused the data claim: "+msg)
			return reconciler.Wait(r.cfg.Resync), nil
		}
		if err != nil {
			return reconciler.Done(), err
		}
		ready := pvcReady(objs.PVC.Name, pvc)
		if blocked != "" {
			ready.Message = blocked
		}
		p.set(ready)
		size := pvcSize(objs.PVC.Name, n.Spec.Persistence.Size, pvc, refused)
		if refused != nil {
			r.warnNews(n, size)
		}
		p.set(size)
		pvcCond = &ready
		if blocked != "" {
			// Someone else's claim under our name: never mount its data.
			p.set(readyCondition(pvcCond, false, "", false, ""))
			p.n.Status.Ready = false
			return reconciler.Wait(r.cfg.RetryMax), nil
		}
		if refused != nil {
			p.wait(r.cfg.RetryMax)
		}
	} else {
		meta.RemoveStatusCondition(&n.Status.Conditions, valkeyv1.NodeConditionPersistentVolumeClaimReady)
		meta.RemoveStatusCondition(&n.Status.Conditions, valkeyv1.NodeConditionPersistentVolumeClaimSizeReady)
	}

	pod, rolled, rollWhy, err := r.syncWorkload(ctx, n, objs)
	var nc *children.NotControlledError
	switch {
	case errors.As(err, &nc):
		p.set(readyCondition(nil, false, fmt.Sprintf("cannot run the node: %v", nc), false, ""))
		n.Status.Ready = false
		return reconciler.Wait(r.cfg.RetryMax), nil
	case err != nil:
		if msg, ok := refusal(err); ok {
			// Retried at the resync: a quota or a webhook may let the same write pass later.
			r.writeRefused(p, valkeyv1.NodeReasonWorkloadRefused, "the API server refused the workload: "+msg)
			return reconciler.Wait(r.cfg.Resync), nil
		}
		return reconciler.Done(), err
	}

	ext, err := r.syncExternal(ctx, n, pod)
	if err != nil {
		return reconciler.Done(), err
	}

	n.Status.PodName, n.Status.PodIP, n.Status.NodeName = "", "", ""
	if objs.StatefulSet != nil {
		n.Status.PodName = resources.PodName(n.Name)
	}
	if pod != nil {
		n.Status.PodName, n.Status.PodIP, n.Status.NodeName = pod.Name, pod.Status.PodIP, pod.Spec.NodeName
	}
	podOK, podWhy := podReady(pod, n.Status.PodName)
	if podOK && pod.Status.PodIP == "" {
		podOK, podWhy = false, fmt.Sprintf("pod %s has no IP yet", pod.Name)
	}
	ready := readyCondition(pvcCond, podOK, podWhy, rolled, rollWhy)
	p.set(ready)
	n.Status.Ready = ready.Status == metav1.ConditionTrue

	cfg := r.wantConfig(ctx, n)
	if cfg.skip && !cfg.unread {
		// No live keys: the condition is absent, which counts as applied; this clears a
		// failure whose key was removed, whatever the pod's state.
		meta.RemoveStatusCondition(&n.Status.Conditions, valkeyv1.NodeConditionLiveConfigApplied)
		n.Status.AppliedConfigHash = ""
	}
	if podOK {
		r.talk(ctx, p, pod, cfg, ext)
		p.wait(r.cfg.Resync)
	} else {
		if ext.on {
			// A new server announces nothing until it is told again.
			n.Status.ExternalAddress = ""
			p.set(cond(valkeyv1.NodeConditionExternalAddressAnnounced, false, valkeyv1.NodeReasonAddressPending,
				"the pod is not ready to be told its address"))
		}
		p.wait(r.cfg.RequeueAfter)
	}
	return reconciler.Wait(p.after), nil
}
