package controller

import (
	"context"
	"encoding/json"
	"fmt"

	valdv1 "github.com/opsuite/suite/api/vald/v1"
	"github.com/opsuite/suite/api/vald/valdchart"
	"github.com/opsuite/suite/services/vald-operator/internal/resources"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// sharedObjectClash looks for another ValdRelease that makes the Vald chart render an
// object one of vrs would render too: Helm installs an object for one release only, so the
// later release would fail. The builder gives every object a per-cluster name, so only
// those an overlay named can clash; a release without an overlay reads nothing here.
// A legacy ValdRelease (legacy holds their names) keeps the chart's default names, which
// another ValdRelease of the cluster may render as well.
// It returns the condition message, or "" when there is no clash.
func (r *Reconciler) sharedObjectClash(ctx context.Context, vor *valdv1.ValdOperatorRelease, vrs []*valdv1.ValdRelease, legacy map[string]bool) (string, error) {
	if o := vor.Spec.VectorEngine.Vald.Overlay; (o == nil || len(o.Raw) == 0 || string(o.Raw) == "{}") && len(legacy) == 0 {
		return "", nil
	}
	suspects := map[valdchart.Resource]*valdv1.ValdRelease{}
	clusterWide := false
	for _, vr := range vrs {
		objs, err := resources.SharedObjects(vr)
		if err != nil {
			return "", err
		}
		for _, o := range objs {
			suspects[o] = vr
			clusterWide = clusterWide || o.Namespace == ""
		}
	}
	if len(suspects) == 0 {
		return "", nil
	}
	list := &valdv1.ValdReleaseList{}
	opts := []client.ListOption{client.UnsafeDisableDeepCopy}
	if !clusterWide {
		opts = append(opts, client.InNamespace(vrs[0].Namespace))
	}
	if err := r.Client.List(ctx, list, opts...); err != nil {
		return "", fmt.Errorf("listing ValdReleases to find shared objects: %w", err)
	}
	mine := map[client.ObjectKey]bool{}
	for _, vr := range vrs {
		mine[client.ObjectKeyFromObject(vr)] = true
	}
	for i := range list.Items {
		other := &list.Items[i]
		if mine[client.ObjectKeyFromObject(other)] || other.Spec == nil {
			continue
		}
		values, err := decodeValues(other)
		if err != nil {
			continue // not values the chart could render either
		}
		for _, o := range valdchart.Objects(other.Name, other.Namespace, values) {
			if vr, ok := suspects[o]; ok {
				if legacy[vr.Name] {
					return fmt.Sprintf("ValdRelease %q keeps the chart's default names it was installed with (by an operator before per-cluster names), so that its agents keep their volumes, and would make the Vald chart render %s, which ValdRelease %s/%s renders too, and Helm installs an object for one release only: delete the one the Vald Helm Operator could not deploy (Helm gave the objects to the other, so it holds no data), or remove its cluster; waiting.", vr.Name, o, other.Namespace, other.Name), nil
				}
				return fmt.Sprintf("ValdRelease %q would make the Vald chart render %s, which ValdRelease %s/%s renders too, and Helm installs an object for one release only: change the names the overlay gives; waiting.", vr.Name, o, other.Namespace, other.Name), nil
			}
		}
	}
	return "", nil
}

func decodeValues(vr *valdv1.ValdRelease) (map[string]any, error) {
	var values map[string]any
	err := json.Unmarshal(vr.Spec.Raw, &values)
	return values, err
}

// legacyNamed returns the names of this release's ValdReleases that exist without the
// per-cluster name keys (resources.LegacyNamed): an operator before per-cluster names
// wrote them, and they keep the names they were installed with.
func (r *Reconciler) legacyNamed(ctx context.Context, vor *valdv1.ValdOperatorRelease) (map[string]bool, error) {
	list := &valdv1.ValdReleaseList{}
	if err := r.Client.List(ctx, list, client.InNamespace(vor.Namespace), client.MatchingLabels{valdv1.LabelOperatorRelease: vor.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing ValdReleases to find their names: %w", err)
	}
	var legacy map[string]bool
	for i := range list.Items {
		vr := &list.Items[i]
		if !resources.LegacyNamed(vr) {
			continue
		}
		if legacy == nil {
			legacy = map[string]bool{}
		}
		legacy[vr.Name] = true
	}
	return legacy, nil
}
