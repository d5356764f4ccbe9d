package controller

import (
	"context"
	"fmt"
	"sync/atomic"

	valdv1 "github.com/opsuite/suite/api/vald/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Cache indexes of ValdReleases. Without them every pass lists all the ValdReleases of its
// namespace (to prune, to find those of inactive entries) and filters them: quadratic in the
// releases of a namespace, a third of the operator's CPU at 1,000 releases.
const (
	// indexOperatorRelease is the vald.vdaas.org/operator-release label.
	indexOperatorRelease = "vald.operatorRelease"
	// indexController is the uid of the controlling release, only for the ValdReleases
	// that lack that release's label (pruneUnlabelled looks for those alone): the labelled
	// ones, all of them but those a person changed, would hold 1,000 entries of the index
	// at 1,000 releases for nothing.
	indexController = "vald.controller"
)

// valdReleaseIndex registers the indexes once the ValdRelease kind is served (see
// valdReleaseWatch) and narrows the lists of ValdReleases to one release's from then on.
type valdReleaseIndex struct{ ready atomic.Bool }

// register adds the indexes to the cache.
func (x *valdReleaseIndex) register(ctx context.Context, c cache.Cache) error {
	byLabel := func(o client.Object) []string {
		if v := o.GetLabels()[valdv1.LabelOperatorRelease]; v != "" {
			return []string{v}
		}
		return nil
	}
	byController := func(o client.Object) []string {
		if ref := metav1.GetControllerOfNoCopy(o); ref != nil && o.GetLabels()[valdv1.LabelOperatorRelease] != ref.Name {
			return []string{string(ref.UID)}
		}
		return nil
	}
	if err := c.IndexField(ctx, &valdv1.ValdRelease{}, indexOperatorRelease, byLabel); err != nil {
		return fmt.Errorf("indexing ValdReleases by release label: %w", err)
	}
	if err := c.IndexField(ctx, &valdv1.ValdRelease{}, indexController, byController); err != nil {
		return fmt.Errorf("indexing ValdReleases by controller: %w", err)
	}
	x.ready.Store(true)
	return nil
}

// narrow adds the index lookup to a list of ValdReleases selected by the release label.
func (x *valdReleaseIndex) narrow(list client.ObjectList, opts []client.ListOption) []client.ListOption {
	if _, ok := list.(*valdv1.ValdReleaseList); !ok || x == nil || !x.ready.Load() {
		return opts
	}
	lo := (&client.ListOptions{}).ApplyOptions(opts)
	if lo.LabelSelector == nil || lo.FieldSelector != nil {
		return opts
	}
	name, ok := lo.LabelSelector.RequiresExactMatch(valdv1.LabelOperatorRelease)
	if !ok {
		return opts
	}
	return append(opts, client.MatchingFields{indexOperatorRelease: name})
}

// controlledBy is the list option of the ValdReleases controlled by uid that lack its
// label (by the index when registered, else none: the caller filters anyway).
func (x *valdReleaseIndex) controlledBy(uid string) []client.ListOption {
	if x == nil || !x.ready.Load() {
		return nil
	}
	return []client.ListOption{client.MatchingFields{indexController: uid}}
}

// indexedClient is the manager's client whose lists of one release's ValdReleases use the
// index, and whose reads of ValdReleases unpack the specs the cache holds packed
// (packSpec), so that nothing past it sees a packed spec.
type indexedClient struct {
	client.Client
	index *valdReleaseIndex
}

func (c indexedClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := c.Client.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	return unpackRead(obj)
}

func (c indexedClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := c.Client.List(ctx, list, c.index.narrow(list, opts)...); err != nil {
		return err
	}
	return unpackRead(list)
}
