// Package status writes an object's status once per reconcile pass, and not at all when
// nothing changed, so a converged controller issues no writes.
package status

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Write patches the status subresource of after with the difference from before. It
// writes nothing and returns false when the two statuses are semantically equal. The
// patch is a JSON merge patch computed from before, so fields the pass did not touch are
// left as they are on the server.
func Write(ctx context.Context, c client.Client, before, after client.Object) (bool, error) {
	if equality.Semantic.DeepEqual(statusOf(before), statusOf(after)) {
		return false, nil
	}
	if err := c.Status().Patch(ctx, after, client.MergeFrom(before)); err != nil {
		return false, fmt.Errorf("writing status: %w", err)
	}
	return true, nil
}

// statusOf returns the status field of obj, or the whole object when it has none that
// the unstructured converter can find.
func statusOf(obj client.Object) any {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return obj
	}
	return u["status"]
}
