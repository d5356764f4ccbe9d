package children

import (
	"reflect"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// UpToDate reports whether live already holds everything desired would apply: its labels
// and annotations, its controller reference, and every value outside metadata and status
// (spec, data, ...). Keys others added to objects are allowed, as server-side apply
// leaves them; lists must have the same length and each element hold the desired one.
// Skipping such applies is what makes a converged controller write nothing. A field the
// API server defaults differently from a zero value in desired only costs an apply.
func UpToDate(desired, live client.Object) bool {
	for k, v := range desired.GetLabels() {
		if got, ok := live.GetLabels()[k]; !ok || got != v {
			return false
		}
	}
	for k, v := range desired.GetAnnotations() {
		if got, ok := live.GetAnnotations()[k]; !ok || got != v {
			return false
		}
	}
	want, have := metav1.GetControllerOf(desired), metav1.GetControllerOf(live)
	if (want == nil) != (have == nil) || (want != nil && want.UID != have.UID) {
		return false
	}
	d, err := runtime.DefaultUnstructuredConverter.ToUnstructured(desired)
	if err != nil {
		return false
	}
	l, err := runtime.DefaultUnstructuredConverter.ToUnstructured(live)
	if err != nil {
		return false
	}
	for k, v := range d {
		switch k {
		case "apiVersion", "kind", "metadata", "status":
			continue
		}
		if !Contains(l[k], v) {
			return false
		}
	}
	return true
}

// Contains reports whether got holds every value of want: maps may have extra keys, lists
// must be as long with each element containing want's, scalars must be equal.
func Contains(got, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return false
		}
		for k, wv := range w {
			gv, present := g[k]
			if !present || !Contains(gv, wv) {
				return false
			}
		}
		return true
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for i := range w {
			if !Contains(g[i], w[i]) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(got, want)
}
