package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// wantObjectMetrics scrapes the operator's /metrics as the chart's metrics-reader
// ClusterRole allows (bound to the controller's ServiceAccount for the test) until every
// family in families has a series of the object namespace/name, on one of the ready pods
// (the leader's: only it reconciles). The operators' per-object series (issue 20 item 2)
// appear with the object's first pass and go with it.
func wantObjectMetrics(ctx context.Context, t *testing.T, operator, namespace, name string, families ...string) {
	t.Helper()
	s := serviceByName(operator)
	d, err := controllerDeployment(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	port := metricsPort(d)
	sa := d.Spec.Template.Spec.ServiceAccountName
	bindMetricsReader(ctx, t, operator+"-objects", operator, s.namespace(), sa)
	token, err := saToken(ctx, s.namespace(), sa)
	if err != nil {
		t.Fatalf("TokenRequest for ServiceAccount %s/%s: %v", s.namespace(), sa, err)
	}
	var missing []string
	var lastErr error
	err = poll(ctx, t, fmt.Sprintf("%s series of %s/%s on %s's /metrics", strings.Join(families, ", "), namespace, name, operator), 2*time.Minute, func(ctx context.Context) (bool, error) {
		ps, err := readyPods(ctx, s)
		if err != nil {
			return false, err
		}
		for i := range ps {
			code, body, err := scrape(ctx, &ps[i], port, token)
			if err != nil || code != 200 {
				lastErr = fmt.Errorf("pod %s: HTTP %d, %w", ps[i].Name, code, err)
				continue
			}
			if missing = missingFamilies(body, namespace, name, families); len(missing) == 0 {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("%v: missing %v (last scrape error %v)", err, missing, lastErr)
	}
}

// missingFamilies are the families of want with no series of namespace/name in body (the
// Prometheus text format; client_golang writes labels sorted by name).
func missingFamilies(body, namespace, name string, want []string) []string {
	labels := fmt.Sprintf("name=%q,namespace=%q", name, namespace)
	var missing []string
	for _, f := range want {
		found := false
		for _, line := range strings.Split(body, "\n") {
			if strings.HasPrefix(line, f+"{") && strings.Contains(line, labels) {
				found = true
				break
			}
		}
		if !found {
			missing = append(missing, f)
		}
	}
	return missing
}

func TestMissingFamilies(t *testing.T) {
	body := `# TYPE valkey_operator_cluster_state gauge
valkey_operator_cluster_state{name="demo",namespace="ns",state="Ready"} 1
valkey_operator_failovers_total{name="other",namespace="ns"} 0
`
	got := missingFamilies(body, "ns", "demo", []string{"valkey_operator_cluster_state", "valkey_operator_failovers_total"})
	if len(got) != 1 || got[0] != "valkey_operator_failovers_total" {
		t.Errorf("missing %v, want the failovers of another cluster not to count", got)
	}
}
