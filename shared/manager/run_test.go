package manager_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opsuite/suite/shared/manager"
	"github.com/opsuite/suite/shared/testenv"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func TestRunHelpListsEveryFlag(t *testing.T) {
	var out bytes.Buffer
	op := manager.Operator{Name: "demo-operator", AddFlags: func(fs *flag.FlagSet) {
		fs.String("own-flag", "", "An operator's own flag.")
	}}
	if err := manager.Run(context.Background(), op, []string{"--help"}, &out); err != nil {
		t.Fatalf("--help returned %v", err)
	}
	for _, f := range []string{"--kubeconfig", "--metrics-bind-address", "--health-probe-bind-address", "--leader-elect",
		"--leader-election-id", "--leader-election-namespace", "--namespaces", "--log-level", "--log-format",
		"--kube-api-qps", "--own-flag"} {
		if !strings.Contains(out.String(), strings.TrimPrefix(f, "-")) {
			t.Errorf("--help does not document %s", f)
		}
	}
}

func TestRunRejectsBadOptionsBeforeStarting(t *testing.T) {
	op := manager.Operator{Name: "demo-operator", Validate: func() error { return fmt.Errorf("own option is wrong") }}
	err := manager.Run(context.Background(), op, []string{"--log-format=xml"}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "--log-format") || !strings.Contains(err.Error(), "own option is wrong") {
		t.Fatalf("want both problems reported, got %v", err)
	}
	if err := manager.Run(context.Background(), manager.Operator{Name: "x"}, []string{"stray"}, &bytes.Buffer{}); err == nil {
		t.Fatal("a stray argument was accepted")
	}
}

// TestRunServesProbesAndTakesTheLease starts an operator binary's manager against the real
// API server: it must answer /healthz and /readyz and hold its own leader-election Lease.
func TestRunServesProbesAndTakesTheLease(t *testing.T) {
	env, err := testenv.Start(testenv.Options{CRDDirs: []string{filepath.Join("..", "testenv", "testdata")}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: env.Config.Host, CertificateAuthorityData: env.Config.CAData}
	kc.AuthInfos["a"] = &clientcmdapi.AuthInfo{ClientCertificateData: env.Config.CertData, ClientKeyData: env.Config.KeyData}
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "a"}
	kc.CurrentContext = "c"
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		t.Fatal(err)
	}
	probe := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- manager.Run(ctx, manager.Operator{Name: "demo-operator"}, []string{"--kubeconfig", kubeconfig,
			"--metrics-bind-address", freeAddr(t), "--health-probe-bind-address", probe,
			"--leader-election-namespace", "default", "--log-format", "text"}, os.Stderr)
	}()
	for _, path := range []string{"/healthz", "/readyz"} {
		waitFor(t, path+" answers 200", func() bool {
			resp, err := http.Get("http://" + probe + path)
			if err != nil {
				return false
			}
			_ = resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		})
	}
	waitFor(t, "the lease is held", func() bool {
		var lease coordinationv1.Lease
		err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: "demo-operator.opsuite.io"}, &lease)
		return err == nil && lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != ""
	})
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("manager stopped with %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("manager did not stop after its context ended")
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
