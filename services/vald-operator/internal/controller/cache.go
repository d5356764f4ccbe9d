package controller

import (
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// ManagerOptions sets what the controller needs of the manager: the cache drops every
// object's managedFields, which the controller never reads (server-side apply computes
// ownership on the API server) and which are about half of a cached ValdRelease.
func ManagerOptions(mo *ctrl.Options) {
	mo.Cache.DefaultTransform = cache.TransformStripManagedFields()
}
