package controller

import (
	"context"

	nodeagentv1 "github.com/opsuite/suite/proto/nodeagent/v1"
	"github.com/opsuite/suite/shared/nodeagent"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// maxMapCount is the sysctl Memgraph needs raised.
const maxMapCount = "vm.max_map_count"

// NodeAgentSysctls checks vm.max_map_count through the node agents of a Pool. It asks for
// the minimum (EnsureSysctl): an agent allowed to raise sysctls raises it, as the HA
// chart's privileged init container would; any other agent only reports.
type NodeAgentSysctls struct{ Pool *nodeagent.Pool }

// MaxMapCount implements SysctlChecker.
func (n NodeAgentSysctls) MaxMapCount(ctx context.Context, node string, minimum int64) (SysctlReport, error) {
	agent := n.Pool.Node(node)
	resp, err := agent.EnsureSysctl(ctx, &nodeagentv1.EnsureSysctlRequest{Name: maxMapCount, Minimum: minimum})
	if status.Code(err) == codes.FailedPrecondition {
		// Below the minimum and the agent may not raise it: that is the answer, not a
		// failure; read the value for the log.
		resp, err = agent.EnsureSysctl(ctx, &nodeagentv1.EnsureSysctlRequest{Name: maxMapCount, Minimum: minimum, ReportOnly: true})
	}
	if err != nil {
		return SysctlReport{}, err
	}
	s := resp.GetStatus()
	return SysctlReport{Value: s.GetValue(), Minimum: s.GetMinimum(), Met: s.GetMet(), Raised: resp.GetRaised()}, nil
}
