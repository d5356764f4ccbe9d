// Package nodeagent is the client of the node agent (nodeagent.v1.NodeAgent): it finds the
// agent's pod on a node, dials it over TLS verified with the chart's CA, sends a fresh
// ServiceAccount token with every call, and retries calls the agent could not take
// (Unavailable) and nothing else. Embedded serves an agent in-process for tests.
package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	nodeagentv1 "github.com/opsuite/suite/proto/nodeagent/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
)

// Audience is the token audience the agent accepts.
const Audience = "node-agent"

// TokenSource returns the bearer token for one call. It is asked on every call, so a rotated
// projected token is picked up without redialing.
type TokenSource interface {
	Token(ctx context.Context) (string, error)
}

// TokenSourceFunc adapts a function.
type TokenSourceFunc func(ctx context.Context) (string, error)

// Token implements TokenSource.
func (f TokenSourceFunc) Token(ctx context.Context) (string, error) { return f(ctx) }

// FileTokenSource reads a projected ServiceAccount token (audience node-agent) from a file on
// each call; the kubelet rewrites the file before the token expires.
type FileTokenSource string

// Token implements TokenSource.
func (f FileTokenSource) Token(context.Context) (string, error) {
	b, err := os.ReadFile(string(f))
	if err != nil {
		return "", fmt.Errorf("reading token: %w", err)
	}
	t := strings.TrimSpace(string(b))
	if t == "" {
		return "", fmt.Errorf("token file %s is empty", string(f))
	}
	return t, nil
}

// Options tune calls.
type Options struct {
	// Timeout bounds each attempt; preparing large disks takes a while. Default 2 minutes.
	Timeout time.Duration
	// Attempts is the most tries of one call, retrying Unavailable only. Default 4.
	Attempts int
	// Backoff is the first pause between attempts, doubled each time with jitter. Default 200ms.
	Backoff time.Duration
}

func (o Options) withDefaults() Options {
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Minute
	}
	if o.Attempts <= 0 {
		o.Attempts = 4
	}
	if o.Backoff <= 0 {
		o.Backoff = 200 * time.Millisecond
	}
	return o
}

// Client calls one node's agent.
type Client struct {
	rpc   nodeagentv1.NodeAgentClient
	opts  Options
	close func() error
}

// New wraps an existing connection.
func New(cc grpc.ClientConnInterface, opts Options) *Client {
	return &Client{rpc: nodeagentv1.NewNodeAgentClient(cc), opts: opts.withDefaults(), close: func() error { return nil }}
}

// Close releases the connection (and stops an embedded agent).
func (c *Client) Close() error { return c.close() }

// GetNodeReport reads the node's report.
func (c *Client) GetNodeReport(ctx context.Context, req *nodeagentv1.GetNodeReportRequest) (*nodeagentv1.GetNodeReportResponse, error) {
	return call(ctx, c, req, c.rpc.GetNodeReport)
}

// PrepareDisks prepares disks; the agent makes a repeat a no-op, so a retry is safe.
func (c *Client) PrepareDisks(ctx context.Context, req *nodeagentv1.PrepareDisksRequest) (*nodeagentv1.PrepareDisksResponse, error) {
	return call(ctx, c, req, c.rpc.PrepareDisks)
}

// ReleaseDisks releases disks; releasing what is already released succeeds.
func (c *Client) ReleaseDisks(ctx context.Context, req *nodeagentv1.ReleaseDisksRequest) (*nodeagentv1.ReleaseDisksResponse, error) {
	return call(ctx, c, req, c.rpc.ReleaseDisks)
}

// EnsureSysctl reports or raises a sysctl.
func (c *Client) EnsureSysctl(ctx context.Context, req *nodeagentv1.EnsureSysctlRequest) (*nodeagentv1.EnsureSysctlResponse, error) {
	return call(ctx, c, req, c.rpc.EnsureSysctl)
}

// call runs one method with a timeout per attempt, retrying Unavailable only: every other
// code is the agent's answer (a refusal, bad input, denied access) and would not change.
func call[Req, Resp any](ctx context.Context, c *Client, req Req, method func(context.Context, Req, ...grpc.CallOption) (Resp, error)) (Resp, error) {
	var zero Resp
	pause := c.opts.Backoff
	var err error
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
		var resp Resp
		resp, err = method(actx, req)
		cancel()
		if err == nil {
			return resp, nil
		}
		if status.Code(err) != codes.Unavailable || attempt >= c.opts.Attempts || ctx.Err() != nil {
			return zero, err
		}
		jittered := pause/2 + rand.N(pause)
		select {
		case <-ctx.Done():
			return zero, errors.Join(err, ctx.Err())
		case <-time.After(jittered):
		}
		pause *= 2
	}
}

// tokenCredentials puts "authorization: Bearer <token>" on every call.
type tokenCredentials struct {
	src    TokenSource
	secure bool
}

func (t tokenCredentials) GetRequestMetadata(ctx context.Context, _ ...string) (map[string]string, error) {
	tok, err := t.src.Token(ctx)
	if err != nil {
		// Unauthenticated, not Unavailable: a missing token does not fix itself by retrying.
		return nil, status.Errorf(codes.Unauthenticated, "getting a token: %v", err)
	}
	return map[string]string{"authorization": "Bearer " + tok}, nil
}

func (t tokenCredentials) RequireTransportSecurity() bool { return t.secure }

var _ credentials.PerRPCCredentials = tokenCredentials{}
