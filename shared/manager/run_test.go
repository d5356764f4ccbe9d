package manager_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/opsuite/suite/shared/manager"
	"github.com/opsuite/suite/shared/nodeagent/nodeagenttest"
	"github.com/opsuite/suite/shared/testenv"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmanager "sigs.k8s.io/controller-runtime/pkg/manager"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.MainWithWidgets(m, &env) }

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
		"--kube-api-qps", "--metrics-cert-dir", "--metrics-cert-name", "--metrics-cert-key", "--graceful-shutdown-timeout", "--own-flag"} {
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

// running is an operator binary's Run in the background against the test's API server.
type running struct {
	cancel context.CancelFunc
	done   chan error
}

func runOperator(t *testing.T, op manager.Operator, args ...string) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan error, 1)}
	args = append([]string{"--kubeconfig", env.Kubeconfig(t), "--leader-election-namespace", "default", "--log-format", "text"}, args...)
	go func() { r.done <- manager.Run(ctx, op, args, os.Stderr) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-r.done:
			if err != nil {
				t.Logf("manager stopped with %v", err)
			}
		case <-time.After(60 * time.Second):
			t.Error("manager did not stop after its context ended")
		}
	})
	return r
}

// stop ends the manager and returns what Run returned.
func (r *running) stop(t *testing.T, within time.Duration) error {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		r.done <- err // for the cleanup
		return err
	case <-time.After(within):
		t.Fatalf("manager did not stop within %s after its context ended", within)
		return nil
	}
}

// TestRunServesProbesAndTakesTheLease starts an operator binary's manager against the real
// API server: it must answer /healthz and /readyz and hold its own leader-election Lease.
func TestRunServesProbesAndTakesTheLease(t *testing.T) {
	probe := testenv.FreeAddr(t)
	r := runOperator(t, manager.Operator{Name: "demo-operator"}, "--metrics-bind-address", testenv.FreeAddr(t), "--health-probe-bind-address", probe)
	for _, path := range []string{"/healthz", "/readyz"} {
		testenv.WaitFor(t, path+" answers 200", func() bool {
			resp, err := http.Get("http://" + probe + path)
			if err != nil {
				return false
			}
			_ = resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		})
	}
	testenv.WaitFor(t, "the lease is held", func() bool {
		var lease coordinationv1.Lease
		err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: "demo-operator.opsuite.io"}, &lease)
		return err == nil && lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != ""
	})
	if err := r.stop(t, 30*time.Second); err != nil {
		t.Fatalf("manager stopped with %v", err)
	}
}

// writeCert writes a serving certificate for 127.0.0.1, signed by a throwaway CA, as
// tls.crt and tls.key into a new directory (as a mounted kubernetes.io/tls Secret looks),
// and returns the directory, the CA pool and the certificate.
func writeCert(t *testing.T) (dir string, roots *x509.CertPool, cert []byte) {
	t.Helper()
	pki, err := nodeagenttest.NewPKI("demo-operator-metrics")
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), pki.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), pki.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir, pki.Pool, pki.Cert.Certificate[0]
}

// servedCert completes a TLS handshake with addr, verifying against roots when given,
// and returns the certificate the server presented.
func servedCert(t *testing.T, addr string, roots *x509.CertPool) *x509.Certificate {
	t.Helper()
	var served *x509.Certificate
	testenv.Eventually(t, testenv.DefaultTimeout, "a TLS handshake with the metrics endpoint "+addr, func() (bool, string) {
		cfg := &tls.Config{InsecureSkipVerify: roots == nil, RootCAs: roots, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
		conn, err := tls.Dial("tcp", addr, cfg)
		if err != nil {
			return false, err.Error()
		}
		defer func() { _ = conn.Close() }()
		served = conn.ConnectionState().PeerCertificates[0]
		return true, ""
	})
	return served
}

func TestMetricsServeTheMountedCertificate(t *testing.T) {
	dir, roots, cert := writeCert(t)
	addr := testenv.FreeAddr(t)
	runOperator(t, manager.Operator{Name: "cert-operator"}, "--leader-elect=false", "--metrics-bind-address", addr,
		"--health-probe-bind-address", testenv.FreeAddr(t), "--metrics-cert-dir", dir)
	// Verified against the Secret's CA: a scraper can check it.
	if got := servedCert(t, addr, roots); !bytes.Equal(got.Raw, cert) {
		t.Fatalf("metrics served %q, not the mounted certificate", got.Subject)
	}

	// Without --metrics-cert-dir: a certificate generated at start, not ours.
	addr = testenv.FreeAddr(t)
	runOperator(t, manager.Operator{Name: "cert-operator"}, "--leader-elect=false", "--metrics-bind-address", addr,
		"--health-probe-bind-address", testenv.FreeAddr(t))
	if got := servedCert(t, addr, nil); bytes.Equal(got.Raw, cert) {
		t.Fatal("the self-signed default served the mounted certificate")
	}
}

func TestCacheSelectorsLimitWhatTheOperatorSees(t *testing.T) {
	ctx := context.Background()
	ns := testenv.NewNamespace(t, env.Client, "cache-")
	for name, lbls := range map[string]map[string]string{"mine": {"app": "mine"}, "theirs": {"app": "theirs"}, "unlabelled": nil} {
		if err := env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls}}); err != nil {
			t.Fatal(err)
		}
	}
	mine := labels.SelectorFromSet(labels.Set{"app": "mine"})
	for _, op := range []manager.Operator{
		{Name: "cache-operator", CacheByObject: map[client.Object]cache.ByObject{&corev1.ConfigMap{}: {Label: mine}}},
		{Name: "cache-operator", CacheLabelSelector: mine},
	} {
		seen := make(chan []string, 1)
		op.Setup = func(mgr ctrl.Manager, _ logr.Logger) error {
			return mgr.Add(ctrlmanager.RunnableFunc(func(ctx context.Context) error {
				list := &corev1.ConfigMapList{}
				if err := mgr.GetClient().List(ctx, list, client.InNamespace(ns)); err != nil {
					return err
				}
				var names []string
				for _, cm := range list.Items {
					names = append(names, cm.Name)
				}
				seen <- names
				return nil
			}))
		}
		runOperator(t, op, "--leader-elect=false", "--metrics-bind-address", "0", "--health-probe-bind-address", testenv.FreeAddr(t))
		select {
		case names := <-seen:
			if !slices.Equal(names, []string{"mine"}) {
				t.Errorf("with CacheByObject %v, CacheLabelSelector %v: the cache holds ConfigMaps %v, want only [mine]", op.CacheByObject, op.CacheLabelSelector, names)
			}
		case <-time.After(60 * time.Second):
			t.Fatal("the operator's runnable never listed ConfigMaps")
		}
	}
}

func TestGracefulShutdownTimeoutBoundsTheStop(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	op := manager.Operator{Name: "stubborn-operator", Setup: func(mgr ctrl.Manager, _ logr.Logger) error {
		// A runnable that ignores its context, as a hung reconcile would.
		return mgr.Add(ctrlmanager.RunnableFunc(func(ctx context.Context) error {
			<-ctx.Done()
			<-release
			return nil
		}))
	}}
	probe := testenv.FreeAddr(t)
	r := runOperator(t, op, "--leader-elect=false", "--metrics-bind-address", "0", "--health-probe-bind-address", probe,
		"--graceful-shutdown-timeout", "1s")
	testenv.WaitFor(t, "the manager is ready", func() bool {
		resp, err := http.Get("http://" + probe + "/readyz")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	began := time.Now()
	err := r.stop(t, 20*time.Second)
	if err == nil || !strings.Contains(err.Error(), "grace period of 1s") {
		t.Fatalf("stop returned %v, want the 1s grace period to run out", err)
	}
	if d := time.Since(began); d > 10*time.Second {
		t.Errorf("stopping took %s with a 1s grace period", d)
	}
}
