// Package nodeagenttest has what tests of the node agent and its clients share: a throwaway
// CA and serving certificate, made by shared/testenv's test PKI.
package nodeagenttest

import (
	"crypto/tls"
	"crypto/x509"
	"testing"

	"github.com/opsuite/suite/shared/testenv"
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
	ca, err := testenv.MakeCA(serverName + "-ca")
	if err != nil {
		return nil, err
	}
	certPEM, keyPEM, err := ca.Sign(serverName, "127.0.0.1")
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	return &PKI{ServerName: serverName, Pool: ca.Pool(), Cert: cert, CAPEM: ca.PEM, CertPEM: certPEM, KeyPEM: keyPEM}, nil
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
type Files = testenv.TLSFiles

// WriteFiles writes the CA, the certificate and its key as PEM into dir, named as the keys of a
// kubernetes.io/tls Secret with its CA (ca.crt, tls.crt, tls.key), which is how the agent and
// the operators mount them.
func (p *PKI) WriteFiles(dir string) (Files, error) {
	return testenv.WriteTLSFiles(dir, p.CAPEM, p.CertPEM, p.KeyPEM)
}
