package nodeagent_test

import (
	"context"
	"strings"
	"testing"
	"time"

	nodeagentv1 "github.com/opsuite/suite/proto/nodeagent/v1"
	"github.com/opsuite/suite/shared/nodeagent"
	"github.com/opsuite/suite/shared/nodeagent/contract"
	"github.com/opsuite/suite/shared/testenv"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestPerNodeServerNames: with the chart's serverName "*.<name>", a client reaches node-a
// only through a certificate naming node-a.<name> exactly; node-b's agent, a wildcard
// certificate or the shared name cannot answer for node-a, even from node-a's address.
func TestPerNodeServerNames(t *testing.T) {
	ctx := context.Background()
	ca := testenv.NewCA(t, "node-agent-ca")
	perNode := contract.PerNodeServerNamePrefix + serverName
	nodeName := func(node string) string { return contract.NodeServerName(perNode, node) }
	if got := nodeName("node-a"); got != "node-a."+serverName {
		t.Fatalf("NodeServerName: %q", got)
	}
	if got := contract.NodeServerName(serverName, "node-a"); got != serverName {
		t.Fatalf("a shared name is kept: %q", got)
	}
	serve := func(node string, names ...string) string {
		return serveTLS(t, &scriptedAgent{node: node}, ca.KeyPair(t, names...), "127.0.0.1:0")
	}
	agentA := serve("node-a", nodeName("node-a"))
	agentB := serve("node-b", nodeName("node-b"))
	wildcard := serve("node-a", "*."+serverName)
	shared := serve("node-a", serverName)
	both := serve("node-a", nodeName("node-a"), serverName)

	cases := []struct {
		name, caName, node, addr string
		want                     codes.Code
		message                  string
	}{
		{"node-a's own certificate", perNode, "node-a", agentA, codes.OK, ""},
		{"node-b's own certificate", perNode, "node-b", agentB, codes.OK, ""},
		{"node-b's agent at node-a's address", perNode, "node-a", agentB, codes.Unavailable, "node-a." + serverName},
		{"a wildcard certificate", perNode, "node-a", wildcard, codes.Unavailable, "does not name node-a." + serverName + " itself"},
		{"the shared name", perNode, "node-a", shared, codes.Unavailable, "node-a." + serverName},
		{"a certificate with both names, while migrating", perNode, "node-a", both, codes.OK, ""},
		{"shared-name clients keep working while migrating", serverName, "node-a", both, codes.OK, ""},
		{"shared-name clients, shared certificate", serverName, "node-a", shared, codes.OK, ""},
		{"a node whose name cannot be a DNS name", perNode, "Node_A", agentA, codes.Unknown, "no valid certificate name"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := newPool(t, nodeagent.Config{
				Resolver: nodeagent.StaticResolver{c.node: c.addr},
				CA:       nodeagent.StaticCA{Pool: ca.Pool(), ServerName: c.caName},
				Tokens:   &audienceTokens{},
				Options:  nodeagent.Options{Timeout: 3 * time.Second, Attempts: 1},
			})
			rep, err := p.Node(c.node).GetNodeReport(ctx, &nodeagentv1.GetNodeReportRequest{})
			if got := status.Code(err); got != c.want || (err != nil && !strings.Contains(err.Error(), c.message)) {
				t.Fatalf("got %v, want %v with %q", err, c.want, c.message)
			}
			if c.want == codes.OK && rep.NodeName != c.node {
				t.Fatalf("report of %q", rep.NodeName)
			}
		})
	}
}
