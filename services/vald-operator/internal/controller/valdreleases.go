package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"

	valdv1 "github.com/opsuite/suite/api/vald/v1"
	"github.com/opsuite/suite/services/vald-operator/internal/lifecycle"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
// deletes those this release owns but no longer builds. A converged release writes nothing.
// objs is never empty: the builder fails an empty render before Sync runs.
func (r *Reconciler) syncValdReleases(ctx context.Context, vor *valdv1.ValdOperatorRelease, objs []client.Object, applied map[client.ObjectKey]client.Object) (lifecycle.Result, error) {
	logger := log.FromContext(ctx)
	wanted := make(map[string]bool, len(objs))
	for _, obj := range objs {
		want := obj.(*valdv1.ValdRelease)
		wanted[want.Name] = true
		current := &valdv1.ValdRelease{}
		err := r.Client.Get(ctx, client.ObjectKeyFromObject(want), current)
		switch {
		case apierrors.IsNotFound(err):
			current = nil
		case err != nil:
			return lifecycle.Result{}, fmt.Errorf("reading ValdRelease %s: %w", want.Name, err)
		}
		if current != nil {
			if owner := metav1.GetControllerOf(current); owner == nil || owner.UID != vor.UID {
				return lifecycle.Failed(fmt.Sprintf("ValdRelease %q exists and belongs to another owner: rename the cluster, or delete that ValdRelease.", want.Name)), nil
			}
			if upToDate(want, current) {
				continue
			}
		}
		answer := want.DeepCopy()
		if err := r.Applier.Apply(ctx, answer); err != nil {
			if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
				logger.Error(err, "Rejected ValdRelease", "valdRelease", want.Name)
				return lifecycle.Failed(fmt.Sprintf("The API server rejected ValdRelease %q: see the operator's log and the overlay.", want.Name)), nil
			}
			return lifecycle.Result{}, err
		}
		applied[client.ObjectKeyFromObject(want)] = answer
		countWrite("apply")
		logger.Info("Applied ValdRelease", "valdRelease", want.Name, "generation", vor.Generation)
	}

	owned := &valdv1.ValdReleaseList{}
	if err := r.Client.List(ctx, owned, client.InNamespace(vor.Namespace), client.MatchingLabels{valdv1.LabelOperatorRelease: vor.Name}); err != nil {
		return lifecycle.Result{}, fmt.Errorf("listing ValdReleases: %w", err)
	}
	for i := range owned.Items {
		vr := &owned.Items[i]
		owner := metav1.GetControllerOf(vr)
		if wanted[vr.Name] || owner == nil || owner.UID != vor.UID || !vr.DeletionTimestamp.IsZero() {
			continue
		}
		uid := vr.UID
		if err := r.Client.Delete(ctx, vr, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
			return lifecycle.Result{}, fmt.Errorf("pruning ValdRelease %s: %w", vr.Name, err)
		}
		countWrite("prune")
		logger.Info("Pruned ValdRelease", "valdRelease", vr.Name)
	}
	return lifecycle.Succeeded(""), nil
}

// upToDate reports whether current already holds everything the controller would apply:
// labels, annotations (the values hash among them), the controller reference, and every
// value of the spec. Fields others added are left alone, as server-side apply would.
func upToDate(want, current *valdv1.ValdRelease) bool {
	for k, v := range want.Labels {
		if current.Labels[k] != v {
			return false
		}
	}
	for k, v := range want.Annotations {
		if current.Annotations[k] != v {
			return false
		}
	}
	owner := metav1.GetControllerOf(current)
	if owner == nil || owner.UID != want.OwnerReferences[0].UID {
		return false
	}
	if current.Spec == nil {
		return want.Spec == nil
	}
	var w, c any
	if json.Unmarshal(want.Spec.Raw, &w) != nil || json.Unmarshal(current.Spec.Raw, &c) != nil {
		return false
	}
	return contains(c, w)
}

// contains reports whether every value of want is in got: objects may hold extra keys,
// lists and scalars must be equal.
func contains(got, want any) bool {
	wm, ok := want.(map[string]any)
	if !ok {
		return reflect.DeepEqual(got, want)
	}
	gm, ok := got.(map[string]any)
	if !ok {
		return false
	}
	for k, wv := range wm {
		gv, present := gm[k]
		if !present || !contains(gv, wv) {
			return false
		}
	}
	return true
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
