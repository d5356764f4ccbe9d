// Package nodeagenttest has what tests of the node agent and its clients share: a throwaway
// CA and serving certificate.
package nodeagenttest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// PKI is a CA and a serving certificate it signed for one name (and 127.0.0.1).
type PKI struct {
	// ServerName is the name the certificate carries.
	ServerName string
	// Pool holds the CA.
	Pool *x509.CertPool
	// Cert serves TLS.
	Cert tls.Certificate
	// CAPEM, CertPEM and KeyPEM are the same in PEM, for files and ConfigMaps.
	CAPEM, CertPEM, KeyPEM []byte
}

// NewPKI makes a CA valid for a day and a certificate for serverName.
func NewPKI(serverName string) (*PKI, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: serverName + "-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("signing the CA: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: serverName},
		DNSNames: []string{serverName}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("signing the certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return &PKI{
		ServerName: serverName, Pool: pool,
		Cert:    tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key},
		CAPEM:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// MustPKI is NewPKI for a test, which it fails on error.
func MustPKI(t testing.TB, serverName string) *PKI {
	t.Helper()
	p, err := NewPKI(serverName)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Files are the paths WriteFiles wrote.
type Files struct {
	CA, Cert, Key string
}

// WriteFiles writes the CA, the certificate and its key as PEM into dir, named as the keys of a
// kubernetes.io/tls Secret with its CA (ca.crt, tls.crt, tls.key), which is how the agent and
// the operators mount them.
func (p *PKI) WriteFiles(dir string) (Files, error) {
	f := Files{CA: filepath.Join(dir, "ca.crt"), Cert: filepath.Join(dir, "tls.crt"), Key: filepath.Join(dir, "tls.key")}
	for path, data := range map[string][]byte{f.CA: p.CAPEM, f.Cert: p.CertPEM, f.Key: p.KeyPEM} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return Files{}, err
		}
	}
	return f, nil
}
