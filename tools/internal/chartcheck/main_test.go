package chartcheck

import (
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/opsuite/suite/shared/testenv"
)

// The control plane starts on first use, so tests that only render never wait for it.
var cluster struct {
	once sync.Once
	env  *testenv.Env
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if cluster.env != nil {
		if err := cluster.env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "chartcheck: stopping the control plane:", err)
		}
	}
	os.Exit(code)
}

// controlPlane returns the real kube-apiserver (shared/testenv) and a kubeconfig for helm.
func controlPlane(t *testing.T) (*testenv.Env, string) {
	t.Helper()
	cluster.once.Do(func() { cluster.env, cluster.err = testenv.Start(testenv.Options{}) })
	if cluster.err != nil {
		t.Fatalf("control plane: %v", cluster.err)
	}
	return cluster.env, cluster.env.Kubeconfig(t)
}
