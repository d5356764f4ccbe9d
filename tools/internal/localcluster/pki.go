package localcluster

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// clientIdentity is a client certificate the control plane is given.
type clientIdentity struct {
	file   string
	user   string
	groups []string
}

var clientIdentities = []clientIdentity{
	{file: "admin", user: "kubernetes-admin", groups: []string{"system:masters"}},
	{file: "kube-controller-manager", user: "system:kube-controller-manager"},
	{file: "kube-scheduler", user: "system:kube-scheduler"},
	// kwok and the process runner act for every node, as a kubelet would for its own.
	{file: "kwok", user: "system:kwok-controller", groups: []string{"system:masters"}},
	{file: "runner", user: "system:localcluster-runner", groups: []string{"system:masters"}},
}

// ensurePKI creates the cluster CA, the apiserver serving certificate, one client
// certificate per component and the service-account signing key, unless they exist.
func ensurePKI(dir, kubernetesServiceIP string) error {
	if _, err := os.Stat(filepath.Join(dir, "sa.key")); err == nil {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now().Add(-time.Hour)
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "localcluster-ca"},
		NotBefore:             now,
		NotAfter:              now.AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return err
	}
	if err := writeCertKey(dir, "ca", caDER, caKey); err != nil {
		return err
	}

	serial := int64(2)
	issue := func(name string, tmpl *x509.Certificate) error {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		tmpl.SerialNumber = big.NewInt(serial)
		serial++
		tmpl.NotBefore = now
		tmpl.NotAfter = now.AddDate(10, 0, 0)
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return err
		}
		return writeCertKey(dir, name, der, key)
	}
	err = issue("apiserver", &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(kubernetesServiceIP)},
		DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc." + clusterDomain},
	})
	if err != nil {
		return err
	}
	for _, id := range clientIdentities {
		err := issue(id.file, &x509.Certificate{
			Subject:     pkix.Name{CommonName: id.user, Organization: id.groups},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		})
		if err != nil {
			return err
		}
	}
	// kube-apiserver signs service-account tokens with this key (RS256).
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return err
	}
	if err := writePEM(filepath.Join(dir, "sa.pub"), "PUBLIC KEY", pub); err != nil {
		return err
	}
	return writeKey(filepath.Join(dir, "sa.key"), saKey)
}

func writeCertKey(dir, name string, der []byte, key crypto.Signer) error {
	if err := writePEM(filepath.Join(dir, name+".crt"), "CERTIFICATE", der); err != nil {
		return err
	}
	return writeKey(filepath.Join(dir, name+".key"), key)
}

func writeKey(path string, key crypto.Signer) error {
	switch k := key.(type) {
	case *ecdsa.PrivateKey:
		der, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			return err
		}
		return writePEM(path, "EC PRIVATE KEY", der)
	case *rsa.PrivateKey:
		return writePEM(path, "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(k))
	}
	return errors.New("unsupported key type")
}

func writePEM(path, typ string, der []byte) error {
	data := pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
