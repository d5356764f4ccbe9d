package nodeagent

import (
	"context"
	"fmt"
	"net"

	nodeagentv1 "github.com/opsuite/suite/proto/nodeagent/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"
)

// Embedded serves an agent implementation in-process over an in-memory connection and returns
// a client of it; Close stops both. Server options carry the agent's interceptors, so the
// same authentication runs as over the network; tokens, when given, are sent as over TLS.
func Embedded(srv nodeagentv1.NodeAgentServer, tokens TokenSource, opts Options, serverOpts ...grpc.ServerOption) (*Client, error) {
	lis := bufconn.Listen(1 << 20)
	gs := grpc.NewServer(serverOpts...)
	nodeagentv1.RegisterNodeAgentServer(gs, srv)
	go func() { _ = gs.Serve(lis) }()

	dialOpts := []grpc.DialOption{
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
	}
	if tokens != nil {
		dialOpts = append(dialOpts, grpc.WithPerRPCCredentials(tokenCredentials{src: tokens, secure: false}))
	}
	cc, err := grpc.NewClient("passthrough:///embedded-node-agent", dialOpts...)
	if err != nil {
		gs.Stop()
		return nil, fmt.Errorf("nodeagent: embedded client: %w", err)
	}
	c := New(cc, opts)
	c.close = func() error {
		err := cc.Close()
		gs.Stop()
		return err
	}
	return c, nil
}
