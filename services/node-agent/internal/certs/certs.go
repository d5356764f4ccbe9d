// Package certs gives each agent a certificate naming its own node, through the
// certificates.k8s.io CSR API and a signer that alone holds the agents' CA key: the agent
// makes its key, asks for "<node>.<name>" with its ServiceAccount token bound to its pod, and
// the signer issues only when the requester is the agent's ServiceAccount and the node its
// token is bound to (the apiserver's authentication.kubernetes.io/node-name) is the node the
// name claims. Root on one node holds only that node's key and can obtain only that node's
// name.
package certs

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"slices"
	"sync/atomic"
	"time"

	"github.com/opsuite/suite/shared/nodeagent/contract"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// SignerName is the CSR signer of the agents' serving certificates.
const SignerName = "nodeagent.opsuite.io/serving"

// NodeNameExtra is the user-info extra the apiserver sets from a token bound to a pod: the
// node the pod runs on.
const NodeNameExtra = "authentication.kubernetes.io/node-name"

// Request makes a key and asks the signer for a certificate naming node under name (the
// chart's server name without "*."), valid for ttl; it waits until the certificate is issued,
// the request denied or failed, or ctx ends.
func Request(ctx context.Context, client kubernetes.Interface, node, name string, ttl time.Duration) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	dns := contract.NodeServerName(contract.PerNodeServerNamePrefix+name, node)
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: dns}, DNSNames: []string{dns},
	}, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	secs := int32(ttl / time.Second)
	csr, err := client.CertificatesV1().CertificateSigningRequests().Create(ctx, &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "node-agent-" + node + "-"},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:           pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName:        SignerName,
			ExpirationSeconds: &secs,
			Usages:            []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("creating the CertificateSigningRequest: %w", err)
	}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		got, err := client.CertificatesV1().CertificateSigningRequests().Get(ctx, csr.Name, metav1.GetOptions{})
		if err == nil {
			for _, c := range got.Status.Conditions {
				if c.Type == certificatesv1.CertificateDenied || c.Type == certificatesv1.CertificateFailed {
					return tls.Certificate{}, fmt.Errorf("CertificateSigningRequest %s %s: %s", csr.Name, c.Type, c.Message)
				}
			}
			if len(got.Status.Certificate) > 0 {
				return keyPair(got.Status.Certificate, key)
			}
		}
		select {
		case <-ctx.Done():
			return tls.Certificate{}, fmt.Errorf("waiting for CertificateSigningRequest %s: %w", csr.Name, ctx.Err())
		case <-tick.C:
		}
	}
}

func keyPair(chainPEM []byte, key crypto.Signer) (tls.Certificate, error) {
	var out tls.Certificate
	for rest := chainPEM; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		out.Certificate = append(out.Certificate, b.Bytes)
	}
	if len(out.Certificate) == 0 {
		return out, errors.New("the issued certificate is not PEM")
	}
	leaf, err := x509.ParseCertificate(out.Certificate[0])
	if err != nil {
		return out, err
	}
	out.PrivateKey, out.Leaf = key, leaf
	return out, nil
}

// Signer approves and signs the agents' requests; it alone holds the CA key.
type Signer struct {
	Client kubernetes.Interface
	CA     *x509.Certificate
	Key    crypto.Signer
	// ServiceAccount is the agents' user name, system:serviceaccount:<namespace>:<name>.
	ServiceAccount string
	// Name is the chart's server name without "*.": certificates name "<node>.<Name>".
	Name string
	// MaxTTL bounds what a request may ask for. Default 7 days.
	MaxTTL time.Duration
}

// Check decides a request: nil when it is the agent of the node it names asking for that
// node's name alone.
func (s *Signer) Check(csr *certificatesv1.CertificateSigningRequest) (*x509.CertificateRequest, error) {
	if csr.Spec.SignerName != SignerName {
		return nil, fmt.Errorf("signer %s is not %s", csr.Spec.SignerName, SignerName)
	}
	if csr.Spec.Username != s.ServiceAccount {
		return nil, fmt.Errorf("requested by %s, not the agents' ServiceAccount", csr.Spec.Username)
	}
	nodes := csr.Spec.Extra[NodeNameExtra]
	if len(nodes) != 1 || nodes[0] == "" {
		return nil, errors.New("the requester's token is not bound to a pod on a node")
	}
	b, _ := pem.Decode(csr.Spec.Request)
	if b == nil || b.Type != "CERTIFICATE REQUEST" {
		return nil, errors.New("the request is not a PEM CERTIFICATE REQUEST")
	}
	req, err := x509.ParseCertificateRequest(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parsing the request: %w", err)
	}
	if err := req.CheckSignature(); err != nil {
		return nil, fmt.Errorf("the request's signature: %w", err)
	}
	want := nodes[0] + "." + s.Name
	if !slices.Equal(req.DNSNames, []string{want}) || len(req.IPAddresses)+len(req.EmailAddresses)+len(req.URIs) > 0 {
		return nil, fmt.Errorf("the request must name %s alone, as the node its requester runs on", want)
	}
	for _, u := range csr.Spec.Usages {
		if u != certificatesv1.UsageDigitalSignature && u != certificatesv1.UsageKeyEncipherment && u != certificatesv1.UsageServerAuth {
			return nil, fmt.Errorf("usage %q is not for serving", u)
		}
	}
	return req, nil
}

func pending(csr *certificatesv1.CertificateSigningRequest) bool {
	return len(csr.Status.Certificate) == 0 && !slices.ContainsFunc(csr.Status.Conditions, func(c certificatesv1.CertificateSigningRequestCondition) bool {
		return c.Type == certificatesv1.CertificateDenied || c.Type == certificatesv1.CertificateFailed
	})
}

// Handle denies, or approves and signs, one request of SignerName; others are left alone.
func (s *Signer) Handle(ctx context.Context, csr *certificatesv1.CertificateSigningRequest) error {
	if csr.Spec.SignerName != SignerName || !pending(csr) {
		return nil
	}
	api := s.Client.CertificatesV1().CertificateSigningRequests()
	req, err := s.Check(csr)
	if err != nil {
		csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
			Type: certificatesv1.CertificateDenied, Status: corev1.ConditionTrue, Reason: "NotThisNodesAgent", Message: err.Error(),
		})
		_, err := api.UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{})
		return err
	}
	if !slices.ContainsFunc(csr.Status.Conditions, func(c certificatesv1.CertificateSigningRequestCondition) bool {
		return c.Type == certificatesv1.CertificateApproved
	}) {
		csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
			Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "ThisNodesAgent",
			Message: "the agent's ServiceAccount, on the node the name claims",
		})
		if csr, err = api.UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	ttl := s.MaxTTL
	if ttl <= 0 {
		ttl = 7 * 24 * time.Hour
	}
	if e := csr.Spec.ExpirationSeconds; e != nil && time.Duration(*e)*time.Second < ttl {
		ttl = time.Duration(*e) * time.Second
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return err
	}
	now := time.Now()
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: req.DNSNames[0]}, DNSNames: req.DNSNames,
		NotBefore: now.Add(-5 * time.Minute), NotAfter: now.Add(ttl),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, s.CA, req.PublicKey, s.Key)
	if err != nil {
		return fmt.Errorf("signing: %w", err)
	}
	csr.Status.Certificate = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	_, err = api.UpdateStatus(ctx, csr, metav1.UpdateOptions{})
	return err
}

// Run handles pending requests of SignerName every interval until ctx ends.
func (s *Signer) Run(ctx context.Context, interval time.Duration, onErr func(error)) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		list, err := s.Client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{
			FieldSelector: "spec.signerName=" + SignerName,
		})
		if err == nil {
			for i := range list.Items {
				if err := s.Handle(ctx, &list.Items[i]); err != nil && onErr != nil {
					onErr(fmt.Errorf("CertificateSigningRequest %s: %w", list.Items[i].Name, err))
				}
			}
		} else if onErr != nil && ctx.Err() == nil {
			onErr(err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// Renewer serves the agent's certificate from the signer and renews it before it expires.
type Renewer struct {
	Client kubernetes.Interface
	Node   string
	// Name is the chart's server name without "*.".
	Name string
	// TTL is the lifetime asked for (the CSR API's minimum is 10 minutes).
	TTL time.Duration
	// RenewAt is when to renew a certificate; default: two thirds into its lifetime.
	RenewAt func(leaf *x509.Certificate) time.Time
	// Retry is the wait after a failed renewal. Default 10s.
	Retry time.Duration
	// Log receives renewals and failures; default: discarded.
	Log *slog.Logger

	cur atomic.Pointer[tls.Certificate]
}

// Start gets the first certificate, waiting for it as long as ctx allows.
func (r *Renewer) Start(ctx context.Context) error {
	cert, err := Request(ctx, r.Client, r.Node, r.Name, r.TTL)
	if err != nil {
		return err
	}
	r.cur.Store(&cert)
	return nil
}

// GetCertificate is for tls.Config.
func (r *Renewer) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if c := r.cur.Load(); c != nil {
		return c, nil
	}
	return nil, errors.New("no certificate yet")
}

// Certificate is the certificate served now (nil before Start).
func (r *Renewer) Certificate() *tls.Certificate { return r.cur.Load() }

// Run renews the certificate until ctx ends; a failed renewal keeps the current one in
// service and is retried.
func (r *Renewer) Run(ctx context.Context) {
	log := r.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	retry := r.Retry
	if retry <= 0 {
		retry = 10 * time.Second
	}
	for {
		leaf := r.cur.Load().Leaf
		at := leaf.NotBefore.Add(leaf.NotAfter.Sub(leaf.NotBefore) * 2 / 3)
		if r.RenewAt != nil {
			at = r.RenewAt(leaf)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(at)):
		}
		for {
			cert, err := Request(ctx, r.Client, r.Node, r.Name, r.TTL)
			if err == nil {
				r.cur.Store(&cert)
				log.Info("Serving a renewed certificate", "dnsNames", cert.Leaf.DNSNames, "notAfter", cert.Leaf.NotAfter)
				break
			}
			log.Error("Renewing the serving certificate failed; the current one stays in service", "err", err, "notAfter", leaf.NotAfter)
			select {
			case <-ctx.Done():
				return
			case <-time.After(retry):
			}
		}
	}
}
