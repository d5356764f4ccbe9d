package e2e

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	nodeagentv1 "github.com/opsuite/suite/proto/nodeagent/v1"
)

// diskNearlyFull is the node-agent chart's alert on a prepared disk's filesystem.
const diskNearlyFull = "NodeAgentDiskNearlyFull"

// checkDiskNearlyFull provokes the node-agent chart's NodeAgentDiskNearlyFull on a disk
// the agent prepared (a real loop device with XFS): a file allocated under the PV path (in
// the agent's mount namespace, /proc/<pid>/root) leaves 5% of the filesystem free; a real
// Prometheus scraping the agent's metrics port with the chart's rules then finds the
// alert's expression true for that PV path and the alert pending (it fires after its
// 5m); the file removed, the expression is false again. The file is removed in any case.
func checkDiskNearlyFull(ctx context.Context, t *testing.T, s service, agent *corev1.Pod, d *nodeagentv1.PreparedDisk) {
	t.Helper()
	begin := time.Now()
	bin := prometheusBinary(t)
	pid, err := containerPID(agent)
	if err != nil {
		t.Fatal(err)
	}
	dir := fmt.Sprintf("/proc/%d/root%s", pid, d.PvPath)
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatalf("statfs %s (the PV path in the agent's mount namespace): %v", dir, err)
	}
	size, avail := int64(st.Blocks)*st.Bsize, int64(st.Bavail)*st.Bsize //nolint:gosec // a loop device's block counts fit
	fill := avail - size*5/100
	if fill <= 0 {
		t.Fatalf("the prepared filesystem has %d of %d bytes free already", avail, size)
	}
	path := filepath.Join(dir, "e2e-disk-nearly-full")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	removed := false
	remove := func() {
		if !removed {
			removed = true
			if err := os.Remove(path); err != nil {
				t.Errorf("removing %s: %v", path, err)
			}
		}
	}
	defer remove()
	err = syscall.Fallocate(int(f.Fd()), 0, 0, fill) //nolint:gosec // a file descriptor fits an int
	_ = f.Close()
	if err != nil {
		t.Fatalf("fallocate %d bytes in %s: %v", fill, path, err)
	}
	t.Logf("allocated %d of the %d bytes free in the %d-byte XFS of %s (PV path %s)", fill, avail, size, d.Device, d.PvPath)

	work := t.TempDir()
	rules, exprs := chartRuleFile(ctx, t, s, work)
	expr, ok := exprs[diskNearlyFull]
	if !ok {
		t.Fatalf("the %s chart renders no alert %s: %v", s.name, diskNearlyFull, exprs)
	}
	target := net.JoinHostPort(agent.Status.PodIP, fmt.Sprint(podPort(agent, "metrics")))
	cfg, err := yaml.Marshal(map[string]any{
		"global":     map[string]any{"scrape_interval": "2s", "scrape_timeout": "2s", "evaluation_interval": "2s"},
		"rule_files": []string{rules},
		"scrape_configs": []any{map[string]any{"job_name": s.namespace() + "/" + s.name, "static_configs": []any{
			map[string]any{"targets": []string{target}, "labels": map[string]string{"node": agent.Spec.NodeName}}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	cfgFile := filepath.Join(work, "prometheus.yml")
	if err := os.WriteFile(cfgFile, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	prom := startPrometheus(ctx, t, bin, cfgFile, work)
	mine := fmt.Sprintf(`(%s) and on (pv_path) node_agent_prepared_filesystem_size_bytes{pv_path=%q}`, expr, d.PvPath)
	var labels map[string]string
	err = poll(ctx, t, "the expression of "+diskNearlyFull+" true for "+d.PvPath, time.Minute, func(ctx context.Context) (bool, error) {
		labels = nil
		var data struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
			} `json:"result"`
		}
		if err := prom.get(ctx, "/api/v1/query", url.Values{"query": {mine}}, &data); err != nil {
			return false, nil //nolint:nilerr // retried; not scraped yet
		}
		if len(data.Result) == 1 {
			labels = data.Result[0].Metric
		}
		return labels != nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if labels["node"] != agent.Spec.NodeName || labels["fs_uuid"] != d.FilesystemUuid {
		t.Errorf("the alert's series %v, want node %s and fs_uuid %s", labels, agent.Spec.NodeName, d.FilesystemUuid)
	}
	pending := fmt.Sprintf(`ALERTS{alertname=%q, alertstate="pending", pv_path=%q}`, diskNearlyFull, d.PvPath)
	err = poll(ctx, t, diskNearlyFull+" pending", time.Minute, func(ctx context.Context) (bool, error) {
		n, err := prom.query(ctx, pending)
		return n == 1, err
	})
	if err != nil {
		t.Fatal(err)
	}

	remove()
	err = poll(ctx, t, "the expression of "+diskNearlyFull+" false once the file is gone", time.Minute, func(ctx context.Context) (bool, error) {
		n, err := prom.query(ctx, mine)
		return n == 0, err
	})
	if err != nil {
		t.Error(err)
	}
	t.Logf("%s: pending with 5%% free, resolved once freed, in %s", diskNearlyFull, since(begin))
}
