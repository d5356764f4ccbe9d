package resources

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
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

// SelfSigned makes a CA (ECDSA P-256, valid CAValidity) and a node certificate it signs
// (valid CertValidity, serverAuth and clientAuth, since members are clients of each other
// on the bus and in replication), all PEM. The node certificate names the cluster's
// Service and pods (TLSDNSNames without a domain), localhost, 127.0.0.1 and ::1, plus
// dnsNames and ipAddrs. A client dialling a member by its pod IP verifies against one of
// the DNS names (tls.Config.ServerName), since pod IPs change.
func SelfSigned(cluster, namespace string, dnsNames []string, ipAddrs []net.IP, now time.Time) (caPEM, certPEM, keyPEM []byte, err error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("generating the CA key: %w", err)
	}
	caSerial, err := serialNumber()
	if err != nil {
		return nil, nil, nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          caSerial,
		Subject:               pkix.Name{CommonName: "valkey-operator CA " + namespace + "/" + cluster},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(CAValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("signing the CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("reading back the CA certificate: %w", err)
	}

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("generating the node key: %w", err)
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, nil, nil, err
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
		return nil, nil, nil, fmt.Errorf("signing the node certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("encoding the node key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
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
