package controller

import (
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// lastAppliedAnnotation is where client-side `kubectl apply` keeps a full copy of what it
// applied: as large as the spec itself, and never read by the controller.
const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// ManagerOptions sets what the controller needs of the manager: the cache keeps objects
// without their managedFields (server-side apply computes ownership on the API server;
// about half of a cached ValdRelease) and without kubectl's last-applied copy.
func ManagerOptions(mo *ctrl.Options) {
	mo.Cache.DefaultTransform = stripForCache
}

// stripForCache drops what the controller never reads from an object entering the cache.
// Objects of other types (the informer's tombstones) pass unchanged.
func stripForCache(in any) (any, error) {
	obj, ok := in.(client.Object)
	if !ok {
		return in, nil
	}
	obj.SetManagedFields(nil)
	if a := obj.GetAnnotations(); a[lastAppliedAnnotation] != "" {
		delete(a, lastAppliedAnnotation)
		obj.SetAnnotations(a)
	}
	return obj, nil
}
