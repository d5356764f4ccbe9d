package metricsexporter

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"
)

// Command is the sidecar's subcommand of the operator binary.
const Command = "metrics-exporter"

// DefaultPort is memgraph/prometheus-exporter's port, which the sidecar keeps.
const DefaultPort = 9115

// maxDocument bounds what is read of Memgraph's answer (its document is a few KiB).
const maxDocument = 4 << 20

// Exporter serves GET /metrics: it reads Source, Memgraph's metrics endpoint, once per
// scrape and answers its numbers as Prometheus text. When Memgraph does not answer, the
// scrape fails (502, the reason in the body), so the target's up is 0 and Prometheus shows
// why; nothing is cached.
type Exporter struct {
	Source   string
	Instance string
	Timeout  time.Duration
	Client   *http.Client
}

// PinnedClient reads an HTTPS Source that serves exactly the certificate in the PEM file
// certFile, read again at each handshake. Memgraph gives its metrics server the Bolt SSL
// context, so with spec.tls.bolt its metrics are HTTPS under the Bolt certificate, which
// names the pod's DNS names and not the address the sidecar dials; the sidecar, in the
// same pod, is given that certificate (from the same Secret, without the key) and trusts
// it and nothing else. A renewed file is trusted from the next connection on; until
// Memgraph reloads its pair (RELOAD BOLT_SERVER TLS, which the operator runs) a scrape
// fails and says why.
func PinnedClient(certFile string) *http.Client {
	verify := func(raw [][]byte, _ [][]*x509.Certificate) error {
		want, err := firstCertificate(certFile)
		if err != nil {
			return err
		}
		if len(raw) == 0 || !bytes.Equal(raw[0], want) {
			return fmt.Errorf("memgraph serves a certificate other than %s", certFile)
		}
		return nil
	}
	return &http.Client{Transport: &http.Transport{
		// The chain and name checks are replaced by VerifyPeerCertificate's pin.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true, VerifyPeerCertificate: verify, MinVersion: tls.VersionTLS12}, //nolint:gosec // pinned in VerifyPeerCertificate
		MaxIdleConns:    1,
	}}
}

// firstCertificate is the DER of the first CERTIFICATE block of a PEM file.
func firstCertificate(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	for {
		var b *pem.Block
		if b, data = pem.Decode(data); b == nil {
			return nil, fmt.Errorf("%s holds no PEM certificate", path)
		}
		if b.Type == "CERTIFICATE" {
			return b.Bytes, nil
		}
	}
}

// Handler serves /metrics and /healthz (always 200: the sidecar's own liveness).
func (e *Exporter) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", e.serve)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	return mux
}

func (e *Exporter) serve(w http.ResponseWriter, r *http.Request) {
	doc, err := e.fetch(r.Context())
	var text bytes.Buffer
	if err == nil {
		err = Convert(doc, e.Instance, &text)
	}
	if err != nil {
		http.Error(w, "reading Memgraph's metrics at "+e.Source+": "+err.Error(), http.StatusBadGateway)
		return
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_, _ = w.Write(text.Bytes())
}

func (e *Exporter) fetch(ctx context.Context) ([]byte, error) {
	if e.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, e.Timeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.Source, nil)
	if err != nil {
		return nil, err
	}
	c := e.Client
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDocument))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return body, nil
}

// Run serves until ctx ends: memgraph-operator metrics-exporter --listen=:9115
// --memgraph-url=http://$(POD_IP):9091/metrics --instance-name=$(POD_NAME).
func Run(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet(Command, flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", fmt.Sprintf(":%d", DefaultPort), "address to serve /metrics on")
	e := &Exporter{}
	fs.StringVar(&e.Source, "memgraph-url", "http://127.0.0.1:9091/metrics", "Memgraph's metrics endpoint (--metrics-address, --metrics-port)")
	fs.StringVar(&e.Instance, "instance-name", "", "the instance_name label of every series (the pod)")
	fs.DurationVar(&e.Timeout, "timeout", 5*time.Second, "how long one read of Memgraph's metrics may take")
	cert := fs.String("memgraph-cert", "", "PEM file of the certificate Memgraph serves its metrics under (HTTPS with --bolt-cert-file): trusted alone")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *cert != "" {
		e.Client = PinnedClient(*cert)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: e.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	_, _ = fmt.Fprintf(stderr, "metrics exporter serving %s as Prometheus text on %s\n", e.Source, ln.Addr())
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
