// Package ssa writes objects with server-side apply under one field manager per
// controller, so the API server tracks which fields each controller owns.
package ssa

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// Applier applies objects as one field manager.
type Applier struct {
	Client       client.Client
	FieldManager string
}

// Option changes one apply.
type Option func(*options)

type options struct{ force bool }

// NoForce makes the apply fail with a conflict when another manager owns a field it sets,
// instead of taking the field over.
func NoForce() Option { return func(o *options) { o.force = false } }

// Apply sends obj as the complete intent of the field manager: fields it set before and
// leaves out now are removed. By default it takes over fields owned by other managers,
// as a controller must to converge. obj is updated with the server's answer.
func (a Applier) Apply(ctx context.Context, obj client.Object, opts ...Option) error {
	if a.FieldManager == "" {
		return fmt.Errorf("ssa: the applier has no field manager")
	}
	o := options{force: true}
	for _, opt := range opts {
		opt(&o)
	}
	gvk, err := apiutil.GVKForObject(obj, a.Client.Scheme())
	if err != nil {
		return fmt.Errorf("ssa: finding the kind of %T: %w", obj, err)
	}
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return fmt.Errorf("ssa: converting %s: %w", gvk.Kind, err)
	}
	u := &unstructured.Unstructured{Object: raw}
	u.SetGroupVersionKind(gvk)
	// Server-managed fields must not be part of the intent.
	u.SetResourceVersion("")
	u.SetManagedFields(nil)
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "status")
	applyOpts := []client.ApplyOption{client.FieldOwner(a.FieldManager)}
	if o.force {
		applyOpts = append(applyOpts, client.ForceOwnership)
	}
	if err := a.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), applyOpts...); err != nil {
		return fmt.Errorf("ssa: applying %s %s: %w", gvk.Kind, client.ObjectKeyFromObject(obj), err)
	}
	return runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj)
}
