package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	valdv1 "github.com/opsuite/suite/api/vald/v1"
	"github.com/opsuite/suite/services/vald-operator/internal/lifecycle"
	"github.com/opsuite/suite/shared/children"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// AnnotationValuesHash holds a hash of the chart values the controller last applied, so
// that a change of operator configuration (not only of the release) is noticed.
const AnnotationValuesHash = "vald.vdaas.org/values-hash"

func stampValuesHash(vr *valdv1.ValdRelease) {
	sum := sha256.Sum256(vr.Spec.Raw)
	if vr.Annotations == nil {
		vr.Annotations = map[string]string{}
	}
	vr.Annotations[AnnotationValuesHash] = hex.EncodeToString(sum[:8])
}

// syncValdReleases applies the ValdReleases that differ from what the cache holds, then
// deletes those this release owns but no longer builds (shared/children). A converged
// release writes nothing. objs is never empty: the builder fails an empty render before
// Sync runs, and the kit refuses an empty set anyway.
func (r *Reconciler) syncValdReleases(ctx context.Context, vor *valdv1.ValdOperatorRelease, objs []client.Object, applied map[client.ObjectKey]client.Object) (lifecycle.Result, error) {
	desired := make([]*valdv1.ValdRelease, len(objs))
	for i, obj := range objs {
		desired[i] = obj.(*valdv1.ValdRelease)
	}
	set := children.Set[*valdv1.ValdRelease]{
		Client:   r.Client,
		Applier:  r.Applier,
		Owner:    vor,
		NewList:  func() client.ObjectList { return &valdv1.ValdReleaseList{} },
		Selector: map[string]string{valdv1.LabelOperatorRelease: vor.Name},
	}
	out, err := set.Sync(ctx, desired)
	for _, vr := range out.Applied {
		applied[client.ObjectKeyFromObject(vr)] = vr
		countWrite("apply")
	}
	for range out.Pruned {
		countWrite("prune")
	}
	var notOurs *children.NotControlledError
	var rejected *children.ApplyError
	switch {
	case err == nil:
		return lifecycle.Succeeded(""), nil
	case meta.IsNoMatchError(err):
		// Not the spec's fault, nor transient: waiting for someone to install the CRD.
		return lifecycle.Pending(crdMissing), nil
	case errors.As(err, &notOurs):
		return lifecycle.Failed(fmt.Sprintf("ValdRelease %q exists and belongs to another owner: rename the cluster, or delete that ValdRelease.", notOurs.Key.Name)), nil
	case errors.As(err, &rejected) && (apierrors.IsInvalid(err) || apierrors.IsBadRequest(err)):
		// The values the spec produced are wrong: only a spec change helps.
		log.FromContext(ctx).Error(err, "Rejected ValdRelease", "valdRelease", rejected.Key.Name)
		return lifecycle.Failed(fmt.Sprintf("The API server rejected ValdRelease %q as invalid: see the operator's log and the overlay.", rejected.Key.Name)), nil
	case errors.As(err, &rejected):
		return lifecycle.Result{}, lifecycle.Retry(writeRefused(rejected.Key.Name, err), err)
	case apierrors.IsForbidden(err):
		return lifecycle.Result{}, lifecycle.Retry("The operator may not read or delete ValdReleases (Forbidden): grant its ClusterRole get, list, watch and delete on valdreleases.vald.vdaas.org; retrying.", err)
	}
	return lifecycle.Result{}, err
}

// writeRefused is the condition message of an apply the API server refused for a reason
// other than the values (permissions, quota, a webhook, an overloaded server).
func writeRefused(name string, err error) string {
	if apierrors.IsForbidden(err) {
		return fmt.Sprintf("The API server refused to write ValdRelease %q (Forbidden): the operator's ClusterRole needs create and patch on valdreleases.vald.vdaas.org, or an admission policy refused it; retrying.", name)
	}
	reason := string(apierrors.ReasonForError(err))
	if reason == "" {
		reason = "an error"
	}
	return fmt.Sprintf("Writing ValdRelease %q failed (%s); retrying.", name, reason)
}

// appliedReader reads through the cache, except for the objects applied in this pass: the
// API server's answer to the apply is fresher than the cache, which has yet to see the
// watch event. Without it every new ValdRelease costs one more pass and status write.
type appliedReader struct {
	client.Reader
	applied map[client.ObjectKey]client.Object
}

func (a appliedReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if fresh, ok := a.applied[key]; ok {
		if src, ok := fresh.(*valdv1.ValdRelease); ok {
			if dst, ok := obj.(*valdv1.ValdRelease); ok {
				src.DeepCopyInto(dst)
				return nil
			}
		}
	}
	return a.Reader.Get(ctx, key, obj, opts...)
}
