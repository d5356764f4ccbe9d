package controller

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"strings"
	"sync"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/services/memgraph-operator/internal/memgraph"
	"github.com/opsuite/suite/services/memgraph-operator/internal/planner"
	"github.com/opsuite/suite/services/memgraph-operator/internal/resources"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// msgTLSVerification is Converged's message when the coordinators' Bolt TLS fails the
// operator's verification (stable: the cause is in the operator's log).
const msgTLSVerification = "The coordinators' Bolt TLS is not verified by ca.crt of spec.tls.bolt's Secret: the certificate must be signed by that CA and name the pods' DNS names, and every pod must run with it (the operator's log has the handshake error)"

// tlsError is a spec.tls Secret the pass could not use; its message is stable (names,
// never values) and says what to change.
type tlsError struct{ msg string }

func (e tlsError) Error() string { return e.msg }

// BoltTLS is what one pass verifies the cluster's Bolt TLS with and compares it to.
type BoltTLS struct {
	// CA is ca.crt (PEM); nil when the cluster has no TLS.
	CA []byte
	// Cert is tls.crt's leaf (DER): what every member should serve.
	Cert []byte
}

// boltTLS reads spec.tls.bolt's Secret on every pass, through the API reader like
// spec.auth's (RBAC get only, nothing cached or watched), and returns its CA and leaf: a
// renewed certificate or a new CA is used by the next pass without restarting the
// operator. Zero without spec.tls. A Secret that is missing, lacks a key, or holds a
// certificate that ca.crt does not verify for the pods' DNS names is a tlsError (a
// condition, not an error loop); any other read failure is returned.
func (p *pass) boltTLS(ctx context.Context) (BoltTLS, error) {
	if p.c.Spec.TLS == nil {
		return BoltTLS{}, nil
	}
	name := p.c.Spec.TLS.Bolt.SecretName
	var s corev1.Secret
	if err := p.ctl.secrets.Get(ctx, types.NamespacedName{Namespace: p.c.Namespace, Name: name}, &s); err != nil {
		if apierrors.IsNotFound(err) {
			return BoltTLS{}, tlsError{fmt.Sprintf("Secret %q named by spec.tls.bolt does not exist: create it with keys %q, %q and %q (a cert-manager Certificate from a CA issuer writes all three)", name, resources.TLSCertKey, resources.TLSKeyKey, resources.TLSCAKey)}
		}
		return BoltTLS{}, fmt.Errorf("read TLS Secret %s: %w", name, err)
	}
	return checkBoltSecret(p.c, name, s.Data)
}

// checkBoltSecret checks what the pods and the operator will read from the Secret and
// returns its CA and leaf. The names checked are every declared pod's (the operator dials the
// coordinators and the MAIN); the message gives the first that fails and the wildcards
// that cover them all.
func checkBoltSecret(c *memgraphv1.MemgraphCluster, name string, data map[string][]byte) (BoltTLS, error) {
	for _, k := range []string{resources.TLSCertKey, resources.TLSKeyKey, resources.TLSCAKey} {
		if len(data[k]) == 0 {
			return BoltTLS{}, tlsError{fmt.Sprintf("Secret %q named by spec.tls.bolt has no non-empty key %q: add it (tls.crt and tls.key are the pods' certificate and key, ca.crt the CA the operator verifies them with)", name, k)}
		}
	}
	pair, err := tls.X509KeyPair(data[resources.TLSCertKey], data[resources.TLSKeyKey])
	if err != nil {
		return BoltTLS{}, tlsError{fmt.Sprintf("Secret %q named by spec.tls.bolt: %q and %q are not a PEM certificate and its private key; Memgraph would not start with them", name, resources.TLSCertKey, resources.TLSKeyKey)}
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(data[resources.TLSCAKey]) {
		return BoltTLS{}, tlsError{fmt.Sprintf("Secret %q named by spec.tls.bolt: %q holds no PEM certificate: put the CA that signed %q there", name, resources.TLSCAKey, resources.TLSCertKey)}
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return BoltTLS{}, tlsError{fmt.Sprintf("Secret %q named by spec.tls.bolt: %q is not an X.509 certificate", name, resources.TLSCertKey)}
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
		return BoltTLS{}, tlsError{fmt.Sprintf("Secret %q named by spec.tls.bolt: %q is not verified by %q for the pod names the operator dials, such as %q: sign it with that CA, keep it unexpired, and name *.%s.%s.svc.%s and *.%s.%s.svc.%s",
			name, resources.TLSCertKey, resources.TLSCAKey, host,
			resources.HeadlessServiceName(c.Name, resources.RoleCoordinator), c.Namespace, resources.ClusterDomain(c),
			resources.HeadlessServiceName(c.Name, resources.RoleData), c.Namespace, resources.ClusterDomain(c))}
	}
	return BoltTLS{CA: data[resources.TLSCAKey], Cert: leaf.Raw}, nil
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

type boltTLSKey struct{}

// WithBoltTLS carries the pass's Bolt TLS to the Registrar (and the credentials check)
// without widening their signatures: zero means plain Bolt.
func WithBoltTLS(ctx context.Context, t BoltTLS) context.Context {
	return context.WithValue(ctx, boltTLSKey{}, t)
}

// WithBoltCA is WithBoltTLS with the CA alone (no certificate to compare members with).
func WithBoltCA(ctx context.Context, ca []byte) context.Context {
	return WithBoltTLS(ctx, BoltTLS{CA: ca})
}

// BoltTLSOf is the pass's Bolt TLS, read from spec.tls.bolt's Secret; zero without TLS.
func BoltTLSOf(ctx context.Context) BoltTLS {
	t, _ := ctx.Value(boltTLSKey{}).(BoltTLS)
	return t
}

// BoltCA is the CA (PEM) a Registrar must verify the cluster's Bolt TLS with in this
// pass; nil when the cluster has no TLS.
func BoltCA(ctx context.Context) []byte { return BoltTLSOf(ctx).CA }

// reloadRenewed asks every member that serves another certificate than the Secret's
// tls.crt to read its files again (RELOAD BOLT_SERVER TLS): Memgraph does not notice a
// renewed file by itself, and the kubelet rewrites the mounted Secret within its sync
// period. A member whose files are not rewritten yet still serves the old certificate
// after the reload and is asked again at a later pass. A member whose certificate the
// CA does not verify is not reloaded (the operator would send its credentials to an
// unverified server); like any failure here it is logged: the old certificate serves on.
// It returns what it ran, one entry per member.
func reloadRenewed(ctx context.Context, o memgraph.Options, want planner.Desired, cert []byte) []string {
	type member struct{ name, addr string }
	var members []member
	for _, c := range want.Coordinators {
		members = append(members, member{memgraph.CoordinatorName(c.ID), c.BoltServer})
	}
	for _, d := range want.Data {
		members = append(members, member{d.Name, d.BoltServer})
	}
	logger := log.FromContext(ctx)
	var ran []string
	for _, m := range members {
		served, err := memgraph.ServedCertificate(ctx, m.addr, o)
		if err != nil {
			logger.Error(err, "Could not read the served Bolt certificate", "member", m.name)
			continue
		}
		if bytes.Equal(served, cert) {
			continue
		}
		s, err := memgraph.NewDialer(o).Dial(ctx, m.addr)
		if err == nil {
			err = s.Exec(ctx, memgraph.ReloadBoltTLSQuery)
			_ = s.Close(ctx)
		}
		if err != nil {
			logger.Error(err, "Could not reload the Bolt certificate", "member", m.name)
			continue
		}
		logger.Info("Reloaded the Bolt certificate: the member served another one than the Secret holds", "member", m.name)
		ran = append(ran, memgraph.ReloadBoltTLSQuery+" on "+m.name)
	}
	return ran
}

// reloadedTLS says whether a pass's commands reloaded a member's Bolt certificate.
func reloadedTLS(executed []string) bool {
	for _, e := range executed {
		if strings.HasPrefix(e, memgraph.ReloadBoltTLSQuery+" on ") {
			return true
		}
	}
	return false
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
