package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// monitoringNamespace holds what TestMonitoring makes: the scraper's ServiceAccount and one
// object per product, placed on no node so that it never turns Ready.
const monitoringNamespace = "e2e-monitoring"

// monitoredMemgraph is the MemgraphCluster of monitoringNamespace that runs (3
// coordinators, 1 data instance), for the members' series.
const monitoredMemgraph = "monitored-memgraph"

// monitoredValkey is the ValkeyCluster of monitoringNamespace that runs (1 shard, no
// replica, the exporter sidecar on), for the exporter's series.
const monitoredValkey = "monitored-valkey"

// monitoredValkeyTLS is the same over TLS (a self-signed certificate): its exporter dials
// localhost with TLS and verifies the member's certificate, which names localhost.
const monitoredValkeyTLS = "monitored-valkey-tls"

// The backups of monitoredValkey and monitoredMemgraph the test makes fail: their clusters
// name a store that refuses the keys of refusedKeys.
const (
	failingValkeyBackup   = "failing-valkey-backup"
	failingMemgraphBackup = "failing-memgraph-backup"
	refusedKeys           = "refused-s3-keys"
)

// exporterUser is the ACL user the Valkey operator gives the exporter sidecar.
const exporterUser = "valkey-exporter"

// unplaced is a node selector no node of the cluster matches.
var unplaced = map[string]any{"opsuite.io/e2e-monitoring": "nowhere"}

// TestMonitoring runs a real Prometheus (pinned in tools/prometheus, `make prometheus`)
// that scrapes what the cluster runs the way the charts' ServiceMonitor and PodMonitor ask:
// every operator's /metrics (HTTPS, a ServiceAccount token bound to the charts'
// metrics-reader roles, honorLabels), every node agent's, every Memgraph member's exporter
// sidecar (of a small cluster it runs), the Valkey exporter sidecar (redis_exporter, of a
// small cluster it runs) and every other pod's port named metrics. It loads every chart's
// PrometheusRule (helm template with the CRD's API) and evaluates through the HTTP API
// every query of every dashboard the charts installed (ConfigMaps labelled
// grafana_dashboard=1) and every alert: each panel returns data, every series an alert
// names exists, no rule fails to evaluate, and each alert the test provokes has its
// expression true for the object and turns active: the NotReady alerts, the backup-failed
// alerts of a Valkey and a Memgraph backup into a store that refuses their keys, and
// ValkeyMemberDown for a member that refuses its exporter.
func TestMonitoring(t *testing.T) {
	for _, s := range services {
		needInstalled(t, s.name)
	}
	needCLI(t)
	ctx := scenarioContext(t)
	bin := prometheusBinary(t)
	if !direct(&corev1.Pod{}) {
		t.Skip("Prometheus runs on this host and scrapes pod addresses: needs the local cluster")
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: monitoringNamespace}}
	if _, err := env.client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.client.CoreV1().Namespaces().Delete(context.Background(), monitoringNamespace, metav1.DeleteOptions{})
	})
	// A store the backups reach and that refuses their keys: a versitygw on the host.
	s3 := startMgS3(t)
	provoked := applyMonitoredObjects(ctx, t, s3.endpoint)

	// The scraper's identity: a ServiceAccount bound to every operator chart's
	// <release>-metrics-reader, as README "Monitoring" tells a Prometheus to be.
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "prometheus"}}
	if _, err := env.client.CoreV1().ServiceAccounts(monitoringNamespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	for _, s := range operators() {
		bindMetricsReader(ctx, t, s.name+"-prometheus", s.name, monitoringNamespace, "prometheus")
	}
	tr, err := env.client.CoreV1().ServiceAccounts(monitoringNamespace).CreateToken(ctx, "prometheus", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	tokenFile := filepath.Join(work, "token")
	if err := os.WriteFile(tokenFile, []byte(tr.Status.Token), 0o600); err != nil {
		t.Fatal(err)
	}

	ruleFiles, alertExprs := chartRuleFiles(ctx, t, work)
	// Their pods must be ready before the scrape targets are listed.
	for _, w := range []struct {
		selector string
		pods     int
	}{{"memgraph.com/cluster=" + monitoredMemgraph, 4}, {"valkey.io/cluster=" + monitoredValkey, 1}, {"valkey.io/cluster=" + monitoredValkeyTLS, 1}} {
		err = poll(ctx, t, fmt.Sprintf("the %d pods of %s ready", w.pods, w.selector), 4*time.Minute, func(ctx context.Context) (bool, error) {
			pods, err := env.client.CoreV1().Pods(monitoringNamespace).List(ctx, metav1.ListOptions{LabelSelector: w.selector})
			if err != nil {
				return false, err
			}
			ready := 0
			for i := range pods.Items {
				if podReady(&pods.Items[i]) {
					ready++
				}
			}
			return ready == w.pods, nil
		})
		if err != nil {
			out, _ := kubectl(ctx, "-n", monitoringNamespace, "get", "pods,mgc,vkc", "-o", "wide")
			t.Fatalf("%v:\n%s", err, out)
		}
	}
	jobs, jobKinds := scrapeJobs(ctx, t, tokenFile)
	// A VeltrixDB member: the test's VeltrixCluster runs no pod, so the image's stand-in the
	// local cluster runs for it (bin/veltrix-sim) serves the members' series from this host.
	vxJob := monitoringNamespace + "/veltrixdb"
	jobs = append(jobs, map[string]any{"job_name": vxJob, "static_configs": []any{map[string]any{
		"targets": []string{veltrixMember(ctx, t, work)},
		"labels":  map[string]string{"namespace": monitoringNamespace, "pod": "veltrixdb-sim-0"},
	}}})
	jobKinds[vxJob] = kindVeltrixMember
	cfg := map[string]any{
		"global":         map[string]any{"scrape_interval": "5s", "scrape_timeout": "4s", "evaluation_interval": "5s"},
		"rule_files":     ruleFiles,
		"scrape_configs": jobs,
	}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfgFile := filepath.Join(work, "prometheus.yml")
	if err := os.WriteFile(cfgFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
	prom := startPrometheus(ctx, t, bin, cfgFile, work)

	// Every operator and node agent target up, and every target of the test's own
	// clusters: one down would fail every panel of its product below for a reason said
	// here. Other data-plane targets count where up.
	var down, kinds, others []string
	err = poll(ctx, t, "every operator, node agent and "+monitoringNamespace+" target up", 2*time.Minute, func(ctx context.Context) (bool, error) {
		var resp struct {
			ActiveTargets []struct {
				Labels    map[string]string `json:"labels"`
				ScrapeURL string            `json:"scrapeUrl"`
				Health    string            `json:"health"`
				LastError string            `json:"lastError"`
			} `json:"activeTargets"`
		}
		if err := prom.get(ctx, "/api/v1/targets", nil, &resp); err != nil {
			down = []string{err.Error()}
			return false, nil //nolint:nilerr // retried; the last error is reported
		}
		down, kinds, others = nil, nil, nil
		unscraped := false
		for _, tg := range resp.ActiveTargets {
			k := jobKinds[tg.Labels["job"]]
			switch {
			case tg.Health == "unknown":
				unscraped = true
			case tg.Health == "up" && k != "" && !slices.Contains(kinds, k):
				kinds = append(kinds, k)
			case tg.Health != "up" && (k == "" || k == kindNodeAgent || tg.Labels["namespace"] == monitoringNamespace):
				down = append(down, fmt.Sprintf("%s (%s): %s %s", tg.Labels["job"], tg.ScrapeURL, tg.Health, tg.LastError))
			case tg.Health != "up":
				others = append(others, fmt.Sprintf("%s (%s): %s %s", tg.Labels["job"], tg.ScrapeURL, tg.Health, tg.LastError))
			}
		}
		return len(resp.ActiveTargets) > 0 && !unscraped && len(down) == 0, nil
	})
	if err != nil {
		t.Fatalf("%v: %s", err, strings.Join(down, "; "))
	}
	for _, o := range others {
		t.Logf("data-plane target down, its series not required: %s", o)
	}
	sort.Strings(kinds)
	t.Logf("scraping %d jobs; data-plane kinds up: %v", len(jobs), kinds)

	t.Run("dashboards", func(t *testing.T) {
		cms, err := env.client.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{LabelSelector: "grafana_dashboard=1"})
		if err != nil {
			t.Fatal(err)
		}
		var charts []string
		for _, cm := range cms.Items {
			charts = append(charts, cm.Labels["app.kubernetes.io/name"])
			for key, raw := range cm.Data {
				checkDashboard(ctx, t, prom, kinds, cm.Namespace+"/"+cm.Name+"/"+key, raw)
			}
		}
		sort.Strings(charts)
		want := []string{"memgraph-operator", "node-agent", "vald-operator", "valkey-operator", "veltrix-operator"}
		if !slices.Equal(charts, want) {
			t.Errorf("dashboard ConfigMaps of %v, want one per chart %v", charts, want)
		}
	})

	t.Run("alerts", func(t *testing.T) {
		checkRules(ctx, t, prom, kinds, len(alertExprs))
		for _, p := range provoked {
			wantAlertActive(ctx, t, prom, alertExprs, p)
		}
		provokeMemberDown(ctx, t, prom, alertExprs)
		removeFailedBackups(ctx, t, prom)
	})

	// The exporter of a TLS cluster reaches its member: redis_up 1, not only a target up.
	t.Run("exporter over TLS", func(t *testing.T) {
		up := fmt.Sprintf(`redis_up{namespace=%q, pod=~%q} == 1`, monitoringNamespace, monitoredValkeyTLS+"-.*")
		if err := poll(ctx, t, "redis_up 1 for the member of "+monitoredValkeyTLS, 2*time.Minute, func(ctx context.Context) (bool, error) {
			n, err := prom.query(ctx, up)
			return n == 1, err
		}); err != nil {
			out, _ := kubectl(ctx, "-n", monitoringNamespace, "logs", "-l", "valkey.io/cluster="+monitoredValkeyTLS, "-c", "exporter", "--tail", "20")
			t.Errorf("%v; exporter log:\n%s", err, out)
		}
	})
}

// provokedAlert is an alert the test makes true for the object of monitoringNamespace
// its labels name (with namespace).
type provokedAlert struct {
	alert  string
	labels map[string]string
}

// applyMonitoredObjects creates, from the samples, in monitoringNamespace: a ValkeyCluster,
// a MemgraphCluster and a VeltrixCluster that no node can take (their pods stay Pending,
// nothing runs, they stay not Ready; a backup of the Valkey one stays Pending), a
// ValdOperatorRelease, and the two clusters that run, monitoredValkey and
// monitoredMemgraph, each with a backup into the store at s3Endpoint that fails there: the
// Secret refusedKeys holds keys the store does not know. Each operator has an object to
// export series for.
func applyMonitoredObjects(ctx context.Context, t *testing.T, s3Endpoint string) []provokedAlert {
	t.Helper()
	refusedStore := map[string]any{"objectStore": map[string]any{
		"endpoint": s3Endpoint, "bucket": "backups", "region": "us-east-1", "forcePathStyle": true,
		"credentials": map[string]any{"secretName": refusedKeys},
	}}
	placedCopy := func(obj map[string]any, name string) map[string]any {
		placed := map[string]any{}
		b, _ := yaml.Marshal(obj)
		if err := yaml.Unmarshal(b, &placed); err != nil {
			t.Fatal(err)
		}
		placed["metadata"].(map[string]any)["name"] = name
		return placed
	}
	var docs []map[string]any
	for _, f := range []string{"valkey.yaml", "memgraph.yaml", "veltrix.yaml", "vald.yaml"} {
		raw, err := os.ReadFile(filepath.Join(env.root, "deploy", "samples", f))
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range strings.Split(string(raw), "\n---\n") {
			var obj map[string]any
			if err := yaml.Unmarshal([]byte(d), &obj); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if obj == nil || obj["kind"] == "Namespace" {
				continue
			}
			meta := obj["metadata"].(map[string]any)
			meta["namespace"] = monitoringNamespace
			spec, _ := obj["spec"].(map[string]any)
			switch obj["kind"] {
			case "ValkeyCluster":
				// A cluster that runs, the smallest one: its member's exporter sidecar
				// (redis_exporter on the local cluster) serves the Valkey panels.
				placed := placedCopy(obj, monitoredValkey)
				ps := placed["spec"].(map[string]any)
				ps["shards"], ps["replicas"] = 1, 0
				ps["exporter"] = map[string]any{"enabled": true}
				ps["backup"] = refusedStore
				docs = append(docs, placed)
				withTLS := placedCopy(obj, monitoredValkeyTLS)
				ts := withTLS["spec"].(map[string]any)
				ts["shards"], ts["replicas"] = 1, 0
				ts["exporter"] = map[string]any{"enabled": true}
				ts["tls"] = map[string]any{"selfSigned": true}
				docs = append(docs, withTLS)
				meta["name"] = "unplaced-valkey"
				spec["nodeSelector"] = unplaced
			case "MemgraphCluster":
				// A cluster that runs, the smallest one: its members' metrics-exporter
				// sidecars serve the dashboard's Memgraph panels.
				placed := placedCopy(obj, monitoredMemgraph)
				ps := placed["spec"].(map[string]any)
				ps["dataInstances"] = 1
				ps["backup"] = refusedStore
				docs = append(docs, placed)
				meta["name"] = "unplaced-memgraph"
				spec["nodeSelector"] = map[string]any{"coordinators": unplaced, "data": unplaced}
			case "VeltrixCluster":
				meta["name"] = "unplaced-veltrix"
				spec["nodeSelector"] = unplaced
			case "ValdOperatorRelease":
				meta["name"] = "monitored-vor"
			}
			docs = append(docs, obj)
		}
	}
	backupOf := func(apiVersion, kind, name, cluster string) map[string]any {
		return map[string]any{"apiVersion": apiVersion, "kind": kind,
			"metadata": map[string]any{"name": name, "namespace": monitoringNamespace},
			"spec":     map[string]any{"cluster": map[string]any{"name": cluster}}}
	}
	docs = append(docs,
		backupOf("valkey.io/v1alpha1", "ValkeyBackup", "unplaced-valkey-backup", "unplaced-valkey"),
		map[string]any{"apiVersion": "v1", "kind": "Secret",
			"metadata":   map[string]any{"name": refusedKeys, "namespace": monitoringNamespace},
			"stringData": map[string]any{"AWS_ACCESS_KEY_ID": "unknown-to-the-store", "AWS_SECRET_ACCESS_KEY": "not-the-store-secret"}},
		backupOf("valkey.io/v1alpha1", "ValkeyBackup", failingValkeyBackup, monitoredValkey),
		backupOf("memgraph.com/v1alpha1", "MemgraphBackup", failingMemgraphBackup, monitoredMemgraph),
	)
	var out []string
	for _, d := range docs {
		b, err := yaml.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(b))
	}
	f := filepath.Join(t.TempDir(), "objects.yaml")
	if err := os.WriteFile(f, []byte(strings.Join(out, "---\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	if o, err := kubectl(ctx, "apply", "-f", f); err != nil {
		t.Fatal(err)
	} else {
		t.Logf("%s", strings.TrimSpace(o))
	}
	named := func(alert, name string) provokedAlert {
		return provokedAlert{alert, map[string]string{"name": name}}
	}
	return []provokedAlert{
		named("ValkeyClusterNotReady", "unplaced-valkey"),
		named("MemgraphClusterNotReady", "unplaced-memgraph"),
		named("VeltrixClusterNotReady", "unplaced-veltrix"),
		named("ValkeyBackupFailed", failingValkeyBackup),
		named("MemgraphBackupFailed", failingMemgraphBackup),
	}
}

// Data-plane kinds: a metric family of one is required to have data only when a target of
// that kind runs; the Valkey exporter's and Memgraph's always (the test runs a cluster of
// each).
const (
	kindValkeyExporter = "valkey exporter"
	kindVeltrixMember  = "veltrixdb member"
	kindNodeAgent      = "node agent"
	kindPreparedDisk   = "disk prepared by a node agent"
)

// familyKind says which scrape target serves a family the charts use; "" is one always
// scraped: the operators', and the Valkey exporter's and Memgraph's sidecars' of the
// test's own clusters. kubelet_ families come from the kubelets, which the local cluster's
// kwok nodes do not run.
func familyKind(family string) string {
	switch {
	case strings.HasPrefix(family, "veltrixdb_"):
		return kindVeltrixMember
	case strings.HasPrefix(family, "node_agent_prepared_filesystem_"):
		// Only while a disk is prepared: TestNodeAgentPrepare fills one and evaluates
		// NodeAgentDiskNearlyFull against them.
		return kindPreparedDisk
	case strings.HasPrefix(family, "node_agent_"):
		return kindNodeAgent
	case strings.HasPrefix(family, "kubelet_"):
		return "kubelet"
	}
	return ""
}

// scrapeJobs are the scrape configs the charts' monitors would make: one job per operator
// (the chart's ServiceMonitor: job <release>-metrics, HTTPS, the token, honorLabels so the
// objects' namespace label stays), the node agents (the chart's PodMonitor: job
// <namespace>/<release>, a node label) and every other pod with a port named metrics (its
// labels as target labels, as the Valkey ServiceMonitor's podTargetLabels do; a Memgraph
// member's port named exporter, its metrics-exporter sidecar, as its ServiceMonitor). It returns
// the data-plane kind of each job but the operators'.
func scrapeJobs(ctx context.Context, t *testing.T, tokenFile string) ([]any, map[string]string) {
	t.Helper()
	var jobs []any
	kinds := map[string]string{}
	owned := map[string]bool{}
	for _, s := range services {
		var ps []corev1.Pod
		err := poll(ctx, t, "a ready pod of "+s.name, 3*time.Minute, func(ctx context.Context) (bool, error) {
			all, err := readyPods(ctx, s)
			if err != nil {
				return false, err
			}
			// The node agent's release also runs its signer, which serves no metrics.
			ps = slices.DeleteFunc(all, func(p corev1.Pod) bool { return s.daemonSet && podPort(&p, "metrics") == 0 })
			return len(ps) > 0, nil
		})
		if err != nil {
			t.Fatalf("%v:\n%s", err, describePods(ctx, s))
		}
		var static []any
		port := 0
		if !s.daemonSet {
			d, err := controllerDeployment(ctx, s)
			if err != nil {
				t.Fatal(err)
			}
			port = metricsPort(d)
		}
		for i := range ps {
			p := &ps[i]
			owned[p.Namespace+"/"+p.Name] = true
			pp := port
			if s.daemonSet {
				pp = podPort(p, "metrics")
			}
			if pp == 0 {
				t.Fatalf("%s: pod %s has no port named metrics", s.name, p.Name)
			}
			labels := map[string]string{"namespace": p.Namespace, "pod": p.Name, "endpoint": "metrics"}
			if s.daemonSet {
				labels["node"] = p.Spec.NodeName
			} else {
				labels["service"] = s.name + "-metrics"
			}
			static = append(static, map[string]any{"targets": []string{net.JoinHostPort(p.Status.PodIP, fmt.Sprint(pp))}, "labels": labels})
		}
		if s.daemonSet {
			kinds[s.namespace()+"/"+s.name] = kindNodeAgent
			jobs = append(jobs, map[string]any{"job_name": s.namespace() + "/" + s.name, "static_configs": static})
			continue
		}
		jobs = append(jobs, map[string]any{
			"job_name": s.name + "-metrics", "scheme": "https", "honor_labels": true,
			"tls_config":     map[string]any{"insecure_skip_verify": true},
			"authorization":  map[string]any{"credentials_file": tokenFile},
			"static_configs": static,
		})
	}
	all, err := env.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	others := map[string][]any{}
	for i := range all.Items {
		p := &all.Items[i]
		pp := podPort(p, "metrics")
		if p.Labels["memgraph.com/cluster"] != "" {
			// As the cluster's ServiceMonitor: the sidecar, memgraph's own port answers JSON.
			pp = podPort(p, "exporter")
		}
		if owned[p.Namespace+"/"+p.Name] || pp == 0 || !podReady(p) || p.Status.PodIP == "" {
			continue
		}
		labels := map[string]string{"namespace": p.Namespace, "pod": p.Name, "node": p.Spec.NodeName}
		for k, v := range p.Labels {
			labels[promLabel(k)] = v
		}
		job := p.Namespace + "/" + p.Labels["app.kubernetes.io/name"]
		switch {
		case p.Labels["valkey.io/cluster"] != "":
			kinds[job] = kindValkeyExporter
		case strings.Contains(p.Labels["app.kubernetes.io/name"], "veltrix"):
			kinds[job] = kindVeltrixMember
		default:
			kinds[job] = "other"
		}
		others[job] = append(others[job], map[string]any{"targets": []string{net.JoinHostPort(p.Status.PodIP, fmt.Sprint(pp))}, "labels": labels})
	}
	for job, static := range others {
		jobs = append(jobs, map[string]any{"job_name": job, "static_configs": static})
	}
	return jobs, kinds
}

func podPort(p *corev1.Pod, name string) int {
	for _, c := range p.Spec.Containers {
		for _, cp := range c.Ports {
			if cp.Name == name {
				return int(cp.ContainerPort)
			}
		}
	}
	return 0
}

var notLabelChar = regexp.MustCompile(`[^a-zA-Z0-9_]`)

// promLabel is a Kubernetes label's name as Prometheus's labelmap writes it.
func promLabel(k string) string { return notLabelChar.ReplaceAllString(k, "_") }

// dashboardVars replaces Grafana's variables by what "All" and the defaults give.
var dashboardVars = strings.NewReplacer("$__rate_interval", "1m", "${__rate_interval}", "1m", "$__interval", "15s",
	"$namespace", ".*", "$name", ".*", "$job", ".*", "$node", ".*")

var labelValues = regexp.MustCompile(`^label_values\((.+),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$`)

// required says whether a family must have data here: the operators' always, a data-plane
// family when a target of its kind runs; kubelet ones never (no kubelet on kwok nodes).
func required(family string, kinds []string) (bool, string) {
	k := familyKind(family)
	switch {
	case k == "":
		return true, ""
	case k == "kubelet":
		return false, "the local cluster's kwok nodes run no kubelet, whose volume stats kube-prometheus-stack scrapes"
	case !slices.Contains(kinds, k):
		return false, "no " + k + " runs in the cluster now"
	}
	return true, ""
}

// checkDashboard evaluates every variable and panel query of one dashboard: each returns
// data, unless every family it needs is one the cluster cannot serve now (said in the log).
func checkDashboard(ctx context.Context, t *testing.T, p *promServer, kinds []string, where, raw string) {
	t.Helper()
	var d struct {
		UID        string `json:"uid"`
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				Type       string `json:"type"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal([]byte(raw), &d); err != nil {
		t.Errorf("%s: %v", where, err)
		return
	}
	type check struct{ what, expr string }
	var checks []check
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		m := labelValues.FindStringSubmatch(v.Definition)
		if m == nil {
			t.Errorf("%s: variable %s: %q is not label_values(<series>, <label>)", where, v.Name, v.Definition)
			continue
		}
		checks = append(checks, check{"variable " + v.Name, `count by (` + m[2] + `) (` + dashboardVars.Replace(m[1]) + `)`})
	}
	for _, pn := range d.Panels {
		if len(pn.Targets) == 0 {
			t.Errorf("%s: panel %q has no query", where, pn.Title)
		}
		for i, tg := range pn.Targets {
			checks = append(checks, check{fmt.Sprintf("panel %q query %d", pn.Title, i+1), dashboardVars.Replace(tg.Expr)})
		}
	}
	passed, skipped := 0, 0
	for _, c := range checks {
		fams, err := p.families(ctx, c.expr)
		if err != nil {
			t.Errorf("%s: %s: %v", where, c.what, err)
			continue
		}
		need, why := true, ""
		for _, f := range fams {
			if need, why = required(f, kinds); !need {
				break
			}
		}
		n, lastErr := p.eventually(ctx, t, fmt.Sprintf("%s %s has data", d.UID, c.what), need, c.expr)
		switch {
		case n > 0:
			passed++
		case !need:
			skipped++
			t.Logf("%s: %s: no data, not required: %s (%s)", d.UID, c.what, why, c.expr)
		default:
			t.Errorf("%s: %s returns no data: %s (last error %v)", where, c.what, c.expr, lastErr)
		}
	}
	t.Logf("%s: %d queries with data, %d not required here", d.UID, passed, skipped)
}

// eventually evaluates expr until it returns data: for 90 s when required (rates need two
// scrapes, an object's series appear with its first pass), once otherwise.
func (p *promServer) eventually(ctx context.Context, t *testing.T, what string, required bool, expr string) (int, error) {
	t.Helper()
	n, err := p.query(ctx, expr)
	if n > 0 || !required {
		return n, err
	}
	_ = poll(ctx, t, what, 90*time.Second, func(ctx context.Context) (bool, error) {
		n, err = p.query(ctx, expr)
		return n > 0, nil
	})
	return n, err
}

// checkRules reads the loaded rules: every one evaluated without error, as many alerts as
// the charts render, and every family an alert names exists (unless the cluster cannot
// serve it, as for dashboards).
func checkRules(ctx context.Context, t *testing.T, p *promServer, kinds []string, want int) {
	t.Helper()
	type rule struct {
		Name      string `json:"name"`
		Query     string `json:"query"`
		Health    string `json:"health"`
		LastError string `json:"lastError"`
		Type      string `json:"type"`
	}
	var rules []rule
	err := poll(ctx, t, "every rule evaluated", time.Minute, func(ctx context.Context) (bool, error) {
		var data struct {
			Groups []struct {
				Rules []rule `json:"rules"`
			} `json:"groups"`
		}
		if err := p.get(ctx, "/api/v1/rules", nil, &data); err != nil {
			return false, nil //nolint:nilerr // retried
		}
		rules = nil
		for _, g := range data.Groups {
			rules = append(rules, g.Rules...)
		}
		for _, r := range rules {
			if r.Health == "unknown" {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rules) != want {
		t.Errorf("Prometheus loaded %d rules, the charts render %d alerts", len(rules), want)
	}
	for _, r := range rules {
		if r.Health != "ok" {
			t.Errorf("alert %s: health %s: %s", r.Name, r.Health, r.LastError)
		}
		fams, err := p.families(ctx, r.Query)
		if err != nil || len(fams) == 0 {
			t.Errorf("alert %s: families of %q: %v %v", r.Name, r.Query, fams, err)
			continue
		}
		for _, f := range fams {
			need, why := required(f, kinds)
			n, lastErr := p.eventually(ctx, t, fmt.Sprintf("alert %s: series %s", r.Name, f), need, "count("+f+")")
			switch {
			case n > 0:
			case !need:
				t.Logf("alert %s: %s has no series, not required: %s", r.Name, f, why)
			default:
				t.Errorf("alert %s (%s): no series %s (last error %v)", r.Name, r.Query, f, lastErr)
			}
		}
	}
}

// wantAlertActive waits until the alert's expression returns a series with a's labels (in
// monitoringNamespace), then until the alert is pending or firing for them (pending: true
// at every evaluation, waiting out its for:).
func wantAlertActive(ctx context.Context, t *testing.T, p *promServer, exprs map[string]string, a provokedAlert) {
	t.Helper()
	want := map[string]string{"namespace": monitoringNamespace}
	maps.Copy(want, a.labels)
	expr, ok := exprs[a.alert]
	if !ok {
		t.Errorf("no chart renders the alert %s", a.alert)
		return
	}
	var seen []string
	err := poll(ctx, t, fmt.Sprintf("the expression of %s true for %v", a.alert, want), 2*time.Minute, func(ctx context.Context) (bool, error) {
		var data struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
			} `json:"result"`
		}
		if err := p.get(ctx, "/api/v1/query", url.Values{"query": {expr}}, &data); err != nil {
			seen = []string{err.Error()}
			return false, nil //nolint:nilerr // retried; the last error is reported
		}
		seen = nil
		for _, r := range data.Result {
			seen = append(seen, fmt.Sprint(r.Metric))
			if hasLabels(r.Metric, want) {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Errorf("%v (%s); series: %v", err, expr, seen)
		return
	}
	err = poll(ctx, t, fmt.Sprintf("alert %s active for %v", a.alert, want), 2*time.Minute, func(ctx context.Context) (bool, error) {
		var data struct {
			Alerts []struct {
				Labels map[string]string `json:"labels"`
				State  string            `json:"state"`
			} `json:"alerts"`
		}
		if err := p.get(ctx, "/api/v1/alerts", nil, &data); err != nil {
			seen = []string{err.Error()}
			return false, nil //nolint:nilerr // retried; the last error is reported
		}
		seen = nil
		for _, al := range data.Alerts {
			seen = append(seen, fmt.Sprintf("%s%v %s", al.Labels["alertname"], al.Labels, al.State))
			if al.Labels["alertname"] == a.alert && hasLabels(al.Labels, want) && (al.State == "pending" || al.State == "firing") {
				t.Logf("alert %s %s for %v", a.alert, al.State, want)
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Errorf("%v; active alerts: %v", err, seen)
	}
}

func hasLabels(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// provokeMemberDown makes the member of monitoredValkey refuse its exporter: the exporter
// user is turned off (ACL SETUSER, as the default user, open in a cluster without
// spec.users; the operator applies users only when they change), so the exporter answers
// each scrape with redis_up 0, as it does for a member down or not answering. The
// expression of ValkeyMemberDown is then true for the pod and the alert pending (for: 5m);
// with the user on again, redis_up is 1 again.
func provokeMemberDown(ctx context.Context, t *testing.T, p *promServer, exprs map[string]string) {
	t.Helper()
	pods, err := env.client.CoreV1().Pods(monitoringNamespace).List(ctx, metav1.ListOptions{LabelSelector: "valkey.io/cluster=" + monitoredValkey})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("the pod of %s: %d pods (%v)", monitoredValkey, len(pods.Items), err)
	}
	pod := pods.Items[0]
	ip := pod.Status.PodIP
	if out, err := redisCLI(ctx, ip, "", "", "ACL", "SETUSER", exporterUser, "off"); err != nil {
		t.Fatalf("turning the exporter's user off: %v\n%s", err, out)
	}
	on := func() {
		if out, err := redisCLI(context.WithoutCancel(ctx), ip, "", "", "ACL", "SETUSER", exporterUser, "on"); err != nil {
			t.Errorf("turning the exporter's user on again: %v\n%s", err, out)
		}
	}
	restored := false
	defer func() {
		if !restored {
			on()
		}
	}()
	wantAlertActive(ctx, t, p, exprs, provokedAlert{"ValkeyMemberDown", map[string]string{"pod": pod.Name}})
	on()
	restored = true
	up := fmt.Sprintf(`redis_up{namespace=%q, pod=%q} == 1`, monitoringNamespace, pod.Name)
	if err := poll(ctx, t, "redis_up 1 again for "+pod.Name, time.Minute, func(ctx context.Context) (bool, error) {
		n, err := p.query(ctx, up)
		return n == 1, err
	}); err != nil {
		t.Error(err)
	}
}

// removeFailedBackups checks that the backups the test made fail did so because the store
// refused their keys (Failed, UploadFailed), then deletes them: their state series leave
// Prometheus (the operators forget a deleted object's series) and their alerts end.
func removeFailedBackups(ctx context.Context, t *testing.T, p *promServer) {
	t.Helper()
	for _, b := range []struct {
		gvr          schema.GroupVersionResource
		name, family string
	}{
		{vkbGVR, failingValkeyBackup, "valkey_operator_backup_state"},
		{mgbGVR, failingMemgraphBackup, "memgraph_operator_backup_state"},
	} {
		u, err := env.dyn.Resource(b.gvr).Namespace(monitoringNamespace).Get(ctx, b.name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("%s %s: %v", b.gvr.Resource, b.name, err)
			continue
		}
		phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		reason := ""
		for _, c := range conds {
			if m, ok := c.(map[string]any); ok && m["type"] == "Completed" {
				reason = fmt.Sprint(m["reason"])
			}
		}
		if phase != "Failed" || reason != "UploadFailed" {
			t.Errorf("%s %s: phase %q, Completed reason %q; want Failed, UploadFailed (the store refuses the keys)", b.gvr.Resource, b.name, phase, reason)
		}
		if err := env.dyn.Resource(b.gvr).Namespace(monitoringNamespace).Delete(ctx, b.name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting %s %s: %v", b.gvr.Resource, b.name, err)
			continue
		}
		gone := fmt.Sprintf(`%s{namespace=%q, name=%q} or ALERTS{namespace=%q, name=%q}`, b.family, monitoringNamespace, b.name, monitoringNamespace, b.name)
		if err := poll(ctx, t, "the series and alerts of deleted "+b.name+" gone", time.Minute, func(ctx context.Context) (bool, error) {
			n, err := p.query(ctx, gone)
			return n == 0, err
		}); err != nil {
			t.Error(err)
		}
	}
}

// veltrixMember starts the VeltrixDB stand-in (bin/veltrix-sim, standalone, map index so
// that no kernel setting is needed) on loopback, sends it a command so that its command
// counter has a series, and returns its metrics address.
func veltrixMember(ctx context.Context, t *testing.T, dir string) string {
	t.Helper()
	free := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		return ln.Addr().String()
	}
	addr, metrics := free(), free()
	data := filepath.Join(dir, "veltrixdb")
	if err := os.MkdirAll(data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(env.root, "bin", "veltrix-sim"), "--addr", addr, "--metrics-addr", metrics,
		"--node-id", "veltrixdb-sim-0", "--data-dirs", data)
	cmd.Env = append(os.Environ(), "VELTRIXDB_INDEX=map")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("veltrix-sim (run `make build`): %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	err := poll(ctx, t, "veltrix-sim answering PING at "+addr, 30*time.Second, func(ctx context.Context) (bool, error) {
		c, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return false, nil //nolint:nilerr // not listening yet
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := io.WriteString(c, "PING\r\n"); err != nil {
			return false, nil //nolint:nilerr // retried
		}
		buf := make([]byte, 16)
		n, _ := c.Read(buf)
		return strings.HasPrefix(string(buf[:n]), "PONG"), nil
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	return metrics
}
