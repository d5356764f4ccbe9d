// Package children writes the objects an owner's controller creates (its children) by
// server-side apply and removes those it no longer wants: apply every desired child that
// the live object does not already hold, then prune, by label, the children this owner
// controls that were not desired. It never prunes after a failed apply, nor on an empty
// desired set unless told that empty is legitimate, nor what another owner controls.
// OwnerByLabel maps a labelled child (a pod) back to its owner for a watch.
package children

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/opsuite/suite/shared/ssa"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// ErrEmpty refuses to sync an empty desired set: a builder that rendered nothing by
// mistake must not delete every child. Set AllowEmpty when empty is a real answer.
var ErrEmpty = errors.New("children: the desired set is empty; nothing applied or pruned")

// NotControlledError says a child's name is taken by an object this owner does not control
// (another owner's, or nobody's). Nothing is written over it.
type NotControlledError struct {
	Kind string
	Key  client.ObjectKey
	// Controller is the object's controller reference; nil when it has none.
	Controller *metav1.OwnerReference
}

func (e *NotControlledError) Error() string {
	if e.Controller == nil {
		return fmt.Sprintf("%s %s exists without a controller", e.Kind, e.Key)
	}
	return fmt.Sprintf("%s %s is controlled by %s %s", e.Kind, e.Key, e.Controller.Kind, e.Controller.Name)
}

// ApplyError is a failed apply of one child; errors.Is/As and apierrors see the API error.
type ApplyError struct {
	Kind string
	Key  client.ObjectKey
	Err  error
}

func (e *ApplyError) Error() string { return fmt.Sprintf("applying %s %s: %v", e.Kind, e.Key, e.Err) }
func (e *ApplyError) Unwrap() error { return e.Err }

// Set is the children of one kind of one owner.
type Set[O client.Object] struct {
	// Client reads the children (through the manager's cache) and deletes them.
	Client client.Client
	// Live, when set, reads a child the cache does not have (the manager's API reader):
	// for kinds the cache holds by label only, an object of the child's name without the
	// label (someone else's, or ours with the label removed by hand) must be seen, not
	// taken for missing and applied over. Nil trusts the cache.
	Live client.Reader
	// Applier applies with the controller's one field manager.
	Applier ssa.Applier
	// Owner is the controlling object; every child gets its controller reference.
	Owner client.Object
	// NewList returns an empty list of the children's kind, to find what to prune.
	NewList func() client.ObjectList
	// Selector is the labels every child of this owner carries (and the desired objects
	// must carry too); pruning looks only at objects that have them.
	Selector map[string]string
	// AllowEmpty lets an empty desired set prune every child.
	AllowEmpty bool
	// UpToDate, when set, stands in for the package's UpToDate: a check that knows the
	// kind and answers as UpToDate would, faster (comparing a spec's bytes before
	// converting both objects to maps). Nil uses UpToDate.
	UpToDate func(desired, live O) bool
}

// Outcome is what Sync did.
type Outcome[O client.Object] struct {
	// Applied are the children written in this pass, as the API server answered (fresher
	// than the cache, which has yet to see the watch events).
	Applied []O
	// Unchanged counts the children that already held their intent.
	Unchanged int
	// Pruned are the children deleted.
	Pruned []client.ObjectKey
}

// Sync applies desired (in the owner's namespace, each given the owner's controller
// reference) and prunes what is no longer desired. It stops at the first failure, before
// pruning; the Outcome then tells what was done until then.
func (s Set[O]) Sync(ctx context.Context, desired []O) (Outcome[O], error) {
	var out Outcome[O]
	if len(desired) == 0 && !s.AllowEmpty {
		return out, ErrEmpty
	}
	scheme := s.Client.Scheme()
	logger := log.FromContext(ctx)
	wanted := make(map[client.ObjectKey]bool, len(desired))
	for _, want := range desired {
		gvk, err := apiutil.GVKForObject(want, scheme)
		if err != nil {
			return out, fmt.Errorf("children: kind of %T: %w", want, err)
		}
		if want.GetNamespace() == "" {
			want.SetNamespace(s.Owner.GetNamespace())
		}
		for k, v := range s.Selector {
			if want.GetLabels()[k] != v {
				return out, fmt.Errorf("children: %s %s lacks the selector label %s=%s, so it could never be pruned", gvk.Kind, want.GetName(), k, v)
			}
		}
		if err := controllerutil.SetControllerReference(s.Owner, want, scheme); err != nil {
			return out, fmt.Errorf("children: owner reference on %s %s: %w", gvk.Kind, want.GetName(), err)
		}
		key := client.ObjectKeyFromObject(want)
		wanted[key] = true

		live := empty(want)
		err = s.Client.Get(ctx, key, live)
		if apierrors.IsNotFound(err) && s.Live != nil {
			err = s.Live.Get(ctx, key, live)
		}
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return out, fmt.Errorf("reading %s %s: %w", gvk.Kind, key, err)
		default:
			if owner := metav1.GetControllerOf(live); owner == nil || owner.UID != s.Owner.GetUID() {
				return out, &NotControlledError{Kind: gvk.Kind, Key: key, Controller: owner}
			}
			upToDate := UpToDate
			if s.UpToDate != nil {
				upToDate = func(d, l client.Object) bool { return s.UpToDate(d.(O), l.(O)) }
			}
			if upToDate(want, live) {
				out.Unchanged++
				continue
			}
		}
		answer, ok := want.DeepCopyObject().(O)
		if !ok {
			return out, fmt.Errorf("children: deep copy of %T", want)
		}
		if err := s.Applier.Apply(ctx, answer); err != nil {
			return out, &ApplyError{Kind: gvk.Kind, Key: key, Err: err}
		}
		out.Applied = append(out.Applied, answer)
		logger.Info("Applied "+gvk.Kind, lowerFirst(gvk.Kind), key.Name, "generation", s.Owner.GetGeneration())
	}
	return out, s.prune(ctx, wanted, &out)
}

// prune deletes the listed children this owner controls that are not wanted, each with a
// UID precondition so a child re-created meanwhile under the same name survives.
func (s Set[O]) prune(ctx context.Context, wanted map[client.ObjectKey]bool, out *Outcome[O]) error {
	list := s.NewList()
	if err := s.Client.List(ctx, list, client.InNamespace(s.Owner.GetNamespace()), client.MatchingLabels(s.Selector)); err != nil {
		return fmt.Errorf("listing children to prune: %w", err)
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return fmt.Errorf("children: %w", err)
	}
	for _, item := range items {
		child, ok := item.(client.Object)
		if !ok {
			continue
		}
		owner := metav1.GetControllerOf(child)
		if wanted[client.ObjectKeyFromObject(child)] || owner == nil || owner.UID != s.Owner.GetUID() || !child.GetDeletionTimestamp().IsZero() {
			continue
		}
		kind := "child"
		if gvk, err := apiutil.GVKForObject(child, s.Client.Scheme()); err == nil {
			kind = gvk.Kind
		}
		uid := child.GetUID()
		if err := s.Client.Delete(ctx, child, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("pruning %s %s: %w", kind, child.GetName(), err)
		}
		out.Pruned = append(out.Pruned, client.ObjectKeyFromObject(child))
		log.FromContext(ctx).Info("Pruned "+kind, lowerFirst(kind), child.GetName())
	}
	return nil
}

// empty returns a new object of want's type (and kind, for unstructured ones), so reading
// the live object never mixes in desired values.
func empty[O client.Object](want O) O {
	if u, ok := any(want).(*unstructured.Unstructured); ok {
		fresh := &unstructured.Unstructured{}
		fresh.SetGroupVersionKind(u.GroupVersionKind())
		return any(fresh).(O)
	}
	return reflect.New(reflect.TypeOf(want).Elem()).Interface().(O)
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}
