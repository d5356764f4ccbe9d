package controller_test

import (
	"testing"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/shared/testenv"
)

// env is the real kube-apiserver and etcd every test in this package runs against. There
// is no kube-controller-manager: the tests play the StatefulSet controller by writing
// StatefulSet status, and the data plane through the Registrar seam.
var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Main(m, &env, memgraphv1.AddToScheme)
}
