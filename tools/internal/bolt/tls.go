package bolt

import (
	"crypto/tls"
	"fmt"
	"net"
	"sync/atomic"
)

// CertFiles is a server certificate read from a PEM certificate (chain) file and a PEM
// key file, as Memgraph's --bolt-cert-file and --bolt-key-file name them. Memgraph reads
// them at start and again on RELOAD BOLT_SERVER TLS: Reload does that, and a failed
// reload keeps the certificate in use, as Memgraph does.
type CertFiles struct {
	certFile, keyFile string
	cur               atomic.Pointer[tls.Certificate]
}

// LoadCertFiles reads both files; an unreadable or mismatched pair is an error.
func LoadCertFiles(certFile, keyFile string) (*CertFiles, error) {
	c := &CertFiles{certFile: certFile, keyFile: keyFile}
	if err := c.Reload(); err != nil {
		return nil, err
	}
	return c, nil
}

// Reload reads the files again; connections opened afterwards get the new certificate,
// open ones keep theirs.
func (c *CertFiles) Reload() error {
	cert, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		return fmt.Errorf("bolt TLS certificate %s / key %s: %w", c.certFile, c.keyFile, err)
	}
	c.cur.Store(&cert)
	return nil
}

// TLSConfig serves the current certificate. Memgraph's Bolt TLS is one-way: it never
// asks the client for a certificate.
func (c *CertFiles) TLSConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return c.cur.Load(), nil
		},
	}
}

// TLSListener wraps ln so that every connection Serve accepts speaks TLS first. A client
// that sends plain Bolt fails the TLS handshake and is dropped (Serve's handshake timeout
// bounds a silent one), which is how Memgraph refuses plain Bolt once it has a certificate.
func TLSListener(ln net.Listener, c *CertFiles) net.Listener {
	return tls.NewListener(ln, c.TLSConfig())
}
