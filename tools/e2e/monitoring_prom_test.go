package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// The Prometheus server the monitoring checks run (TestMonitoring, and the disk alert
// TestNodeAgentPrepare provokes) and the charts' rules it loads.

// chartRuleFiles renders every chart's PrometheusRule as a cluster with the CRD would
// (--api-versions), writes its spec (a Prometheus rules file) and returns the files and the
// expression of every alert in them.
func chartRuleFiles(ctx context.Context, t *testing.T, dir string) ([]string, map[string]string) {
	t.Helper()
	var files []string
	alerts := map[string]string{}
	for _, s := range services {
		f, exprs := chartRuleFile(ctx, t, s, dir)
		files = append(files, f)
		maps.Copy(alerts, exprs)
	}
	return files, alerts
}

// chartRuleFile renders one chart's PrometheusRule into a rules file in dir and returns it
// with the expression of each alert.
func chartRuleFile(ctx context.Context, t *testing.T, s service, dir string) (string, map[string]string) {
	t.Helper()
	out, err := helm(ctx, "template", s.name, filepath.Join(env.root, "charts", s.name), "--namespace", s.namespace(),
		"--api-versions", "monitoring.coreos.com/v1/PrometheusRule", "--show-only", "templates/prometheusrule.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var pr struct {
		Kind string `json:"kind"`
		Spec struct {
			Groups []struct {
				Name  string           `json:"name"`
				Rules []map[string]any `json:"rules"`
			} `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal([]byte(out), &pr); err != nil || pr.Kind != "PrometheusRule" || len(pr.Spec.Groups) == 0 {
		t.Fatalf("%s: no PrometheusRule rendered (%v):\n%s", s.name, err, head(out, 500))
	}
	exprs := map[string]string{}
	for _, g := range pr.Spec.Groups {
		for _, r := range g.Rules {
			if a, ok := r["alert"].(string); ok {
				exprs[a] = fmt.Sprint(r["expr"])
			}
		}
	}
	b, err := yaml.Marshal(pr.Spec)
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(dir, "rules-"+s.name+".yaml")
	if err := os.WriteFile(f, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return f, exprs
}

// prometheusBinary is the pinned Prometheus server (`make prometheus`) or $PROMETHEUS.
func prometheusBinary(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("PROMETHEUS")
	if bin == "" {
		bin = filepath.Join(env.root, ".cache", "bin", "prometheus")
	}
	if !exists(bin) {
		t.Fatalf("prometheus (%s) is missing: run `make prometheus` (it builds the server pinned in tools/prometheus/go.mod once), or point $PROMETHEUS at one", bin)
	}
	return bin
}

// promServer is a running Prometheus's HTTP API.
type promServer struct{ base string }

func startPrometheus(ctx context.Context, t *testing.T, bin, cfg, dir string) *promServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	logPath := filepath.Join(dir, "prometheus.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--storage.tsdb.retention.time=1h")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		_ = logFile.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("prometheus log tail:\n%s", tailString(string(b), 3000))
		}
	})
	p := &promServer{base: "http://" + addr}
	err = poll(ctx, t, "prometheus ready at "+addr, time.Minute, func(ctx context.Context) (bool, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.base+"/-/ready", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, nil //nolint:nilerr // not listening yet
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		b, _ := os.ReadFile(logPath)
		t.Fatalf("%v\n%s", err, tailString(string(b), 3000))
	}
	return p
}

func tailString(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// get calls the API and decodes its data field into out.
func (p *promServer) get(ctx context.Context, path string, q url.Values, out any) error {
	u := p.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	c := &http.Client{Timeout: 20 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	var r struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return fmt.Errorf("%s: HTTP %d: %s", path, resp.StatusCode, head(string(body), 300))
	}
	if r.Status != "success" {
		return fmt.Errorf("%s: %s", path, r.Error)
	}
	return json.Unmarshal(r.Data, out)
}

// query evaluates expr now and returns how many series or values it gave.
func (p *promServer) query(ctx context.Context, expr string) (int, error) {
	var data struct {
		ResultType string            `json:"resultType"`
		Result     []json.RawMessage `json:"result"`
	}
	if err := p.get(ctx, "/api/v1/query", url.Values{"query": {expr}}, &data); err != nil {
		return 0, err
	}
	return len(data.Result), nil
}

// families are the metric names expr selects, as Prometheus's own parser reads it
// (/api/v1/parse_query).
func (p *promServer) families(ctx context.Context, expr string) ([]string, error) {
	var ast any
	if err := p.get(ctx, "/api/v1/parse_query", url.Values{"query": {expr}}, &ast); err != nil {
		return nil, err
	}
	var names []string
	var walk func(any)
	walk = func(n any) {
		switch v := n.(type) {
		case map[string]any:
			if typ, _ := v["type"].(string); typ == "vectorSelector" || typ == "matrixSelector" {
				if name, _ := v["name"].(string); name != "" && !slices.Contains(names, name) {
					names = append(names, name)
				}
			}
			for _, c := range v {
				walk(c)
			}
		case []any:
			for _, c := range v {
				walk(c)
			}
		}
	}
	walk(ast)
	sort.Strings(names)
	return names, nil
}
