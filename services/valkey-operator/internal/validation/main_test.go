// Package validation tests the valkey.io/v1alpha1 CRDs' schema and CEL rules against the
// real kube-apiserver: what is wrong is refused with a message that says what to change,
// and manifests written for valkey-io/valkey-operator are accepted unchanged.
package validation

import (
	"testing"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	"github.com/opsuite/suite/shared/testenv"
)

// env is the real kube-apiserver and etcd every test in this package runs against.
var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Main(m, &env, valkeyv1.AddToScheme)
}
