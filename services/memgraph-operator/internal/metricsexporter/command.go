package metricsexporter

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
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
	if err := fs.Parse(args); err != nil {
		return err
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
