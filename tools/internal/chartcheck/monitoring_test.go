package chartcheck

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// promRule is the part of a PrometheusRule the checks read.
type promRule struct {
	Spec struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []struct {
				Alert  string            `json:"alert"`
				Expr   string            `json:"expr"`
				For    string            `json:"for"`
				Labels map[string]string `json:"labels"`
			} `json:"rules"`
		} `json:"groups"`
	} `json:"spec"`
}

func (p promRule) alerts() map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, g := range p.Spec.Groups {
		for _, r := range g.Rules {
			out[r.Alert] = r.Labels
		}
	}
	return out
}

// TestChartsShipDashboardsAndRules: every chart renders its dashboards as a ConfigMap with
// the sidecar's label (on by default, off with grafanaDashboards.enabled=false), and its
// alerts as a PrometheusRule only when the API server serves the kind; disabled drops an
// alert, ruleLabels add to every alert without overriding its severity. What the queries
// return is TestMonitoring's (tools/e2e), against a real Prometheus.
func TestChartsShipDashboardsAndRules(t *testing.T) {
	h := newHelm(t)
	for _, chart := range allCharts {
		t.Run(chart, func(t *testing.T) {
			full := "rel-" + chart
			out, err := h.template("rel", "charts/"+chart, "--namespace", "ops")
			if err != nil {
				t.Fatal(err)
			}
			objs := decode(t, out)
			if _, ok := find(objs, "PrometheusRule", ""); ok {
				t.Error("PrometheusRule rendered on a cluster without monitoring.coreos.com/v1 PrometheusRule")
			}
			cm := mustFind(t, objs, "ConfigMap", full+"-dashboards")
			if cm.Metadata.Labels["grafana_dashboard"] != "1" {
				t.Errorf("dashboards ConfigMap labels %v, want grafana_dashboard: \"1\"", cm.Metadata.Labels)
			}
			var data struct {
				Data map[string]string `json:"data"`
			}
			if err := yaml.Unmarshal(cm.raw, &data); err != nil || len(data.Data) != 1 {
				t.Fatalf("dashboards ConfigMap data: %d keys (%v), want one dashboard", len(data.Data), err)
			}
			for key, raw := range data.Data {
				var d struct {
					UID    string `json:"uid"`
					Panels []struct {
						Targets []struct {
							Expr string `json:"expr"`
						} `json:"targets"`
					} `json:"panels"`
				}
				if err := json.Unmarshal([]byte(raw), &d); err != nil || d.UID+".json" != key || len(d.Panels) == 0 {
					t.Errorf("%s: uid %q, %d panels (%v)", key, d.UID, len(d.Panels), err)
				}
			}

			out, err = h.template("rel", "charts/"+chart, "--namespace", "ops", "--set", "grafanaDashboards.enabled=false",
				"--set", "grafanaDashboards.namespace=grafana")
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := find(decode(t, out), "ConfigMap", full+"-dashboards"); ok {
				t.Error("dashboards ConfigMap rendered with grafanaDashboards.enabled=false")
			}

			withCRD := []string{"rel", "charts/" + chart, "--namespace", "ops", "--api-versions", "monitoring.coreos.com/v1/PrometheusRule"}
			out, err = h.template(append(withCRD, "--set", "prometheusRule.labels.release=kps")...)
			if err != nil {
				t.Fatal(err)
			}
			o := mustFind(t, decode(t, out), "PrometheusRule", full)
			if o.Metadata.Labels["release"] != "kps" {
				t.Errorf("PrometheusRule labels %v lack prometheusRule.labels", o.Metadata.Labels)
			}
			var pr promRule
			if err := yaml.Unmarshal(o.raw, &pr); err != nil {
				t.Fatal(err)
			}
			all := pr.alerts()
			if len(all) < 2 {
				t.Fatalf("alerts %v, want the chart's", all)
			}
			var first string
			for name, labels := range all {
				if !slices.Contains([]string{"info", "warning", "critical"}, labels["severity"]) {
					t.Errorf("alert %s: severity %q", name, labels["severity"])
				}
				if first == "" || name < first {
					first = name
				}
			}

			out, err = h.template(append(withCRD, "--set", "prometheusRule.disabled."+first+"=true",
				"--set", "prometheusRule.ruleLabels.team=storage", "--set", "prometheusRule.ruleLabels.severity=page")...)
			if err != nil {
				t.Fatal(err)
			}
			pr = promRule{}
			if err := yaml.Unmarshal(mustFind(t, decode(t, out), "PrometheusRule", full).raw, &pr); err != nil {
				t.Fatal(err)
			}
			got := pr.alerts()
			if _, ok := got[first]; ok || len(got) != len(all)-1 {
				t.Errorf("prometheusRule.disabled.%s: alerts %d of %d, %s still there: %v", first, len(got), len(all), first, ok)
			}
			for name, labels := range got {
				if labels["team"] != "storage" || labels["severity"] != all[name]["severity"] {
					t.Errorf("alert %s labels %v: want team=storage added and its own severity %q kept", name, labels, all[name]["severity"])
				}
			}
		})
	}
}

// TestOperatorServiceMonitorHonorsObjectLabels: the per-object series' namespace label
// must survive the scrape (else Prometheus renames it exported_namespace and the charts'
// dashboards and alerts see the operator's namespace).
func TestOperatorServiceMonitorHonorsObjectLabels(t *testing.T) {
	h := newHelm(t)
	for _, svc := range operators {
		out, err := h.template("rel", "charts/"+svc, "--set", "serviceMonitor.enabled=true")
		if err != nil {
			t.Fatal(err)
		}
		var sm struct {
			Spec struct {
				Endpoints []struct {
					HonorLabels bool `json:"honorLabels"`
				} `json:"endpoints"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal(mustFind(t, decode(t, out), "ServiceMonitor", "rel-"+svc).raw, &sm); err != nil {
			t.Fatal(err)
		}
		if len(sm.Spec.Endpoints) != 1 || !sm.Spec.Endpoints[0].HonorLabels {
			t.Errorf("%s: ServiceMonitor endpoints %+v, want one with honorLabels", svc, sm.Spec.Endpoints)
		}
	}
}

// TestDashboardsMatchTheirGenerator: the committed dashboards are what tools/cmd/dashboards
// writes (edit the generator, then `make generate`).
func TestDashboardsMatchTheirGenerator(t *testing.T) {
	root := repoRoot(t)
	out := t.TempDir()
	cmd := exec.Command("go", "run", "./cmd/dashboards", "-charts", out)
	cmd.Dir = filepath.Join(root, "tools")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go run ./cmd/dashboards: %v\n%s", err, b)
	}
	written, err := filepath.Glob(filepath.Join(out, "*", "files", "dashboards", "*.json"))
	if err != nil || len(written) != len(allCharts) {
		t.Fatalf("the generator wrote %v (%v), want one dashboard per chart", written, err)
	}
	for _, w := range written {
		rel, _ := filepath.Rel(out, w)
		want, _ := os.ReadFile(w)
		have, err := os.ReadFile(filepath.Join(root, "charts", rel))
		if err != nil || string(have) != string(want) {
			t.Errorf("charts/%s differs from tools/cmd/dashboards' output (%v): run `make generate`", rel, err)
		}
	}
	for _, chart := range allCharts {
		if !slices.ContainsFunc(written, func(w string) bool { return strings.Contains(w, "/"+chart+"/") }) {
			t.Errorf("no dashboard for chart %s", chart)
		}
	}
}
