package controller

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"sync"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/services/memgraph-operator/internal/memgraph"
	"github.com/opsuite/suite/services/memgraph-operator/internal/resources"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
)

// msgTLSVerification is Converged's message when the coordinators' Bolt TLS fails the
// operator's verification (stable: the cause is in the operator's log).
const msgTLSVerification = "The coordinators' Bolt TLS is not verified by ca.crt of spec.tls.bolt's Secret: the certificate must be signed by that CA and name the pods' DNS names, and every pod must run with it (the operator's log has the handshake error)"

// tlsError is a spec.tls Secret the pass could not use; its message is stable (names,
// never values) and says what to change.
type tlsError struct{ msg string }

func (e tlsError) Error() string { return e.msg }

// boltCA reads spec.tls.bolt's Secret on every pass, through the API reader like
// spec.auth's (RBAC get only, nothing cached or watched), and returns its ca.crt: a
// renewed certificate or a new CA is used by the next dial without restarting the
// operator. nil without spec.tls. A Secret that is missing, lacks a key, or holds a
// certificate that ca.crt does not verify for the pods' DNS names is a tlsError (a
// condition, not an error loop); any other read failure is returned.
func (p *pass) boltCA(ctx context.Context) ([]byte, error) {
	if p.c.Spec.TLS == nil {
		return nil, nil
	}
	name := p.c.Spec.TLS.Bolt.SecretName
	var s corev1.Secret
	if err := p.ctl.secrets.Get(ctx, types.NamespacedName{Namespace: p.c.Namespace, Name: name}, &s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, tlsError{fmt.Sprintf("Secret %q named by spec.tls.bolt does not exist: create it with keys %q, %q and %q (a cert-manager Certificate from a CA issuer writes all three)", name, resources.TLSCertKey, resources.TLSKeyKey, resources.TLSCAKey)}
		}
		return nil, fmt.Errorf("read TLS Secret %s: %w", name, err)
	}
	return checkBoltSecret(p.c, name, s.Data)
}

// checkBoltSecret checks what the pods and the operator will read from the Secret and
// returns ca.crt. The names checked are every declared pod's (the operator dials the
// coordinators and the MAIN); the message gives the first that fails and the wildcards
// that cover them all.
func checkBoltSecret(c *memgraphv1.MemgraphCluster, name string, data map[string][]byte) ([]byte, error) {
	for _, k := range []string{resources.TLSCertKey, resources.TLSKeyKey, resources.TLSCAKey} {
		if len(data[k]) == 0 {
			return nil, tlsError{fmt.Sprintf("Secret %q named by spec.tls.bolt has no non-empty key %q: add it (tls.crt and tls.key are the pods' certificate and key, ca.crt the CA the operator verifies them with)", name, k)}
		}
	}
	pair, err := tls.X509KeyPair(data[resources.TLSCertKey], data[resources.TLSKeyKey])
	if err != nil {
		return nil, tlsError{fmt.Sprintf("Secret %q named by spec.tls.bolt: %q and %q are not a PEM certificate and its private key; Memgraph would not start with them", name, resources.TLSCertKey, resources.TLSKeyKey)}
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(data[resources.TLSCAKey]) {
		return nil, tlsError{fmt.Sprintf("Secret %q named by spec.tls.bolt: %q holds no PEM certificate: put the CA that signed %q there", name, resources.TLSCAKey, resources.TLSCertKey)}
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, tlsError{fmt.Sprintf("Secret %q named by spec.tls.bolt: %q is not an X.509 certificate", name, resources.TLSCertKey)}
	}
	inter := x509.NewCertPool()
	for _, der := range pair.Certificate[1:] {
		if ic, err := x509.ParseCertificate(der); err == nil {
			inter.AddCert(ic)
		}
	}
	for _, host := range podNames(c) {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, DNSName: host}); err == nil {
			continue
		}
		return nil, tlsError{fmt.Sprintf("Secret %q named by spec.tls.bolt: %q is not verified by %q for the pod names the operator dials, such as %q: sign it with that CA, keep it unexpired, and name *.%s.%s.svc.%s and *.%s.%s.svc.%s",
			name, resources.TLSCertKey, resources.TLSCAKey, host,
			resources.HeadlessServiceName(c.Name, resources.RoleCoordinator), c.Namespace, resources.ClusterDomain(c),
			resources.HeadlessServiceName(c.Name, resources.RoleData), c.Namespace, resources.ClusterDomain(c))}
	}
	return data[resources.TLSCAKey], nil
}

// podNames are the DNS names the operator dials: every declared pod of both roles.
func podNames(c *memgraphv1.MemgraphCluster) []string {
	var out []string
	for i := range resources.Coordinators(c) {
		out = append(out, resources.PodFQDN(c, resources.RoleCoordinator, resources.FirstCoordinatorOrdinal+i))
	}
	for i := range resources.DataInstances(c) {
		out = append(out, resources.PodFQDN(c, resources.RoleData, i))
	}
	return out
}

type boltCAKey struct{}

// WithBoltCA carries the pass's CA to the Registrar (and the credentials check) without
// widening their signatures: nil means plain Bolt.
func WithBoltCA(ctx context.Context, ca []byte) context.Context {
	return context.WithValue(ctx, boltCAKey{}, ca)
}

// BoltCA is the CA (PEM) a Registrar must verify the cluster's Bolt TLS with in this
// pass, read from spec.tls.bolt's Secret; nil when the cluster has no TLS.
func BoltCA(ctx context.Context) []byte {
	ca, _ := ctx.Value(boltCAKey{}).([]byte)
	return ca
}

// tlsRecorder is a Dialer that remembers whether any dial failed its TLS handshake, so a
// pass that reached no coordinator can say TLS was why.
// The registration dials the coordinators concurrently.
type tlsRecorder struct {
	memgraph.Dialer
	mu  sync.Mutex
	err error
}

func (d *tlsRecorder) Dial(ctx context.Context, addr string) (memgraph.Session, error) {
	s, err := d.Dialer.Dial(ctx, addr)
	if memgraph.IsTLS(err) {
		d.mu.Lock()
		d.err = err
		d.mu.Unlock()
	}
	return s, err
}

// failure is the last TLS handshake error seen, nil when there was none.
func (d *tlsRecorder) failure() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.err
}
