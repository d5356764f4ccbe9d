package resources

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"slices"
	"time"
)

// Lifetimes of the certificates SelfSigned makes; NeedsRenewal asks for a new pair
// RenewBefore ahead of the node certificate's expiry.
const (
	CAValidity   = 10 * 365 * 24 * time.Hour
	CertValidity = 365 * 24 * time.Hour
	RenewBefore  = 30 * 24 * time.Hour
)

// clockSkew backdates NotBefore so a peer whose clock is a little behind accepts a
// certificate made just now.
const clockSkew = 5 * time.Minute

// TLSDNSNames are the names clients and peers reach cluster C in namespace N by: the
// headless Service (C, C.N, C.N.svc, C.N.svc.<domain>) and every pod behind it
// (*.C.N.svc, *.C.N.svc.<domain>). SelfSigned always includes the ones without the
// domain; pass these for the rest.
func TLSDNSNames(cluster, namespace, clusterDomain string) []string {
	svc := ServiceName(cluster) + "." + namespace + ".svc"
	names := []string{ServiceName(cluster), ServiceName(cluster) + "." + namespace, svc, "*." + svc}
	if clusterDomain != "" {
		names = append(names, svc+"."+clusterDomain, "*."+svc+"."+clusterDomain)
	}
	return names
}

// SelfSigned makes a CA (NewCA) and a node certificate it signs (IssueCert), all PEM.
// The CA's key is not returned: a renewal makes a new CA with the certificate. To renew
// the certificate under the same CA, keep the CA key from NewCA and call IssueCert.
func SelfSigned(cluster, namespace string, dnsNames []string, ipAddrs []net.IP, now time.Time) (caPEM, certPEM, keyPEM []byte, err error) {
	caPEM, caKeyPEM, err := NewCA(cluster, namespace, now)
	if err != nil {
		return nil, nil, nil, err
	}
	certPEM, keyPEM, err = IssueCert(caPEM, caKeyPEM, cluster, namespace, dnsNames, ipAddrs, now)
	if err != nil {
		return nil, nil, nil, err
	}
	return caPEM, certPEM, keyPEM, nil
}

// NewCA makes a CA for cluster: ECDSA P-256, valid CAValidity, signing certificates only
// (path length 0). The key is PKCS#8 PEM.
func NewCA(cluster, namespace string, now time.Time) (caPEM, caKeyPEM []byte, err error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating the CA key: %w", err)
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "valkey-operator CA " + namespace + "/" + cluster},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(CAValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("signing the CA certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding the CA key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
}

// IssueCert signs a node certificate with the CA (from NewCA): ECDSA P-256, valid
// CertValidity, serverAuth and clientAuth (members are clients of each other on the bus
// and in replication). It names the cluster's Service and pods (TLSDNSNames without a
// domain), localhost, 127.0.0.1 and ::1, plus dnsNames and ipAddrs. A client dialling a
// member by its pod IP verifies one of the DNS names (tls.Config.ServerName), since pod
// IPs change.
func IssueCert(caPEM, caKeyPEM []byte, cluster, namespace string, dnsNames []string, ipAddrs []net.IP, now time.Time) (certPEM, keyPEM []byte, err error) {
	ca, caKey, err := parseCA(caPEM, caKeyPEM)
	if err != nil {
		return nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating the node key: %w", err)
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, nil, err
	}
	names := append(TLSDNSNames(cluster, namespace, ""), "localhost")
	names = append(names, dnsNames...)
	slices.Sort(names)
	names = slices.Compact(names)
	ips := []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	for _, ip := range ipAddrs {
		if !slices.ContainsFunc(ips, ip.Equal) {
			ips = append(ips, ip)
		}
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: ServiceName(cluster) + "." + namespace + ".svc"},
		NotBefore:    now.Add(-clockSkew),
		NotAfter:     now.Add(CertValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:     names,
		IPAddresses:  ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("signing the node certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding the node key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
}

func parseCA(caPEM, caKeyPEM []byte) (*x509.Certificate, crypto.Signer, error) {
	block, _ := pem.Decode(caPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, nil, errors.New("the CA certificate is not a PEM CERTIFICATE")
	}
	ca, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the CA certificate: %w", err)
	}
	if !ca.IsCA {
		return nil, nil, errors.New("the CA certificate is not a CA")
	}
	kb, _ := pem.Decode(caKeyPEM)
	if kb == nil {
		return nil, nil, errors.New("the CA key is not PEM")
	}
	key, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the CA key: %w", err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, nil, fmt.Errorf("the CA key is a %T, not a signing key", key)
	}
	pub, ok := signer.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(ca.PublicKey) {
		return nil, nil, errors.New("the CA key does not belong to the CA certificate")
	}
	return ca, signer, nil
}

// NeedsRenewal reports whether the first certificate in certPEM expires within
// RenewBefore of now, is not valid yet, or cannot be read: in each case the operator
// makes a new one.
func NeedsRenewal(certPEM []byte, now time.Time) bool {
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return true
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return true
	}
	return now.Before(cert.NotBefore) || cert.NotAfter.Sub(now) < RenewBefore
}

func serialNumber() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("generating a serial number: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil // never zero
}
