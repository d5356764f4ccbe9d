package controller

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/opsuite/suite/services/memgraph-operator/internal/resources"
	"github.com/opsuite/suite/shared/conditions"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A grown spec.storage size reaches a running cluster in two steps, because a
// StatefulSet's claim templates are immutable: each existing claim's request is raised
// (the storage driver expands the volume), then the StatefulSet is deleted with
// propagationPolicy=Orphan (its pods and claims stay, their owner references removed)
// and created again by the normal apply path with the new templates; the new
// StatefulSet adopts the running pods by their labels. Nothing restarts.
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=list;patch
// +kubebuilder:rbac:groups=storage.k8s.io,resources=storageclasses,verbs=get

// ConditionVolumesResized is absent until a size in spec.storage grows; then it says
// whether every claim requests the spec's size.
const ConditionVolumesResized = "VolumesResized"

// Volume reasons.
const (
	ReasonVolumesResizing            = "VolumesResizing"
	ReasonVolumesResized             = "VolumesResized"
	ReasonVolumeExpansionUnsupported = "VolumeExpansionUnsupported"
)

const (
	msgVolumesResized   = "Every claim has the size in spec.storage (capacity at least the request) and the StatefulSets carry it for new pods"
	msgVolumesResizing  = "A size in spec.storage grew: the claims are raised and each StatefulSet is replaced with the new claim templates, its pods kept running (registration waits until it is back)"
	msgVolumesExpanding = "The claims request the sizes in spec.storage; the storage driver is still expanding some of them (status.capacity below the request)"
	msgResizeHeld       = "A size in spec.storage grew: applied once the scale-down in progress has finished"
)

// volumeFinding is what the resize step found.
type volumeFinding struct {
	// replacing: a StatefulSet is being replaced this pass (the apply and the registration wait).
	replacing bool
	// pending: sizes grew but are not applied yet (held behind a scale-down).
	pending bool
	// grown: some role's claim templates are smaller than the spec.
	grown bool
	// unsupported names the storage classes that do not allow expansion.
	unsupported []string
	// expanding: after a growth, claims whose capacity is still below their request;
	// fsPending names those waiting for their pod to restart (FileSystemResizePending).
	expanding bool
	fsPending []string
}

// resizeVolumes applies grown sizes for the live StatefulSets: raise the claims, then
// orphan-delete the StatefulSet. It never deletes a pod or a claim.
func (p *pass) resizeVolumes(ctx context.Context, live map[resources.Role]*appsv1.StatefulSet) error {
	for _, r := range roles {
		sts := live[r]
		if sts == nil {
			continue
		}
		if sts.DeletionTimestamp != nil {
			// Our orphan deletion is in progress (the garbage collector strips the owner
			// references, then removes it); the apply recreates it once it is gone.
			p.volumes.replacing, p.volumes.grown = true, true
			continue
		}
		grown := grownClaims(resources.StatefulSet(p.c, r, 0).Spec.VolumeClaimTemplates, sts.Spec.VolumeClaimTemplates)
		if len(grown) == 0 {
			continue
		}
		p.volumes.grown = true
		if *sts.Spec.Replicas > declared(p.c, r) {
			// Recreating applies the declared count at once: it would drop members the
			// registration has not retired yet.
			p.volumes.pending = true
			continue
		}
		claims, err := p.roleClaims(ctx, sts, grown)
		if err != nil {
			return err
		}
		unsupported, err := p.unexpandable(ctx, claims)
		if err != nil {
			return err
		}
		if len(unsupported) > 0 {
			p.volumes.unsupported = append(p.volumes.unsupported, unsupported...)
			continue
		}
		for _, pvc := range claims {
			want := grown[claimTemplateOf(pvc.Name, sts.Name)]
			if cur := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; cur.Cmp(want) >= 0 {
				continue
			}
			before := pvc.DeepCopy()
			if pvc.Spec.Resources.Requests == nil {
				pvc.Spec.Resources.Requests = corev1.ResourceList{}
			}
			pvc.Spec.Resources.Requests[corev1.ResourceStorage] = want
			if err := p.ctl.client.Patch(ctx, &pvc, client.MergeFrom(before), client.FieldOwner(resources.FieldManager)); err != nil {
				return fmt.Errorf("raising claim %s to %s: %w", pvc.Name, want.String(), err)
			}
		}
		// The UID precondition never deletes a StatefulSet created since the read (the
		// cache may lag); no resourceVersion one, which its status updates would defeat.
		uid := sts.UID
		err = p.ctl.client.Delete(ctx, sts, client.PropagationPolicy(metav1.DeletePropagationOrphan), client.Preconditions{UID: &uid})
		p.volumes.replacing = true
		switch {
		case apierrors.IsNotFound(err), apierrors.IsConflict(err):
			// Gone, or another object by now: the next pass looks again.
			continue
		case err != nil:
			return fmt.Errorf("replacing StatefulSet %s for its new claim templates: %w", sts.Name, err)
		}
		p.normal(ReasonVolumesResizing, fmt.Sprintf("Raised the %s claims of StatefulSet %s (%s) and deleted it with orphaned pods so it is recreated with the new claim templates",
			strings.Join(sortedKeys(grown), ", "), sts.Name, sizes(grown)))
	}
	return p.watchExpansion(ctx)
}

// watchExpansion, after a growth whose claims and templates are all in place, looks for
// claims the storage driver has not expanded yet (read only until VolumesResized is True).
func (p *pass) watchExpansion(ctx context.Context) error {
	v := &p.volumes
	cond := conditions.Get(p.c.Status.Conditions, ConditionVolumesResized)
	if v.grown || len(v.unsupported) > 0 || cond == nil || cond.Status == metav1.ConditionTrue {
		return nil
	}
	// By label, not through the StatefulSets: one may be missing from the cache for a
	// pass right after it was created again.
	for _, r := range roles {
		var list corev1.PersistentVolumeClaimList
		if err := p.ctl.secrets.List(ctx, &list, client.InNamespace(p.c.Namespace), client.MatchingLabels(resources.Selector(p.c.Name, r))); err != nil {
			return fmt.Errorf("listing claims: %w", err)
		}
		for _, pvc := range list.Items {
			want, have := pvc.Spec.Resources.Requests[corev1.ResourceStorage], pvc.Status.Capacity[corev1.ResourceStorage]
			if pvc.Status.Phase != corev1.ClaimBound || have.Cmp(want) >= 0 {
				continue
			}
			v.expanding = true
			for _, c := range pvc.Status.Conditions {
				if c.Type == corev1.PersistentVolumeClaimFileSystemResizePending && c.Status == corev1.ConditionTrue {
					v.fsPending = append(v.fsPending, pvc.Name)
				}
			}
		}
	}
	sort.Strings(v.fsPending)
	return nil
}

// grownClaims maps each live claim template smaller than its desired one to the desired size.
func grownClaims(desired, live []corev1.PersistentVolumeClaim) map[string]resource.Quantity {
	out := map[string]resource.Quantity{}
	for _, d := range desired {
		for _, l := range live {
			if l.Name != d.Name {
				continue
			}
			want, cur := d.Spec.Resources.Requests[corev1.ResourceStorage], l.Spec.Resources.Requests[corev1.ResourceStorage]
			if want.Cmp(cur) > 0 {
				out[d.Name] = want
			}
		}
	}
	return out
}

// roleClaims lists the role's claims of the grown templates (<template>-<sts>-<ordinal>),
// retained claims of retired ordinals included, straight from the API server.
func (p *pass) roleClaims(ctx context.Context, sts *appsv1.StatefulSet, grown map[string]resource.Quantity) ([]corev1.PersistentVolumeClaim, error) {
	var list corev1.PersistentVolumeClaimList
	if err := p.ctl.secrets.List(ctx, &list, client.InNamespace(p.c.Namespace), client.MatchingLabels(sts.Spec.Selector.MatchLabels)); err != nil {
		return nil, fmt.Errorf("listing claims of StatefulSet %s: %w", sts.Name, err)
	}
	var out []corev1.PersistentVolumeClaim
	for _, pvc := range list.Items {
		if _, ok := grown[claimTemplateOf(pvc.Name, sts.Name)]; ok && pvc.DeletionTimestamp == nil {
			out = append(out, pvc)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// claimTemplateOf is the template name of a claim named <template>-<sts>-<ordinal>; "" when
// the name is not of that shape.
func claimTemplateOf(claim, sts string) string {
	i := strings.LastIndex(claim, "-"+sts+"-")
	if i <= 0 {
		return ""
	}
	return claim[:i]
}

// unexpandable names the classes of claims that do not allow expansion (a class that is
// missing, or a claim without one, counts as not allowing it).
func (p *pass) unexpandable(ctx context.Context, claims []corev1.PersistentVolumeClaim) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	for _, pvc := range claims {
		name := ""
		if pvc.Spec.StorageClassName != nil {
			name = *pvc.Spec.StorageClassName
		}
		if seen[name] {
			continue
		}
		seen[name] = true
		ok := false
		if name != "" {
			var sc storagev1.StorageClass
			switch err := p.ctl.secrets.Get(ctx, client.ObjectKey{Name: name}, &sc); {
			case apierrors.IsNotFound(err):
			case err != nil:
				return nil, fmt.Errorf("reading StorageClass %s: %w", name, err)
			default:
				ok = sc.AllowVolumeExpansion != nil && *sc.AllowVolumeExpansion
			}
		}
		if !ok {
			if name == "" {
				name = "(none)"
			}
			out = append(out, name)
		}
	}
	return out, nil
}

// setVolumesResized: absent until a size grew; True once every claim and template carries it.
func (p *pass) setVolumesResized(set setFunc) {
	v := p.volumes
	switch {
	case len(v.unsupported) > 0:
		classes := slices.Compact(slices.Sorted(slices.Values(v.unsupported)))
		set(ConditionVolumesResized, metav1.ConditionFalse, ReasonVolumeExpansionUnsupported, fmt.Sprintf(
			"StorageClass %s does not allow volume expansion, so the grown sizes in spec.storage are not applied (the claims and StatefulSets keep their sizes): set allowVolumeExpansion: true on the class; the operator applies the sizes on its next pass",
			strings.Join(quoteAll(classes), ", ")))
	case v.replacing:
		set(ConditionVolumesResized, metav1.ConditionFalse, ReasonVolumesResizing, msgVolumesResizing)
	case v.pending:
		set(ConditionVolumesResized, metav1.ConditionFalse, ReasonVolumesResizing, msgResizeHeld)
	case v.grown:
		// A size grew but nothing ran this pass (the StatefulSets were not read).
	case len(v.fsPending) > 0:
		set(ConditionVolumesResized, metav1.ConditionFalse, ReasonVolumesResizing, fmt.Sprintf(
			"The volumes of claim(s) %s are expanded but their file systems grow only when the pod restarts (FileSystemResizePending): delete those pods one at a time, replicas before the MAIN",
			strings.Join(v.fsPending, ", ")))
	case v.expanding:
		set(ConditionVolumesResized, metav1.ConditionFalse, ReasonVolumesResizing, msgVolumesExpanding)
	case conditions.Get(p.c.Status.Conditions, ConditionVolumesResized) != nil:
		set(ConditionVolumesResized, metav1.ConditionTrue, ReasonVolumesResized, msgVolumesResized)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func sizes(m map[string]resource.Quantity) string {
	var parts []string
	for _, k := range sortedKeys(m) {
		q := m[k]
		parts = append(parts, k+" "+q.String())
	}
	return strings.Join(parts, ", ")
}

func quoteAll(s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = fmt.Sprintf("%q", v)
	}
	return out
}
