package testenv

import (
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// WidgetGVK is the kind testdata/widgets.yaml defines: a namespaced CRD with a CEL rule
// and a status subresource (state, observedGeneration, conditions), for tests of code that
// knows no product kind.
var WidgetGVK = schema.GroupVersionKind{Group: "test.opsuite.io", Version: "v1", Kind: "Widget"}

// WidgetOptions installs the Widget CRD alone.
func WidgetOptions() (Options, error) {
	root, err := RepoRoot()
	if err != nil {
		return Options{}, err
	}
	return Options{CRDDirs: []string{filepath.Join(root, "shared", "testenv", "testdata")}}, nil
}

// NewWidget returns an empty Widget; namespace and name may be empty (for Get targets).
func NewWidget(namespace, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(WidgetGVK)
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}
