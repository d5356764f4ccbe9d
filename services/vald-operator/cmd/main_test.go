package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	valdv1 "github.com/opsuite/suite/api/vald/v1"
	"github.com/opsuite/suite/shared/testenv"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
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

// TestRunAgainstAPIServer runs the binary's entry point, flags and environment included,
// against a real API server: a release converges, metrics and probes are served, and the
// manager stops cleanly.
func TestRunAgainstAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	env, err := testenv.Start(testenv.Options{AddToSchemes: []func(*runtime.Scheme) error{valdv1.AddToScheme}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.Stop() }()

	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: env.Config.Host, CertificateAuthorityData: env.Config.CAData}
	kc.AuthInfos["test"] = &clientcmdapi.AuthInfo{ClientCertificateData: env.Config.CertData, ClientKeyData: env.Config.KeyData, Token: env.Config.BearerToken}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "test"}
	kc.CurrentContext = "test"
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		t.Fatal(err)
	}

	metricsAddr, probeAddr := freeAddr(t), freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	logs := &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- runWith(ctx, []string{
			"--kubeconfig=" + kubeconfig, "--leader-elect=false", "--log-format=text",
			"--metrics-bind-address=" + metricsAddr, "--metrics-secure=false", "--health-probe-bind-address=" + probeAddr,
		}, func(k string) string { return map[string]string{"REQUEUE_AFTER": "1s"}[k] }, logs)
	}()

	c := env.Client
	vor := &valdv1.ValdOperatorRelease{
		ObjectMeta: metav1.ObjectMeta{Name: "smoke", Namespace: "default"},
		Spec: valdv1.ValdOperatorReleaseSpec{
			Infrastructure: []valdv1.Infrastructure{{Role: "green", Active: ptr.To(true), Clusters: []valdv1.Cluster{{Name: "a", ID: "1"}}}},
			VectorEngine:   valdv1.VectorEngine{Name: "vald", Vald: valdv1.Vald{Agent: valdv1.Agent{NGT: valdv1.NGT{Dimension: 4}}}},
		},
	}
	if err := c.Create(ctx, vor); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		got := &valdv1.ValdOperatorRelease{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(vor), got); err != nil {
			t.Fatal(err)
		}
		if got.Status.Phase == valdv1.ConditionCompleted && got.Status.State == "Ready" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("release not Completed: %+v\nlogs:\n%s", got.Status, logs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for path, want := range map[string]string{
		"http://" + metricsAddr + "/metrics": "vald_operator_reconcile_total",
		"http://" + probeAddr + "/readyz":    "ok",
		"http://" + probeAddr + "/healthz":   "ok",
	} {
		resp, err := http.Get(path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			t.Errorf("%s: %d, body without %q", path, resp.StatusCode, want)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("run: %v", err)
	}
}
