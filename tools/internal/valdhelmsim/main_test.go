package valdhelmsim

import (
	"testing"

	"github.com/opsuite/suite/shared/testenv"
)

// env is a real kube-apiserver and etcd with the repository's CRDs (ValdRelease among
// them, with its status subresource).
var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }
