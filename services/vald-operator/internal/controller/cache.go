package controller

import (
	"encoding/json"

	valdv1 "github.com/opsuite/suite/api/vald/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// lastAppliedAnnotation is where client-side `kubectl apply` keeps a full copy of what it
// applied: as large as the spec itself, and never read by the controller.
const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// ManagerOptions sets what the controller needs of the manager: the cache keeps objects
// without their managedFields (server-side apply computes ownership on the API server;
// about half of a cached ValdRelease) and without kubectl's last-applied copy, and
// ValdReleases with only the part of their status the controller reads.
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
	if vr, ok := obj.(*valdv1.ValdRelease); ok {
		slimHelmStatus(vr)
	}
	return obj, nil
}

// slimHelmStatus keeps of a ValdRelease's status the conditions and observedGeneration,
// which is all deployment reads. The Vald Helm Operator also writes deployedRelease, with
// the whole manifest it rendered from the Vald chart: tens of kilobytes per ValdRelease,
// which 2,000 cached ValdReleases would hold in memory for nothing. A status that is not
// the Vald Helm Operator's is left as it is, for deployment to say so.
func slimHelmStatus(vr *valdv1.ValdRelease) {
	if vr.Status == nil || len(vr.Status.Raw) == 0 {
		return
	}
	var st helmStatus
	if err := json.Unmarshal(vr.Status.Raw, &st); err != nil {
		return
	}
	raw, err := json.Marshal(st)
	if err != nil {
		return
	}
	vr.Status.Raw = raw
}
