package main

import (
	"context"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/opsuite/suite/services/node-agent/internal/certs"
	"k8s.io/client-go/kubernetes"
)

// certSource serves the agent's certificate: files read again on change, or the signer's.
type certSource interface {
	GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error)
}

// runSigner is `node-agent signer`: it approves and signs the agents' certificate requests
// (signer nodeagent.opsuite.io/serving) with the CA key only it holds, for the agents'
// ServiceAccount on the node each names.
func runSigner(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("node-agent signer", flag.ContinueOnError)
	fs.SetOutput(stderr)
	caCert := fs.String("ca-cert", "", "PEM CA certificate the agents' certificates chain to (required)")
	caKey := fs.String("ca-key", "", "PEM CA private key (required; only the signer holds it)")
	sa := fs.String("agent-service-account", "", "the agents' ServiceAccount, <namespace>/<name> (required)")
	name := fs.String("name", "", "the agents' server name without \"*.\": each certificate names <node>.<name> (required)")
	maxTTL := fs.Duration("max-ttl", 7*24*time.Hour, "longest certificate lifetime granted")
	interval := fs.Duration("interval", 2*time.Second, "how often pending requests are looked for")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig for the apiserver (default: in-cluster)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ns, saName, ok := strings.Cut(*sa, "/")
	if *caCert == "" || *caKey == "" || *name == "" || !ok || ns == "" || saName == "" {
		return errors.New("--ca-cert, --ca-key, --agent-service-account <namespace>/<name> and --name are required")
	}
	pair, err := tls.LoadX509KeyPair(*caCert, *caKey)
	if err != nil {
		return fmt.Errorf("loading the CA: %w", err)
	}
	ca, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return fmt.Errorf("--ca-cert: %w", err)
	}
	if !ca.IsCA {
		return errors.New("--ca-cert is not a CA certificate")
	}
	key, ok := pair.PrivateKey.(crypto.Signer)
	if !ok {
		return errors.New("--ca-key cannot sign")
	}
	cfg, err := restConfig(*kubeconfig)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	s := &certs.Signer{Client: client, CA: ca, Key: key, ServiceAccount: "system:serviceaccount:" + ns + ":" + saName, Name: *name, MaxTTL: *maxTTL}
	log.Info("Signing", "signer", certs.SignerName, "serviceAccount", *sa, "names", "<node>."+*name)
	s.Run(ctx, *interval, func(err error) { log.Error("Signing failed", "err", err) })
	return nil
}
