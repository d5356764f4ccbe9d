package controller

import (
	"context"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// The Secrets a cluster names (license, spec.auth, spec.tls.bolt) are watched by metadata
// only: a changed password or a renewed certificate starts a pass at once instead of at
// the next resync, while the operator keeps no Secret's data in memory (each pass reads
// the ones it needs from the API server).
// +kubebuilder:rbac:groups="",resources=secrets,verbs=list;watch

// secretsNamed are the Secrets of c's spec.
func secretsNamed(c *memgraphv1.MemgraphCluster) []string {
	names := []string{c.Spec.Secrets.Name}
	if c.Spec.Auth != nil {
		names = append(names, c.Spec.Auth.SecretName)
	}
	if c.Spec.TLS != nil {
		names = append(names, c.Spec.TLS.Bolt.SecretName)
	}
	return names
}

// secretToClusters maps a Secret's event to the clusters of its namespace that name it.
func secretToClusters(clusters client.Reader) func(context.Context, client.Object) []reconcile.Request {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		var list memgraphv1.MemgraphClusterList
		if err := clusters.List(ctx, &list, client.InNamespace(o.GetNamespace())); err != nil {
			// The resync still picks the change up.
			log.FromContext(ctx).Error(err, "Listing MemgraphClusters for a Secret's change", "secret", o.GetName())
			return nil
		}
		var out []reconcile.Request
		for i := range list.Items {
			for _, n := range secretsNamed(&list.Items[i]) {
				if n == o.GetName() {
					out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: list.Items[i].Name}})
					break
				}
			}
		}
		return out
	}
}

// secretChanged passes a Secret's creation, deletion and any update that changed it
// (its resourceVersion), not the informer's periodic resync.
var secretChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld.GetResourceVersion() != e.ObjectNew.GetResourceVersion()
	},
}
