package resources

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/opsuite/suite/services/valkey-operator/internal/valkeytest"
	"github.com/opsuite/suite/shared/testenv"
)

func parsePEM(t *testing.T, b []byte, typ string) []byte {
	t.Helper()
	block, rest := pem.Decode(b)
	if block == nil || block.Type != typ || len(rest) != 0 {
		t.Fatalf("want exactly one PEM %s block, got %q", typ, b)
	}
	return block.Bytes
}

// TestSelfSigned checks the chain with crypto/x509: the node certificate verifies
// against the CA for every Service and pod name, as a server and as a client, and the
// lifetimes and key types are as documented.
func TestSelfSigned(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	caPEM, certPEM, keyPEM, err := SelfSigned("c", "ns", TLSDNSNames("c", "ns", "cluster.local"), []net.IP{net.ParseIP("10.1.2.3"), net.ParseIP("127.0.0.1")}, now)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(parsePEM(t, caPEM, "CERTIFICATE"))
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(parsePEM(t, certPEM, "CERTIFICATE"))
	if err != nil {
		t.Fatal(err)
	}
	key, err := x509.ParsePKCS8PrivateKey(parsePEM(t, keyPEM, "PRIVATE KEY"))
	if err != nil {
		t.Fatal(err)
	}
	ecKey, ok := key.(*ecdsa.PrivateKey)
	if !ok || ecKey.Curve != elliptic.P256() {
		t.Fatalf("key %T, want ECDSA P-256", key)
	}
	if !ecKey.PublicKey.Equal(cert.PublicKey) {
		t.Fatal("the key does not belong to the certificate")
	}
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		t.Fatalf("tls.X509KeyPair: %v", err)
	}
	if !ca.IsCA || !ca.BasicConstraintsValid || ca.PublicKeyAlgorithm != x509.ECDSA || cert.IsCA {
		t.Fatalf("CA IsCA=%v, node IsCA=%v", ca.IsCA, cert.IsCA)
	}
	if d := ca.NotAfter.Sub(now); d != CAValidity {
		t.Errorf("CA valid for %s after now, want %s", d, CAValidity)
	}
	if d := cert.NotAfter.Sub(now); d != CertValidity {
		t.Errorf("node certificate valid for %s after now, want %s", d, CertValidity)
	}
	if !cert.NotBefore.Before(now) {
		t.Errorf("NotBefore %s is not before now: a peer with a slow clock would refuse it", cert.NotBefore)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	at := now.Add(time.Hour)
	for _, name := range []string{"c", "c.ns", "c.ns.svc", "c-0-1-0.c.ns.svc", "c.ns.svc.cluster.local", "c-2-0-0.c.ns.svc.cluster.local", "localhost", "127.0.0.1", "::1", "10.1.2.3"} {
		for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
			if _, err := cert.Verify(x509.VerifyOptions{DNSName: name, Roots: roots, CurrentTime: at, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
				t.Errorf("verify %s for usage %v: %v", name, usage, err)
			}
		}
	}
	for _, name := range []string{"other.ns.svc", "c.other.svc", "a.b.c.ns.svc", "10.1.2.4"} {
		if _, err := cert.Verify(x509.VerifyOptions{DNSName: name, Roots: roots, CurrentTime: at}); err == nil {
			t.Errorf("%s verifies, but the certificate should not name it", name)
		}
	}
	if _, err := cert.Verify(x509.VerifyOptions{DNSName: "c.ns.svc", Roots: roots, CurrentTime: now.Add(CertValidity + time.Hour)}); err == nil {
		t.Error("the certificate verifies after its expiry")
	}
	// Another run makes another CA: its certificate does not verify against this one.
	otherCA, _, _, err := SelfSigned("c", "ns", nil, nil, now)
	if err != nil {
		t.Fatal(err)
	}
	other := x509.NewCertPool()
	other.AppendCertsFromPEM(otherCA)
	if _, err := cert.Verify(x509.VerifyOptions{DNSName: "c.ns.svc", Roots: other, CurrentTime: at}); err == nil {
		t.Error("the certificate verifies against another CA")
	}
	// The IP list has no duplicates although 127.0.0.1 was passed again.
	if n := slices.IndexFunc(cert.IPAddresses, func(ip net.IP) bool { return ip.Equal(net.ParseIP("127.0.0.1")) }); n < 0 ||
		slices.ContainsFunc(cert.IPAddresses[n+1:], func(ip net.IP) bool { return ip.Equal(net.ParseIP("127.0.0.1")) }) {
		t.Errorf("IP SANs %v: want 127.0.0.1 exactly once", cert.IPAddresses)
	}
}

func TestNeedsRenewal(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	_, certPEM, _, err := SelfSigned("c", "ns", nil, nil, now)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		pem  []byte
		at   time.Time
		want bool
	}{
		{"fresh", certPEM, now, false},
		{"31 days left", certPEM, now.Add(CertValidity - 31*24*time.Hour), false},
		{"exactly 30 days left", certPEM, now.Add(CertValidity - RenewBefore), false},
		{"29 days left", certPEM, now.Add(CertValidity - 29*24*time.Hour), true},
		{"expired", certPEM, now.Add(CertValidity + time.Hour), true},
		{"not valid yet (clock moved back)", certPEM, now.Add(-time.Hour), true},
		{"empty", nil, now, true},
		{"garbage", []byte("not a certificate"), now, true},
		{"a key, not a certificate", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1}}), now, true},
		{"a CERTIFICATE block that does not parse", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{1, 2, 3}}), now, true},
	}
	for _, tc := range cases {
		if got := NeedsRenewal(tc.pem, tc.at); got != tc.want {
			t.Errorf("%s: NeedsRenewal = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestTLSDNSNames(t *testing.T) {
	got := TLSDNSNames("c", "ns", "example.org")
	want := []string{"c", "c.ns", "c.ns.svc", "*.c.ns.svc", "c.ns.svc.example.org", "*.c.ns.svc.example.org"}
	if !slices.Equal(got, want) {
		t.Errorf("TLSDNSNames = %v, want %v", got, want)
	}
	if got := TLSDNSNames("c", "ns", ""); len(got) != 4 {
		t.Errorf("without a domain: %v", got)
	}
}

// TestSelfSignedServesTLS starts the test server (valkeytest.Bins; Debian builds both with TLS) on the generated
// files alone, TLS port only, and a crypto/tls client that trusts the CA gets PONG; one
// that trusts another CA is refused.
func TestSelfSignedServesTLS(t *testing.T) {
	bin := valkeytest.Bins(t)
	caPEM, certPEM, keyPEM, err := SelfSigned("c", "ns", nil, nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files := map[string][]byte{TLSKeyCA: caPEM, TLSKeyCert: certPEM, TLSKeyKey: keyPEM}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	port := testenv.FreePort(t)
	cmd := exec.Command(bin.Server, "--port", "0", "--tls-port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--tls-cert-file", filepath.Join(dir, TLSKeyCert), "--tls-key-file", filepath.Join(dir, TLSKeyKey),
		"--tls-ca-cert-file", filepath.Join(dir, TLSKeyCA), "--tls-auth-clients", "optional",
		"--save", "", "--appendonly", "no", "--dir", dir, "--logfile", filepath.Join(dir, "server.log"))
	testenv.OwnGroup(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		if err := testenv.KillGroup(cmd.Process.Pid, done, 10*time.Second); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "server.log"))
			t.Logf("server log:\n%s", b)
		}
	})
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	// The server is reached by IP; the client verifies the Service name, as the
	// operator does, since pod IPs change.
	cfg := &tls.Config{RootCAs: roots, ServerName: "c.ns.svc", MinVersion: tls.VersionTLS12}
	testenv.Eventually(t, 15*time.Second, "PONG over TLS", func() (bool, string) {
		select {
		case <-done:
			t.Fatalf("%s exited at start", bin.Name)
		default:
		}
		c, err := dialRESP(addr, cfg)
		if err != nil {
			return false, err.Error()
		}
		defer c.Close()
		v, err := c.do("PING")
		return v == "PONG", errString(v, err)
	})
	// With a client certificate from the same CA too (what peers present on the bus).
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	withCert := cfg.Clone()
	withCert.Certificates = []tls.Certificate{pair}
	c, err := dialRESP(addr, withCert)
	if err != nil {
		t.Fatalf("dial with a client certificate: %v", err)
	}
	if v, err := c.do("PING"); v != "PONG" {
		t.Fatalf("PING with a client certificate = %v, %v", v, err)
	}
	c.Close()

	otherCA, _, _, err := SelfSigned("c", "ns", nil, nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	otherRoots := x509.NewCertPool()
	otherRoots.AppendCertsFromPEM(otherCA)
	if c, err := dialRESP(addr, &tls.Config{RootCAs: otherRoots, ServerName: "c.ns.svc", MinVersion: tls.VersionTLS12}); err == nil {
		c.Close()
		t.Fatal("a client trusting another CA completed the handshake")
	}
}

// TestIssueCertUnderKeptCA: a certificate issued later under the same CA verifies with
// the CA peers already trust, so a renewal need not change the trust root; a CA that is
// not one, or a key that is not its own, is refused.
func TestIssueCertUnderKeptCA(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	caPEM, caKeyPEM, err := NewCA("c", "ns", now)
	if err != nil {
		t.Fatal(err)
	}
	later := now.Add(CertValidity - RenewBefore)
	certPEM, keyPEM, err := IssueCert(caPEM, caKeyPEM, "c", "ns", nil, nil, later)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(parsePEM(t, certPEM, "CERTIFICATE"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	if _, err := cert.Verify(x509.VerifyOptions{DNSName: "c-1-0-0.c.ns.svc", Roots: roots, CurrentTime: later.Add(time.Hour)}); err != nil {
		t.Fatalf("renewed certificate under the kept CA: %v", err)
	}
	if NeedsRenewal(certPEM, later) {
		t.Error("a certificate issued now needs renewal now")
	}

	otherCA, otherKey, err := NewCA("c", "ns", now)
	if err != nil {
		t.Fatal(err)
	}
	_, leafKey, err := IssueCert(caPEM, caKeyPEM, "c", "ns", nil, nil, now)
	if err != nil {
		t.Fatal(err)
	}
	for name, in := range map[string][2][]byte{
		"key of another CA":        {caPEM, otherKey},
		"a node certificate as CA": {certPEM, keyPEM},
		"garbage certificate":      {[]byte("x"), caKeyPEM},
		"garbage key":              {otherCA, []byte("x")},
		"a leaf key as CA key":     {caPEM, leafKey},
	} {
		if _, _, err := IssueCert(in[0], in[1], "c", "ns", nil, nil, now); err == nil {
			t.Errorf("%s: issued a certificate", name)
		}
	}
}
