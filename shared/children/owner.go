package children

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// OwnerByLabel returns a watch's map function (for handler.EnqueueRequestsFromMapFunc) that
// maps an object to the owner named by its ownerLabel, in the object's own namespace,
// provided the object also carries every label of selector; anything else maps to nothing.
// Pods are what it is for: a StatefulSet's pods reference the StatefulSet, not the cluster
// that owns it, so an operator finds the cluster by its label, and the selector (the
// managed-by label) keeps pods another operator made out.
func OwnerByLabel(ownerLabel string, selector map[string]string) handler.MapFunc {
	return func(_ context.Context, o client.Object) []reconcile.Request {
		lbls := o.GetLabels()
		name := lbls[ownerLabel]
		if name == "" {
			return nil
		}
		for k, v := range selector {
			if got, ok := lbls[k]; !ok || got != v {
				return nil
			}
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
	}
}
