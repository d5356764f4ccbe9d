package lifecycle

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Desired is the desired state of a phase.
type Desired interface {
	// Build works out what should exist and, for resources, writes it. A result that is
	// not Succeeded halts the phase with that result. Errors are transient API failures
	// worth retrying, never "not ready yet".
	Build(ctx context.Context) (Result, error)
	// IsReady reports whether what Build wanted is there.
	IsReady(ctx context.Context) (Result, error)
}

// Prop is a desired state checked in memory, without the API server.
type Prop struct {
	Check func() Result
}

// Build has nothing to do.
func (Prop) Build(context.Context) (Result, error) { return Succeeded(""), nil }

// IsReady runs the check.
func (p Prop) IsReady(context.Context) (Result, error) { return p.Check(), nil }

// Resource is a desired state made of Kubernetes objects.
type Resource struct {
	// Builder returns the objects that should exist, or a result other than Succeeded
	// when it cannot build them (an empty render fails the phase here, before Sync could
	// prune anything).
	Builder func(ctx context.Context) ([]client.Object, Result, error)
	// Sync writes the built objects and removes those no longer built. Optional.
	Sync func(ctx context.Context, objs []client.Object) (Result, error)
	// Reader reads the objects back (the manager's cache).
	Reader client.Reader
	// Check judges an object that exists; nil accepts any.
	Check func(want, got client.Object) Result
	// Missing is the Progressing message while an object is not found yet.
	Missing string
	// Ready is the Succeeded message.
	Ready string

	objs []client.Object
}

// Build calls the builder, keeps its objects and syncs them.
func (r *Resource) Build(ctx context.Context) (Result, error) {
	objs, res, err := r.Builder(ctx)
	if err != nil || !res.Succeeded() {
		return res, err
	}
	r.objs = objs
	if r.Sync == nil {
		return res, nil
	}
	return r.Sync(ctx, objs)
}

// IsReady gets every built object: one not found yet is Progressing, one the check
// rejects returns the check's result, and all found and accepted is Succeeded.
func (r *Resource) IsReady(ctx context.Context) (Result, error) {
	for _, want := range r.objs {
		got, ok := want.DeepCopyObject().(client.Object)
		if !ok {
			return Result{}, fmt.Errorf("lifecycle: %T is not a client.Object", want)
		}
		if err := r.Reader.Get(ctx, client.ObjectKeyFromObject(want), got); err != nil {
			if apierrors.IsNotFound(err) {
				return Progressing(r.Missing), nil
			}
			return Result{}, fmt.Errorf("reading %s: %w", client.ObjectKeyFromObject(want), err)
		}
		if r.Check != nil {
			if res := r.Check(want, got); !res.Succeeded() {
				return res, nil
			}
		}
	}
	return Succeeded(r.Ready), nil
}
