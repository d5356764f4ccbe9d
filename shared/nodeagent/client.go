// Package nodeagent is the client of the node agent (nodeagent.v1.NodeAgent). A Pool finds
// the agent's pod on a node (through the manager's cache), keeps one TLS connection per node
// verified with the chart's CA (and, when the CA's server name is "*.<name>", that the
// certificate names that node), sends with every call a ServiceAccount token minted for that
// node's agent alone (audience contract.Audience(node)), and retries, pausing no longer than
// the caller's context, the calls the agent could not take (Unavailable, or ResourceExhausted
// from its per-address limiter) and nothing else. An operator makes its pool with
// NewForManager, from AgentsFromEnv (the NODE_AGENT_* variables its chart sets) or
// Release.Agents.
//
// RBAC the caller's ServiceAccount needs: create serviceaccounts/token on itself (TokenRequester);
// in the agent's namespace list and watch pods (PodResolver through a cache; get is enough for
// an uncached reader with a field selector) and get the ConfigMap <release>-ca (ConfigMapCA);
// cluster-wide the agent's <release>-reader or <release>-preparer ClusterRole. The node-agent
// chart's <release>-client ClusterRole, bound in the agent's namespace, covers the pods and
// the ConfigMap.
package nodeagent

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	nodeagentv1 "github.com/opsuite/suite/proto/nodeagent/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
)

// TokenSource returns the bearer token for one call to the agent whose audience is given
// (contract.Audience(node)). It is asked on every call, so it should cache.
type TokenSource interface {
	Token(ctx context.Context, audience string) (string, error)
}

// TokenSourceFunc adapts a function.
type TokenSourceFunc func(ctx context.Context, audience string) (string, error)

// Token implements TokenSource.
func (f TokenSourceFunc) Token(ctx context.Context, audience string) (string, error) {
	return f(ctx, audience)
}

// StaticToken sends the same token to every agent: for diagnostics and tests only, since a
// token accepted by one node's agent is refused by all others.
type StaticToken string

// Token implements TokenSource.
func (s StaticToken) Token(context.Context, string) (string, error) { return string(s), nil }

// Options tune calls.
type Options struct {
	// Timeout bounds each attempt; preparing large disks takes a while. Default 2 minutes.
	Timeout time.Duration
	// Attempts is the most tries of one call, retrying Unavailable and ResourceExhausted only.
	// Default 4.
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

// Client calls one node's agent. A Pool's client looks the connection up on every attempt, so
// a retry follows the agent's pod when it moves.
type Client struct {
	node string
	conn func(ctx context.Context) (grpc.ClientConnInterface, error)
	opts Options
}

// Node is the node whose agent the client calls.
func (c *Client) Node() string { return c.node }

// GetNodeReport reads the node's report. A report naming another node than the one asked
// is refused (a *WrongNodeError): whatever answered is not that node's agent, or lies.
func (c *Client) GetNodeReport(ctx context.Context, req *nodeagentv1.GetNodeReportRequest) (*nodeagentv1.GetNodeReportResponse, error) {
	resp, err := call(ctx, c, req, nodeagentv1.NodeAgentClient.GetNodeReport)
	if err == nil && resp.GetNodeName() != c.node {
		return nil, &WrongNodeError{Asked: c.node, Reported: resp.GetNodeName()}
	}
	return resp, err
}

// ErrWrongNode matches a *WrongNodeError with errors.Is.
var ErrWrongNode = errors.New("nodeagent: the agent reported another node")

// WrongNodeError is a report that names another node than the one asked. Its message names
// the node asked only: Reported is the agent's word, for the log, not for conditions.
type WrongNodeError struct {
	Asked, Reported string
}

func (e *WrongNodeError) Error() string {
	return "nodeagent: the agent of node " + e.Asked + " reported another node"
}

// Is makes errors.Is(err, ErrWrongNode) true.
func (e *WrongNodeError) Is(target error) bool { return target == ErrWrongNode }

// PrepareDisks prepares disks; the agent makes a repeat a no-op, so a retry is safe.
func (c *Client) PrepareDisks(ctx context.Context, req *nodeagentv1.PrepareDisksRequest) (*nodeagentv1.PrepareDisksResponse, error) {
	return call(ctx, c, req, nodeagentv1.NodeAgentClient.PrepareDisks)
}

// ReleaseDisks releases disks; releasing what is already released succeeds.
func (c *Client) ReleaseDisks(ctx context.Context, req *nodeagentv1.ReleaseDisksRequest) (*nodeagentv1.ReleaseDisksResponse, error) {
	return call(ctx, c, req, nodeagentv1.NodeAgentClient.ReleaseDisks)
}

// EnsureSysctl reports or raises a sysctl.
func (c *Client) EnsureSysctl(ctx context.Context, req *nodeagentv1.EnsureSysctlRequest) (*nodeagentv1.EnsureSysctlResponse, error) {
	return call(ctx, c, req, nodeagentv1.NodeAgentClient.EnsureSysctl)
}

// call runs one method with a timeout per attempt, retrying Unavailable, ResourceExhausted
// (the agent's per-address limiter: too many failed calls from this address, earned back
// over time) and a connection the pool closed; every other code is the agent's answer (a
// refusal, bad input, denied access) and would not change. The pause between attempts ends
// with the caller's context.
func call[Req, Resp any](ctx context.Context, c *Client, req Req, method func(nodeagentv1.NodeAgentClient, context.Context, Req, ...grpc.CallOption) (Resp, error)) (Resp, error) {
	var zero Resp
	pause := c.opts.Backoff
	var err error
	for attempt := 1; ; attempt++ {
		var cc grpc.ClientConnInterface
		if cc, err = c.conn(ctx); err != nil {
			return zero, err
		}
		actx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
		var resp Resp
		resp, err = method(nodeagentv1.NewNodeAgentClient(cc), actx, req)
		cancel()
		if err == nil {
			return resp, nil
		}
		// Canceled while the caller's context lives means the pool closed the connection under
		// the call: the agent moved, and the next attempt reaches it where it is now.
		code := status.Code(err)
		retry := code == codes.Unavailable || code == codes.ResourceExhausted || code == codes.Canceled
		if !retry || attempt >= c.opts.Attempts || ctx.Err() != nil {
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

// tokenCredentials puts "authorization: Bearer <token>" on every call, the token minted for
// the one agent the connection reaches.
type tokenCredentials struct {
	src      TokenSource
	audience string
}

func (t tokenCredentials) GetRequestMetadata(ctx context.Context, _ ...string) (map[string]string, error) {
	tok, err := t.src.Token(ctx, t.audience)
	if err != nil {
		// Unauthenticated, not Unavailable: a missing token does not fix itself by retrying.
		return nil, status.Errorf(codes.Unauthenticated, "getting a token for %s: %v", t.audience, err)
	}
	return map[string]string{"authorization": "Bearer " + tok}, nil
}

// RequireTransportSecurity keeps tokens off plaintext connections.
func (t tokenCredentials) RequireTransportSecurity() bool { return true }

var _ credentials.PerRPCCredentials = tokenCredentials{}
