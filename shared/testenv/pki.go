package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a throwaway certificate authority for tests: ECDSA P-256 keys made in the test
// process (nothing is committed), valid from an hour ago for a day. Every product's test
// TLS (Bolt, the node agent, Valkey) is signed by one of these.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	// PEM is the CA certificate, what a Secret's ca.crt holds.
	PEM []byte
	// KeyPEM is the CA's private key, what a signer that issues with this CA reads.
	KeyPEM []byte
}

// TLSFiles are the paths of a CA and a certificate with its key, named as the keys of a
// kubernetes.io/tls Secret with its CA (ca.crt, tls.crt, tls.key), which is how the
// products and the operators mount them.
type TLSFiles struct {
	CA, Cert, Key string
}

// MakeCA makes a CA named name; NewCA is the same for a test. It serves callers with no
// test at hand, such as a PKI shared by every test of a process.
func MakeCA(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("testenv: signing CA %q: %w", name, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})}, nil
}

// NewCA makes a CA named name and fails t if it cannot.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	ca, err := MakeCA(name)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// Pool holds the CA alone: what a client that trusts it verifies against.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// Sign makes a key and a certificate for hosts (DNS names or IP addresses; the first is also
// the subject) signed by the CA, both in PEM: what a kubernetes.io/tls Secret's tls.crt and
// tls.key hold. The certificate serves either end of a connection (server and client
// authentication): Valkey's cluster bus verifies the peer with the same certificate it
// serves with.
func (ca *CA) Sign(hosts ...string) (certPEM, keyPEM []byte, err error) {
	return ca.SignUntil(time.Now().Add(24*time.Hour), hosts...)
}

// SignUntil is Sign for a certificate valid until notAfter (from an hour before now, or
// before notAfter if that is earlier): a past notAfter makes an expired one.
func (ca *CA) SignUntil(notAfter time.Time, hosts ...string) (certPEM, keyPEM []byte, err error) {
	if len(hosts) == 0 {
		return nil, nil, errors.New("testenv: a certificate needs at least one host")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := newSerial()
	if err != nil {
		return nil, nil, err
	}
	notBefore := time.Now().Add(-time.Hour)
	if notAfter.Before(notBefore) {
		notBefore = notAfter.Add(-time.Hour)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: hosts[0]},
		NotBefore: notBefore, NotAfter: notAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("testenv: signing a certificate for %v: %w", hosts, err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), nil
}

// Issue is Sign for a test, which it fails on error.
func (ca *CA) Issue(t testing.TB, hosts ...string) (certPEM, keyPEM []byte) {
	t.Helper()
	return ca.IssueUntil(t, time.Now().Add(24*time.Hour), hosts...)
}

// IssueUntil is SignUntil for a test, which it fails on error.
func (ca *CA) IssueUntil(t testing.TB, notAfter time.Time, hosts ...string) (certPEM, keyPEM []byte) {
	t.Helper()
	certPEM, keyPEM, err := ca.SignUntil(notAfter, hosts...)
	if err != nil {
		t.Fatal(err)
	}
	return certPEM, keyPEM
}

// KeyPair is Issue as a tls.Certificate, for a server or client configured in the test.
func (ca *CA) KeyPair(t testing.TB, hosts ...string) tls.Certificate {
	t.Helper()
	c, err := tls.X509KeyPair(ca.Issue(t, hosts...))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// WriteFiles issues a certificate for hosts and writes it, its key and the CA into dir
// (replacing what is there, as the kubelet renews a Secret volume).
func (ca *CA) WriteFiles(t testing.TB, dir string, hosts ...string) TLSFiles {
	t.Helper()
	crt, key := ca.Issue(t, hosts...)
	f, err := WriteTLSFiles(dir, ca.PEM, crt, key)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// WriteTLSFiles writes a CA, a certificate and its key (PEM) into dir as ca.crt, tls.crt
// and tls.key, mode 0600.
func WriteTLSFiles(dir string, caPEM, certPEM, keyPEM []byte) (TLSFiles, error) {
	f := TLSFiles{CA: filepath.Join(dir, "ca.crt"), Cert: filepath.Join(dir, "tls.crt"), Key: filepath.Join(dir, "tls.key")}
	for _, w := range []struct {
		path string
		data []byte
	}{{f.CA, caPEM}, {f.Cert, certPEM}, {f.Key, keyPEM}} {
		if err := os.WriteFile(w.path, w.data, 0o600); err != nil {
			return TLSFiles{}, err
		}
	}
	return f, nil
}

// newSerial is a random serial number: two certificates of one test never share one.
func newSerial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
}
