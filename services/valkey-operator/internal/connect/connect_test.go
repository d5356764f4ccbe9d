package connect

import (
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/opsuite/suite/services/valkey-operator/internal/resources"
)

// serve accepts TLS connections with the given certificate and completes the handshake.
func serve(t *testing.T, certPEM, keyPEM []byte) string {
	t.Helper()
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake()
			_ = c.Close()
		}
	}()
	return l.Addr().String()
}

// TestClientTLS: a member's certificate is trusted by its cluster's CA although it does
// not name the IP it is dialled at, and refused when another CA signed it.
func TestClientTLS(t *testing.T) {
	now := time.Now()
	ca, cert, key, err := resources.SelfSigned("c", "ns", resources.TLSDNSNames("c", "ns", "cluster.local"), nil, now)
	if err != nil {
		t.Fatal(err)
	}
	otherCA, _, _, err := resources.SelfSigned("other", "ns", nil, nil, now)
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, cert, key)
	dial := func(caPEM []byte) error {
		cfg, err := ClientTLS(caPEM)
		if err != nil {
			return err
		}
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
		if err != nil {
			return err
		}
		return c.Close()
	}
	if err := dial(ca); err != nil {
		t.Errorf("the cluster's CA refused its member: %v", err)
	}
	if err := dial(otherCA); err == nil {
		t.Error("a certificate from another CA was trusted")
	}
	if _, err := ClientTLS([]byte("not a certificate")); err == nil {
		t.Error("a CA without PEM was accepted")
	}
}
