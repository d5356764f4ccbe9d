package node

import (
	"context"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	"github.com/opsuite/suite/services/valkey-operator/internal/resources"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// buildOptions are the builder's options for n. The preStop hand-over is installed from
// the operator's own image, which changes with every operator upgrade: written into every
// pod template at once, it would restart every member of every cluster together, the
// outage the hand-over exists to avoid. So a workload keeps the hand-over image it has
// (none, for one made before the hand-over existed) until its pod is replaced anyway (its
// ValkeyNode's image or restart hash changed, which the cluster controller does one node
// at a time, after a failover); a new workload gets the operator's image.
func (r *Reconciler) buildOptions(ctx context.Context, n *valkeyv1.ValkeyNode) resources.NodeOptions {
	o := r.cfg.Build
	if o.HandoverImage == "" {
		return o
	}
	var live *corev1.PodTemplateSpec
	key := client.ObjectKey{Namespace: n.Namespace, Name: resources.WorkloadName(n.Name)}
	if n.Spec.WorkloadType == valkeyv1.WorkloadTypeDeployment {
		var d appsv1.Deployment
		if r.client.Get(ctx, key, &d) == nil {
			live = &d.Spec.Template
		}
	} else {
		var s appsv1.StatefulSet
		if r.client.Get(ctx, key, &s) == nil {
			live = &s.Spec.Template
		}
	}
	if live == nil {
		return o // a new workload (or one not readable now, which a later pass corrects)
	}
	kept := o
	kept.HandoverImage = handoverImage(live)
	want := resources.NodeWorkload(n, kept)
	desired := want.Template()
	if serverImage(live) != serverImage(desired) || live.Annotations[resources.AnnotationRestartHash] != desired.Annotations[resources.AnnotationRestartHash] {
		return o // replaced anyway: with the current hand-over
	}
	return kept
}

// handoverImage is the image of the template's hand-over installer, "" without one.
func handoverImage(t *corev1.PodTemplateSpec) string {
	for _, c := range t.Spec.InitContainers {
		if c.Name == resources.HandoverContainer {
			return c.Image
		}
	}
	return ""
}

// serverImage is the image of the template's server container.
func serverImage(t *corev1.PodTemplateSpec) string {
	for _, c := range t.Spec.Containers {
		if c.Name == resources.ServerContainer {
			return c.Image
		}
	}
	return ""
}
