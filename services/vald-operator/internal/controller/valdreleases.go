package controller

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"

	valdv1 "github.com/opsuite/suite/api/vald/v1"
	"github.com/opsuite/suite/services/vald-operator/internal/lifecycle"
	"github.com/opsuite/suite/shared/children"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
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
// deletes those this release controls but no longer builds (shared/children by label, then
// by owner reference for any whose label was removed by hand). A converged release writes
// nothing. objs is never empty: the builder fails an empty render before Sync runs, and the
// kit refuses an empty set anyway.
func (r *Reconciler) syncValdReleases(ctx context.Context, vor *valdv1.ValdOperatorRelease, objs []client.Object, applied map[client.ObjectKey]client.Object) (lifecycle.Result, error) {
	release := client.ObjectKeyFromObject(vor)
	desired := make([]*valdv1.ValdRelease, len(objs))
	for i, obj := range objs {
		desired[i] = obj.(*valdv1.ValdRelease)
	}
	err := r.adopt(ctx, vor, desired, applied)
	if err == nil {
		err = r.createMissing(ctx, vor, desired, applied)
	}
	if err == nil {
		set := children.Set[*valdv1.ValdRelease]{
			Client:   freshClient{Client: r.Client, applied: applied},
			Applier:  r.Applier,
			Owner:    vor,
			NewList:  func() client.ObjectList { return &valdv1.ValdReleaseList{} },
			Selector: map[string]string{valdv1.LabelOperatorRelease: vor.Name},
			UpToDate: valdReleaseUpToDate,
		}
		var out children.Outcome[*valdv1.ValdRelease]
		out, err = set.Sync(ctx, desired)
		for _, vr := range out.Applied {
			applied[client.ObjectKeyFromObject(vr)] = vr
			r.metrics.countWrite("apply")
		}
		for range out.Pruned {
			r.metrics.countWrite("prune")
		}
		if err == nil {
			err = r.pruneUnlabelled(ctx, vor, desired)
		}
	}
	var notOurs *children.NotControlledError
	var rejected *children.ApplyError
	if !errors.As(err, &notOurs) {
		r.waiting.done(release)
	}
	switch {
	case err == nil:
		return lifecycle.Succeeded(""), nil
	case meta.IsNoMatchError(err):
		// Not the spec's fault, nor transient: waiting for someone to install the CRD.
		return lifecycle.Pending(crdMissing), nil
	case errors.As(err, &notOurs):
		// Not the spec's fault either: the name may be released. The event of that
		// ValdRelease (deleted, its controller removed) wakes this release; back-off
		// retries cover what no event shows.
		r.waiting.wait(release, notOurs.Key)
		return lifecycle.Result{}, lifecycle.WaitFor(nameTaken(notOurs, vor.Name), err)
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

// valdReleaseUpToDate is children.UpToDate for ValdReleases, without converting both to
// maps when it need not: a spec is all a ValdRelease holds outside metadata and status, so
// when the live spec has the desired spec's very bytes (the API server's answer to the
// create or apply, or the cache's copy of it) and the metadata holds, UpToDate would say
// yes. Anything else is left to UpToDate.
func valdReleaseUpToDate(want, live *valdv1.ValdRelease) bool {
	if want.Spec == nil || live.Spec == nil || !bytes.Equal(want.Spec.Raw, live.Spec.Raw) {
		return children.UpToDate(want, live)
	}
	for k, v := range want.Labels {
		if got, ok := live.Labels[k]; !ok || got != v {
			return false
		}
	}
	for k, v := range want.Annotations {
		if got, ok := live.Annotations[k]; !ok || got != v {
			return false
		}
	}
	w, l := metav1.GetControllerOfNoCopy(want), metav1.GetControllerOfNoCopy(live)
	return (w == nil) == (l == nil) && (w == nil || w.UID == l.UID)
}

// nameTaken is the condition message of a ValdRelease name held by something else.
func nameTaken(e *children.NotControlledError, release string) string {
	if e.Controller == nil {
		return fmt.Sprintf("ValdRelease %q exists without a controller and is not labelled %s=%s: delete it, or add that label to let this release adopt it; waiting.", e.Key.Name, valdv1.LabelOperatorRelease, release)
	}
	return fmt.Sprintf("ValdRelease %q belongs to %s %q: rename the cluster, or delete that ValdRelease; waiting for the name.", e.Key.Name, e.Controller.Kind, e.Controller.Name)
}

// adopt takes over the desired ValdReleases that exist without any controller but carry
// this release's label: what `kubectl delete vor --cascade=orphan` leaves, or an owner
// reference removed by hand. The apply adds the controller reference (owner references
// merge by uid under server-side apply). One controlled by anything else is never taken.
func (r *Reconciler) adopt(ctx context.Context, vor *valdv1.ValdOperatorRelease, desired []*valdv1.ValdRelease, applied map[client.ObjectKey]client.Object) error {
	for _, want := range desired {
		key := client.ObjectKeyFromObject(want)
		live := &valdv1.ValdRelease{}
		if err := r.Client.Get(ctx, key, live); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return fmt.Errorf("reading ValdRelease %s: %w", key, err)
		}
		if metav1.GetControllerOf(live) != nil || live.Labels[valdv1.LabelOperatorRelease] != vor.Name || !live.DeletionTimestamp.IsZero() {
			continue
		}
		answer := want.DeepCopy()
		if err := r.Applier.Apply(ctx, answer); err != nil {
			return &children.ApplyError{Kind: "ValdRelease", Key: key, Err: err}
		}
		applied[key] = answer
		r.metrics.countWrite("apply")
		log.FromContext(ctx).Info("Adopted ValdRelease", "valdRelease", key.Name, "generation", vor.Generation)
	}
	return nil
}

// pruneUnlabelled deletes the ValdReleases this release controls that it does not build
// and that lack its label (removed by hand), which the kit's label-selected prune cannot
// see. The cache's objects are only read, so they are not copied.
func (r *Reconciler) pruneUnlabelled(ctx context.Context, vor *valdv1.ValdOperatorRelease, desired []*valdv1.ValdRelease) error {
	wanted := make(map[string]bool, len(desired))
	for _, vr := range desired {
		wanted[vr.Name] = true
	}
	list := &valdv1.ValdReleaseList{}
	opts := append([]client.ListOption{client.InNamespace(vor.Namespace), client.UnsafeDisableDeepCopy}, r.index.controlledBy(string(vor.UID))...)
	if err := r.Client.List(ctx, list, opts...); err != nil {
		return fmt.Errorf("listing ValdReleases to prune: %w", err)
	}
	for i := range list.Items {
		vr := &list.Items[i]
		owner := metav1.GetControllerOf(vr)
		if owner == nil || owner.UID != vor.UID || wanted[vr.Name] || !vr.DeletionTimestamp.IsZero() || vr.Labels[valdv1.LabelOperatorRelease] == vor.Name {
			continue
		}
		uid := vr.UID
		stale := &valdv1.ValdRelease{ObjectMeta: metav1.ObjectMeta{Namespace: vr.Namespace, Name: vr.Name}}
		if err := r.Client.Delete(ctx, stale, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("pruning ValdRelease %s: %w", vr.Name, err)
		}
		r.metrics.countWrite("prune")
		log.FromContext(ctx).Info("Pruned ValdRelease", "valdRelease", vr.Name, "reason", "controlled by this release without its label")
	}
	return nil
}

// freshClient is the manager's client whose reads of the ValdReleases applied in this pass
// return the API server's answer, fresher than the cache (see appliedReader).
type freshClient struct {
	client.Client
	applied map[client.ObjectKey]client.Object
}

func (f freshClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return appliedReader{Reader: f.Client, applied: f.applied}.Get(ctx, key, obj, opts...)
}

// nameWaiters remembers which releases wait for a ValdRelease name held by something
// else, so the event that frees the name wakes them.
type nameWaiters struct {
	mu        sync.Mutex
	byRelease map[client.ObjectKey]client.ObjectKey
}

func (w *nameWaiters) wait(release, vr client.ObjectKey) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.byRelease == nil {
		w.byRelease = map[client.ObjectKey]client.ObjectKey{}
	}
	w.byRelease[release] = vr
}

func (w *nameWaiters) done(release client.ObjectKey) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.byRelease, release)
}

func (w *nameWaiters) waitingFor(vr client.ObjectKey) []client.ObjectKey {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []client.ObjectKey
	for release, name := range w.byRelease {
		if name == vr {
			out = append(out, release)
		}
	}
	return out
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
