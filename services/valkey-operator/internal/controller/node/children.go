package node

import (
	"context"
	"errors"
	"fmt"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	"github.com/opsuite/suite/services/valkey-operator/internal/resources"
	"github.com/opsuite/suite/shared/children"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// syncPVC creates or updates the node's claim and returns it as it is now. With
// reclaimPolicy Delete the node controls it (the garbage collector deletes it with the
// node); with Retain it has no owner and outlives the node, and a later node of the same
// name adopts it by its labels. refused is the API server's refusal of a resize; blocked
// says why a claim of our name is not ours to use.
func (r *Reconciler) syncPVC(ctx context.Context, n *valkeyv1.ValkeyNode, want *corev1.PersistentVolumeClaim) (pvc *corev1.PersistentVolumeClaim, refused error, blocked string, err error) {
	live := &corev1.PersistentVolumeClaim{}
	switch err := r.client.Get(ctx, client.ObjectKeyFromObject(want), live); {
	case apierrors.IsNotFound(err):
		live = nil
	case err != nil:
		return nil, nil, "", fmt.Errorf("reading PVC %s: %w", want.Name, err)
	}
	if live != nil {
		owner := metav1.GetControllerOf(live)
		switch {
		case owner != nil && owner.UID != n.UID:
			return live, nil, fmt.Sprintf("PVC %s is controlled by %s %s, not by this node", live.Name, owner.Kind, owner.Name), nil
		case owner == nil && live.Labels[resources.LabelNode] != n.Name:
			return live, nil, fmt.Sprintf("PVC %s exists without the label %s=%s; the node does not adopt a claim it did not create", live.Name, resources.LabelNode, n.Name), nil
		}
		// A claim never shrinks: someone may have grown it by hand past the spec.
		if have, ok := live.Spec.Resources.Requests[corev1.ResourceStorage]; ok && have.Cmp(want.Spec.Resources.Requests[corev1.ResourceStorage]) > 0 {
			want.Spec.Resources.Requests[corev1.ResourceStorage] = have
		}
		// The class the API server defaulted is the claim's for good.
		if want.Spec.StorageClassName == nil {
			want.Spec.StorageClassName = live.Spec.StorageClassName
		}
	}
	if n.Spec.Persistence.ReclaimPolicy == valkeyv1.ReclaimDelete {
		if err := controllerutil.SetControllerReference(n, want, r.client.Scheme()); err != nil {
			return nil, nil, "", fmt.Errorf("owner of PVC %s: %w", want.Name, err)
		}
	}
	if live != nil && children.UpToDate(want, live) {
		return live, nil, "", nil
	}
	if err := r.applier.Apply(ctx, want); err != nil {
		if live != nil && (apierrors.IsForbidden(err) || apierrors.IsInvalid(err)) {
			// Most often a class that does not allow expansion; the claim itself is fine.
			return live, apiMessage(err), "", nil
		}
		return nil, nil, "", fmt.Errorf("applying PVC %s: %w", want.Name, err)
	}
	log.FromContext(ctx).Info("Applied PersistentVolumeClaim", "persistentVolumeClaim", want.Name)
	return want, nil, "", nil
}

// apiMessage is the API server's own message, without the client's wrapping.
func apiMessage(err error) error {
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		return errors.New(st.Status().Message)
	}
	return err
}

// syncWorkload applies the StatefulSet or Deployment (pruning one of the other kind) and
// finds the pod; it reports whether the workload is rolled out to the current spec.
func (r *Reconciler) syncWorkload(ctx context.Context, n *valkeyv1.ValkeyNode, objs resources.NodeObjects) (*corev1.Pod, bool, string, error) {
	sel := map[string]string{resources.LabelNode: n.Name}
	stsSet := children.Set[*appsv1.StatefulSet]{Client: r.client, Applier: r.applier, Owner: n, Selector: sel, AllowEmpty: true,
		NewList: func() client.ObjectList { return &appsv1.StatefulSetList{} }}
	depSet := children.Set[*appsv1.Deployment]{Client: r.client, Applier: r.applier, Owner: n, Selector: sel, AllowEmpty: true,
		NewList: func() client.ObjectList { return &appsv1.DeploymentList{} }}

	if objs.StatefulSet != nil {
		if _, err := depSet.Sync(ctx, nil); err != nil {
			return nil, false, "", err
		}
		out, err := stsSet.Sync(ctx, []*appsv1.StatefulSet{objs.StatefulSet})
		if err != nil {
			return nil, false, "", err
		}
		sts := &appsv1.StatefulSet{}
		if len(out.Applied) > 0 {
			sts = out.Applied[0] // fresher than the cache, which has yet to see the write
		} else if err := r.client.Get(ctx, client.ObjectKeyFromObject(objs.StatefulSet), sts); err != nil {
			return nil, false, "", fmt.Errorf("reading StatefulSet %s: %w", objs.StatefulSet.Name, err)
		}
		pod := &corev1.Pod{}
		switch err := r.client.Get(ctx, client.ObjectKey{Namespace: n.Namespace, Name: resources.PodName(n.Name)}, pod); {
		case apierrors.IsNotFound(err):
			pod = nil
		case err != nil:
			return nil, false, "", fmt.Errorf("reading pod %s: %w", resources.PodName(n.Name), err)
		}
		ok, why := statefulSetRolledOut(sts, pod)
		return pod, ok, why, nil
	}

	if _, err := stsSet.Sync(ctx, nil); err != nil {
		return nil, false, "", err
	}
	out, err := depSet.Sync(ctx, []*appsv1.Deployment{objs.Deployment})
	if err != nil {
		return nil, false, "", err
	}
	dep := &appsv1.Deployment{}
	if len(out.Applied) > 0 {
		dep = out.Applied[0]
	} else if err := r.client.Get(ctx, client.ObjectKeyFromObject(objs.Deployment), dep); err != nil {
		return nil, false, "", fmt.Errorf("reading Deployment %s: %w", objs.Deployment.Name, err)
	}
	var pods corev1.PodList
	if err := r.client.List(ctx, &pods, client.InNamespace(n.Namespace), client.MatchingLabels(sel)); err != nil {
		return nil, false, "", fmt.Errorf("listing pods of %s: %w", n.Name, err)
	}
	ok, why := deploymentRolledOut(dep)
	return pickPod(pods.Items), ok, why, nil
}

// pickPod is the Deployment's pod to report: a ready one, else the newest; pods on their
// way out only when nothing else is there.
func pickPod(pods []corev1.Pod) *corev1.Pod {
	rank := func(p *corev1.Pod) int {
		ok, _ := podReady(p, p.Name)
		switch {
		case ok:
			return 2
		case p.DeletionTimestamp.IsZero():
			return 1
		}
		return 0
	}
	var best *corev1.Pod
	for i := range pods {
		p := &pods[i]
		if best == nil || rank(p) > rank(best) ||
			(rank(p) == rank(best) && best.CreationTimestamp.Before(&p.CreationTimestamp)) {
			best = p
		}
	}
	return best
}
