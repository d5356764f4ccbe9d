// Tests of the ValkeyCluster controller against the real kube-apiserver and real server
// clusters (valkeytest.Bins). There is no kubelet or node controller here: the test plays
// them (a fleet), starting one server per ValkeyNode, restarting it when the node's spec
// changes (a pod rolled with its volume) and reporting the node ready.
package cluster_test

import (
	"testing"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	"github.com/opsuite/suite/shared/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Main(m, &env, valkeyv1.AddToScheme)
}
