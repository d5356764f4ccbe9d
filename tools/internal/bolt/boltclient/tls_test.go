package boltclient

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/opsuite/suite/shared/testenv"
	"github.com/opsuite/suite/tools/internal/bolt"
)

// serveTLS starts the Bolt server behind bolt.TLSListener with a certificate for
// 127.0.0.1 signed by ca, written to dir.
func serveTLS(t *testing.T, ca *testenv.CA, dir string) (addr string, certs *bolt.CertFiles) {
	t.Helper()
	files := ca.WriteFiles(t, dir, "127.0.0.1", "localhost")
	certs, err := bolt.LoadCertFiles(files.Cert, files.Key)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var log []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = bolt.Serve(ctx, bolt.TLSListener(ln, certs), func(net.Addr) bolt.Conn { return conn{mu: &mu, seen: &log, block: make(chan struct{})} })
	}()
	t.Cleanup(func() { cancel(); <-done })
	return ln.Addr().String(), certs
}

// servedCert is the fingerprint of the certificate a new TLS connection gets.
func servedCert(t *testing.T, addr string) [32]byte {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // reading the served certificate only
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	return sha256.Sum256(c.ConnectionState().PeerCertificates[0].Raw)
}

// TestTLS: a server with a certificate speaks Bolt over TLS to a client trusting its CA,
// refuses plain Bolt and a client trusting another CA, and serves a reloaded certificate
// to new connections (a failed reload keeps the old one), as RELOAD BOLT_SERVER TLS does.
func TestTLS(t *testing.T) {
	ca := testenv.NewCA(t, "bolt-ca")
	dir := t.TempDir()
	addr, certs := serveTLS(t, ca, dir)

	c := dial(t, addr, Options{TLS: &tls.Config{RootCAs: ca.Pool()}, Timeout: 5 * time.Second})
	res, err := c.Run(t.Context(), "SHOW INSTANCES", nil)
	if err != nil || len(res.Records) != 2 {
		t.Fatalf("SHOW INSTANCES over TLS: %v %v", res, err)
	}

	if _, err := Dial(t.Context(), addr, Options{Timeout: 2 * time.Second}); err == nil {
		t.Error("plain Bolt to a TLS server succeeded, want it refused")
	}
	other := testenv.NewCA(t, "other-ca")
	_, err = Dial(t.Context(), addr, Options{TLS: &tls.Config{RootCAs: other.Pool()}, Timeout: 2 * time.Second})
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		t.Errorf("dial trusting another CA: %v, want x509.UnknownAuthorityError", err)
	}

	before := servedCert(t, addr)
	ca.WriteFiles(t, dir, "127.0.0.1")
	if err := certs.Reload(); err != nil {
		t.Fatal(err)
	}
	after := servedCert(t, addr)
	if after == before {
		t.Error("a reloaded certificate is not served to new connections")
	}
	if _, err := c.Run(t.Context(), "SHOW INSTANCES", nil); err != nil {
		t.Errorf("an open connection broke on reload: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := certs.Reload(); err == nil {
		t.Error("reloading a broken certificate succeeded")
	}
	if servedCert(t, addr) != after {
		t.Error("a failed reload replaced the certificate in use")
	}
}
