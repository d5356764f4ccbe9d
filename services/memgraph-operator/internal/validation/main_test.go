// Package validation tests the memgraph.com/v1alpha1 CRD's schema, defaults and CEL rules
// against the real kube-apiserver: what is wrong is refused with a message that says what
// to change, the sample and a manifest setting every field are accepted as written.
package validation

import (
	"testing"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/shared/testenv"
)

// env is the real kube-apiserver and etcd every test in this package runs against.
var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Main(m, &env, memgraphv1.AddToScheme)
}
