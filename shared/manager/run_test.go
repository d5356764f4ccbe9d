package manager_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"flag"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/opsuite/suite/shared/manager"
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

// writeCert writes a self-signed serving certificate for 127.0.0.1 as tls.crt and tls.key
// into a new directory, as a mounted kubernetes.io/tls Secret looks, and returns both.
func writeCert(t *testing.T) (dir string, cert *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "demo-operator-metrics"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, err = x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return dir, cert
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
	dir, cert := writeCert(t)
	roots := x509.NewCertPool()
	roots.AddCert(cert)
	addr := testenv.FreeAddr(t)
	runOperator(t, manager.Operator{Name: "cert-operator"}, "--leader-elect=false", "--metrics-bind-address", addr,
		"--health-probe-bind-address", testenv.FreeAddr(t), "--metrics-cert-dir", dir)
	// Verified against the mounted certificate alone: a scraper can pin it.
	if got := servedCert(t, addr, roots); !bytes.Equal(got.Raw, cert.Raw) {
		t.Fatalf("metrics served %q, not the mounted certificate", got.Subject)
	}

	// Without --metrics-cert-dir: a certificate generated at start, not ours.
	addr = testenv.FreeAddr(t)
	runOperator(t, manager.Operator{Name: "cert-operator"}, "--leader-elect=false", "--metrics-bind-address", addr,
		"--health-probe-bind-address", testenv.FreeAddr(t))
	if got := servedCert(t, addr, nil); bytes.Equal(got.Raw, cert.Raw) {
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
