package testenv_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/opsuite/suite/shared/testenv"
)

// handshake runs one mutual-TLS handshake over a loopback listener: the server presents
// cert and requires a client certificate from serverTrusts; the client presents cert and
// verifies the server against clientTrusts under serverName. It returns the client's error.
func handshake(t *testing.T, cert tls.Certificate, serverTrusts, clientTrusts *x509.CertPool, serverName string) error {
	t.Helper()
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{cert}, ClientCAs: serverTrusts,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		_ = c.(*tls.Conn).Handshake()
		_, _ = c.Read(make([]byte, 1)) // until the client hangs up
		_ = c.Close()
	}()
	c, err := tls.Dial("tcp", l.Addr().String(), &tls.Config{
		Certificates: []tls.Certificate{cert}, RootCAs: clientTrusts, ServerName: serverName, MinVersion: tls.VersionTLS12,
	})
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	// TLS 1.3 reports a refused client certificate on the first read, not in Dial.
	_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if _, err := c.Read(make([]byte, 1)); err != nil && !isTimeout(err) {
		return err
	}
	return nil
}

func TestCASignsCertificatesBothEndsAccept(t *testing.T) {
	ca, other := testenv.NewCA(t, "test-ca"), testenv.NewCA(t, "other-ca")
	crt, key := ca.Issue(t, "db.example", "127.0.0.1")
	cert, err := tls.X509KeyPair(crt, key)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"db.example", "127.0.0.1"} {
		if err := handshake(t, cert, ca.Pool(), ca.Pool(), name); err != nil {
			t.Errorf("mutual TLS as %s under the signing CA: %v", name, err)
		}
	}
	if err := handshake(t, cert, ca.Pool(), ca.Pool(), "other.example"); err == nil {
		t.Error("a name the certificate does not carry was accepted")
	}
	if err := handshake(t, cert, ca.Pool(), other.Pool(), "db.example"); err == nil {
		t.Error("a client trusting another CA accepted the server")
	}
	if err := handshake(t, cert, other.Pool(), ca.Pool(), "db.example"); err == nil {
		t.Error("a server trusting another CA accepted the client")
	}
	if _, _, err := ca.Sign(); err == nil {
		t.Error("Sign with no host made a certificate")
	}
}

func TestCAWriteFilesAsATLSSecretVolume(t *testing.T) {
	ca := testenv.NewCA(t, "test-ca")
	dir := t.TempDir()
	first := ca.WriteFiles(t, dir, "127.0.0.1")
	firstCert, err := os.ReadFile(first.Cert)
	if err != nil {
		t.Fatal(err)
	}
	// A renewal rewrites the same paths in place.
	f := ca.WriteFiles(t, dir, "127.0.0.1")
	if f != first || f.CA != dir+"/ca.crt" || f.Cert != dir+"/tls.crt" || f.Key != dir+"/tls.key" {
		t.Fatalf("files %+v then %+v, want ca.crt, tls.crt and tls.key in %s", first, f, dir)
	}
	for _, p := range []string{f.CA, f.Cert, f.Key} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", p, st.Mode().Perm())
		}
	}
	if got, _ := os.ReadFile(f.CA); !bytes.Equal(got, ca.PEM) {
		t.Error("ca.crt is not the CA's PEM")
	}
	if got, _ := os.ReadFile(f.Cert); bytes.Equal(got, firstCert) {
		t.Error("the second WriteFiles left the first certificate in place")
	}
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cert.Leaf.Verify(x509.VerifyOptions{Roots: ca.Pool(), DNSName: "127.0.0.1"}); err != nil {
		t.Errorf("the written certificate does not verify against the CA: %v", err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// IssueUntil bounds a certificate's validity (a past bound makes an expired one, which a
// client refuses); KeyPair is Issue ready to serve; KeyPEM holds the CA's own key.
func TestCAValidityKeyPairAndKey(t *testing.T) {
	ca := testenv.NewCA(t, "test-ca")
	until := time.Now().Add(time.Hour).Truncate(time.Second)
	crt, key := ca.IssueUntil(t, until, "short.example")
	short, err := tls.X509KeyPair(crt, key)
	if err != nil {
		t.Fatal(err)
	}
	if !short.Leaf.NotAfter.Equal(until) {
		t.Fatalf("NotAfter %s, want %s", short.Leaf.NotAfter, until)
	}
	crt, key = ca.IssueUntil(t, time.Now().Add(-time.Minute), "expired.example")
	expired, err := tls.X509KeyPair(crt, key)
	if err != nil {
		t.Fatal(err)
	}
	var invalid x509.CertificateInvalidError
	if err := handshake(t, expired, ca.Pool(), ca.Pool(), "expired.example"); !errors.As(err, &invalid) || invalid.Reason != x509.Expired {
		t.Fatalf("handshake with an expired certificate: %v, want it refused as expired", err)
	}
	if err := handshake(t, ca.KeyPair(t, "ok.example"), ca.Pool(), ca.Pool(), "ok.example"); err != nil {
		t.Fatalf("handshake with a KeyPair certificate: %v", err)
	}
	pair, err := tls.X509KeyPair(ca.PEM, ca.KeyPEM)
	if err != nil || !pair.Leaf.IsCA {
		t.Fatalf("the CA's PEM and KeyPEM do not pair: %v", err)
	}
}
