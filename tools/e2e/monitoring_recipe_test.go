package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadmeMonitoringRecipe runs the README's Monitoring recipe (the shell block after "On the
// local cluster" in section "Monitoring") on the suite's cluster, as written except two
// assignments: KUBECONFIG (the suite's cluster) and NS (the namespace the suite installs
// the node-agent chart in). It must print every cluster kind's MetricsMonitored column and
// a node agent's own series, the gRPC request counters among them.
func TestReadmeMonitoringRecipe(t *testing.T) {
	needInstalled(t, "node-agent")
	b, err := os.ReadFile(filepath.Join(env.root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), "\n## Monitoring: what is scraped, per cluster\n")
	if !ok {
		t.Fatal("README has no section \"Monitoring: what is scraped, per cluster\"")
	}
	_, after, ok = strings.Cut(after, "On the local cluster")
	if !ok {
		t.Fatal("README's Monitoring has no local-cluster recipe")
	}
	_, after, ok = strings.Cut(after, "```sh\n")
	block, _, ok2 := strings.Cut(after, "```\n")
	if !ok || !ok2 {
		t.Fatal("README's Monitoring recipe is not a sh block")
	}
	var lines []string
	for _, l := range strings.Split(block, "\n") {
		switch {
		case strings.HasPrefix(l, "export KUBECONFIG="):
			l = "export KUBECONFIG=" + env.kubeconfig
		case strings.HasPrefix(l, "NS="):
			l = "NS=" + serviceByName("node-agent").namespace()
		}
		lines = append(lines, l)
	}
	cmd := exec.CommandContext(t.Context(), "bash", "-e", "-o", "pipefail", "-c", strings.Join(lines, "\n"))
	cmd.Dir = env.root
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("the recipe failed: %v\n%s", err, out.String())
	}
	for _, want := range []string{"METRICS", `node_agent_grpc_requests_total{code="OK",method="/nodeagent.v1.NodeAgent/GetNodeReport"}`, "node_agent_prepared_disks{phase=\"ready\"}"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the recipe's output lacks %q:\n%s", want, out.String())
		}
	}
	t.Logf("the recipe printed:\n%s", out.String())
}
