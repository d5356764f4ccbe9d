package server

import (
	"context"

	nodeagentv1 "github.com/opsuite/suite/proto/nodeagent/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// EnsureSysctl reports a sysctl and raises it to the minimum when the agent may. It never
// lowers a value: a node tuned higher by its owner stays that way.
func (s *Server) EnsureSysctl(_ context.Context, req *nodeagentv1.EnsureSysctlRequest) (*nodeagentv1.EnsureSysctlResponse, error) {
	min, err := validateSysctl(req)
	if err != nil {
		return nil, err
	}
	s.sysctlMu.Lock()
	defer s.sysctlMu.Unlock()

	name := req.GetName()
	v, err := s.host.ReadSysctl(name)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "%v", err)
	}
	resp := &nodeagentv1.EnsureSysctlResponse{
		PreviousValue: v,
		Status:        &nodeagentv1.SysctlStatus{Name: name, Value: v, Minimum: min, Met: v >= min},
	}
	if v >= min || req.GetReportOnly() {
		return resp, nil
	}
	if !s.opts.AllowRaiseSysctl {
		return nil, status.Errorf(codes.FailedPrecondition,
			"sysctl %s is %d, below the minimum %d, and the agent may not raise it (--allow-raise-sysctl is off)", name, v, min)
	}
	if err := s.host.WriteSysctl(name, min); err != nil {
		return nil, status.Errorf(codes.Internal, "%v", err)
	}
	after, err := s.host.ReadSysctl(name)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "%v", err)
	}
	if after < min {
		return nil, status.Errorf(codes.Internal, "sysctl %s read %d after writing %d", name, after, min)
	}
	s.log.Info("Raised sysctl", "name", name, "from", v, "to", after)
	resp.Status.Value, resp.Status.Met, resp.Raised = after, true, true
	return resp, nil
}
