package server

import (
	nodeagentv1 "github.com/opsuite/suite/proto/nodeagent/v1"
	"github.com/opsuite/suite/services/node-agent/internal/auth"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
)

// NewHealth reports the agent's service as serving; one instance backs both listeners so a
// shutdown flips both at once.
func NewHealth() *health.Server {
	hs := health.NewServer()
	hs.SetServingStatus(nodeagentv1.NodeAgent_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	return hs
}

// NewGRPCServer wires the service with health, reflection and the auth policy; m (nil:
// none) counts every unary call, refused ones too.
func NewGRPCServer(srv nodeagentv1.NodeAgentServer, policy auth.Policy, creds credentials.TransportCredentials, hs *health.Server, m *Metrics) *grpc.Server {
	unary := []grpc.UnaryServerInterceptor{policy.Unary()}
	if m != nil {
		unary = append([]grpc.UnaryServerInterceptor{m.Unary()}, unary...)
	}
	gs := grpc.NewServer(grpc.Creds(creds),
		grpc.ChainUnaryInterceptor(unary...), grpc.ChainStreamInterceptor(policy.Stream()))
	nodeagentv1.RegisterNodeAgentServer(gs, srv)
	healthpb.RegisterHealthServer(gs, hs)
	reflection.Register(gs)
	return gs
}

// NewHealthOnlyServer serves grpc.health.v1 alone, in plaintext, for the kubelet's gRPC probes
// (which cannot speak TLS). It carries nothing else, so it needs no authentication.
func NewHealthOnlyServer(hs *health.Server) *grpc.Server {
	gs := grpc.NewServer()
	healthpb.RegisterHealthServer(gs, hs)
	return gs
}
