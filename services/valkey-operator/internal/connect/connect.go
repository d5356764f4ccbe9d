// Package connect finds how the operator logs in to a cluster's members: as its own ACL
// user, with the password in the cluster's internal Secret, over TLS verified against the
// cluster's CA when the cluster uses TLS.
package connect

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"

	"github.com/opsuite/suite/services/valkey-operator/internal/resources"
	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Options reads the credentials of the operator's user in cluster's members and, when
// tlsSecret names the cluster's certificate Secret, the CA that signs the members'
// certificates.
func Options(ctx context.Context, r client.Reader, namespace, cluster, tlsSecret string) (valkey.Options, error) {
	var s corev1.Secret
	key := client.ObjectKey{Namespace: namespace, Name: resources.InternalSecretName(cluster)}
	if err := r.Get(ctx, key, &s); err != nil {
		return valkey.Options{}, fmt.Errorf("reading the operator's password from Secret %s: %w", key, err)
	}
	pw := string(s.Data[resources.SecretKeyOperatorPassword])
	if pw == "" {
		return valkey.Options{}, fmt.Errorf("secret %s has no %s", key, resources.SecretKeyOperatorPassword)
	}
	o := valkey.Options{Username: resources.OperatorUser, Password: pw}
	if tlsSecret == "" {
		return o, nil
	}
	var t corev1.Secret
	key = client.ObjectKey{Namespace: namespace, Name: tlsSecret}
	if err := r.Get(ctx, key, &t); err != nil {
		return valkey.Options{}, fmt.Errorf("reading the cluster's CA from Secret %s: %w", key, err)
	}
	cfg, err := ClientTLS(t.Data[resources.TLSKeyCA])
	if err != nil {
		return valkey.Options{}, fmt.Errorf("secret %s: %w", key, err)
	}
	o.TLS = cfg
	return o, nil
}

// ClientTLS trusts the members whose certificate chains to caPEM. Members are dialled by
// pod IP, which certificates do not name (pods come and go); like the members verifying
// each other, the operator checks the chain, not the name.
func ClientTLS(caPEM []byte) (*tls.Config, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("no PEM certificate in %s", resources.TLSKeyCA)
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		// The chain is verified below instead of by name.
		InsecureSkipVerify: true, //nolint:gosec // verified in VerifyPeerCertificate against the cluster's CA
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			if len(raw) == 0 {
				return errors.New("the member sent no certificate")
			}
			certs := make([]*x509.Certificate, len(raw))
			for i, b := range raw {
				c, err := x509.ParseCertificate(b)
				if err != nil {
					return err
				}
				certs[i] = c
			}
			inter := x509.NewCertPool()
			for _, c := range certs[1:] {
				inter.AddCert(c)
			}
			_, err := certs[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
			return err
		},
	}, nil
}
