package controller_test

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/opsuite/suite/services/memgraph-operator/internal/controller"
	"github.com/opsuite/suite/services/node-agent/agenttest"
	"github.com/opsuite/suite/shared/nodeagent"
)

// TestNodeAgentSysctls asks the real node agent (in process, over TLS gRPC, not allowed to
// raise sysctls) for this host's vm.max_map_count: below the minimum it is an unmet
// answer with the value, not an error; at or above it, met.
func TestNodeAgentSysctls(t *testing.T) {
	raw, err := os.ReadFile("/proc/sys/vm/max_map_count")
	if err != nil {
		t.Fatal(err)
	}
	host, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	a := agenttest.Start(t, agenttest.Options{Node: "node-a", NoAuth: true})
	check := controller.NodeAgentSysctls{Pool: agenttest.Pool(t, nodeagent.StaticToken("unused"), a)}

	for _, minimum := range []int64{host + 1, host} {
		rep, err := check.MaxMapCount(t.Context(), "node-a", minimum)
		if err != nil {
			t.Fatalf("minimum %d: %v", minimum, err)
		}
		if rep.Value != host || rep.Met != (host >= minimum) || rep.Raised {
			t.Errorf("minimum %d: %+v, want value %d met %v", minimum, rep, host, host >= minimum)
		}
	}
	if _, err := check.MaxMapCount(t.Context(), "node-without-agent", 1); err == nil {
		t.Error("a node without an agent answered")
	}
}
