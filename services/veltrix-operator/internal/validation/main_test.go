// Package validation tests the veltrix.io/v1alpha1 CRD's schema, defaults and CEL rules
// against the real kube-apiserver: what is wrong is refused with a message that says what
// to change, and the product document's sample is accepted unchanged.
package validation

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	veltrixv1 "github.com/opsuite/suite/api/veltrix/v1alpha1"
	"github.com/opsuite/suite/shared/testenv"
	"k8s.io/apimachinery/pkg/runtime"
)

// env is the real kube-apiserver and etcd every test in this package runs against.
var env *testenv.Env

// TestMain installs only the VeltrixCluster CRD: this package tests that one, and another
// group's CRD being edited must not stop it.
func TestMain(m *testing.M) {
	root, err := testenv.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testenv.MainWith(m, &env, testenv.Options{
		CRDDirs:      []string{filepath.Join(root, "deploy", "crds", "veltrix.io_veltrixclusters.yaml")},
		AddToSchemes: []func(*runtime.Scheme) error{veltrixv1.AddToScheme},
	})
}
