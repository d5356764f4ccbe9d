package chartcheck

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/opsuite/suite/shared/testenv"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// The control plane starts on first use, so tests that only render never wait for it.
var cluster struct {
	once       sync.Once
	env        *testenv.Env
	kubeconfig string
	err        error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if cluster.env != nil {
		if err := cluster.env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "chartcheck: stopping the control plane:", err)
		}
		_ = os.RemoveAll(filepath.Dir(cluster.kubeconfig))
	}
	os.Exit(code)
}

// controlPlane returns the real kube-apiserver (shared/testenv) and a kubeconfig for helm.
func controlPlane(t *testing.T) (*testenv.Env, string) {
	t.Helper()
	cluster.once.Do(func() {
		env, err := testenv.Start(testenv.Options{})
		if err != nil {
			cluster.err = err
			return
		}
		cluster.env = env
		dir, err := os.MkdirTemp("", "chartcheck-kubeconfig-")
		if err != nil {
			cluster.err = err
			return
		}
		cfg := env.Config
		kc := clientcmdapi.NewConfig()
		kc.Clusters["test"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
		kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
		kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "admin"}
		kc.CurrentContext = "test"
		cluster.kubeconfig = filepath.Join(dir, "kubeconfig")
		cluster.err = clientcmd.WriteToFile(*kc, cluster.kubeconfig)
	})
	if cluster.err != nil {
		t.Fatalf("control plane: %v", cluster.err)
	}
	return cluster.env, cluster.kubeconfig
}
