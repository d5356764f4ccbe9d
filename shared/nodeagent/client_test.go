package nodeagent_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	nodeagentv1 "github.com/opsuite/suite/proto/nodeagent/v1"
	"github.com/opsuite/suite/shared/nodeagent"
	"github.com/opsuite/suite/shared/nodeagent/contract"
	"github.com/opsuite/suite/shared/nodeagent/nodeagenttest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// scriptedAgent answers GetNodeReport with the scripted errors first, then a report naming
// its node, and records the authorization header and the peer of every call.
type scriptedAgent struct {
	nodeagentv1.UnimplementedNodeAgentServer
	node   string
	mu     sync.Mutex
	errs   []error
	calls  int
	tokens []string
	peers  map[string]bool
}

func (a *scriptedAgent) GetNodeReport(ctx context.Context, _ *nodeagentv1.GetNodeReportRequest) (*nodeagentv1.GetNodeReportResponse, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls++
	md, _ := metadata.FromIncomingContext(ctx)
	a.tokens = append(a.tokens, md.Get("authorization")...)
	if p, ok := peer.FromContext(ctx); ok {
		if a.peers == nil {
			a.peers = map[string]bool{}
		}
		a.peers[p.Addr.String()] = true
	}
	if len(a.errs) > 0 {
		err := a.errs[0]
		a.errs = a.errs[1:]
		return nil, err
	}
	return &nodeagentv1.GetNodeReportResponse{NodeName: a.node}, nil
}

func (a *scriptedAgent) stats() (calls int, tokens []string, peers int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.calls, append([]string(nil), a.tokens...), len(a.peers)
}

// audienceTokens returns "<n>:<audience>" as the n-th token, so tests see both freshness and
// audience.
type audienceTokens struct {
	mu sync.Mutex
	n  int
}

func (a *audienceTokens) Token(_ context.Context, audience string) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.n++
	return strconv.Itoa(a.n) + ":" + audience, nil
}

var fast = nodeagent.Options{Timeout: 5 * time.Second, Attempts: 4, Backoff: time.Millisecond}

const serverName = "node-agent.opsuite-system.svc"

func newPKI(t *testing.T) *nodeagenttest.PKI { return nodeagenttest.MustPKI(t, serverName) }

// serveTLS serves an agent on host (an address of 127.0.0.0/8, port 0 for any) with the
// given certificate.
func serveTLS(t *testing.T, agent nodeagentv1.NodeAgentServer, cert tls.Certificate, addr string) string {
	t.Helper()
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}})))
	nodeagentv1.RegisterNodeAgentServer(gs, agent)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	return lis.Addr().String()
}

func newPool(t *testing.T, cfg nodeagent.Config) *nodeagent.Pool {
	t.Helper()
	p, err := nodeagent.NewPool(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// TestRetriesUnavailableAndExhaustedOnly: what the agent could not take now (Unavailable,
// ResourceExhausted from its per-address limiter) is tried again, up to Attempts; its other
// answers are final.
func TestRetriesUnavailableAndExhaustedOnly(t *testing.T) {
	ctx := context.Background()
	pki := newPKI(t)
	cases := []struct {
		name      string
		errs      []error
		wantCode  codes.Code
		wantCalls int
	}{
		{"unavailable then ok", []error{status.Error(codes.Unavailable, "x"), status.Error(codes.Unavailable, "x")}, codes.OK, 3},
		{"unavailable exhausts attempts", []error{
			status.Error(codes.Unavailable, "x"), status.Error(codes.Unavailable, "x"),
			status.Error(codes.Unavailable, "x"), status.Error(codes.Unavailable, "x"), status.Error(codes.Unavailable, "x"),
		}, codes.Unavailable, 4},
		{"resource exhausted then ok", []error{status.Error(codes.ResourceExhausted, "too many failed calls from this address: retry later")}, codes.OK, 2},
		{"resource exhausted exhausts attempts", []error{
			status.Error(codes.ResourceExhausted, "x"), status.Error(codes.Unavailable, "x"),
			status.Error(codes.ResourceExhausted, "x"), status.Error(codes.ResourceExhausted, "x"),
		}, codes.ResourceExhausted, 4},
		{"failed precondition is final", []error{status.Error(codes.FailedPrecondition, "boot disk")}, codes.FailedPrecondition, 1},
		{"permission denied is final", []error{status.Error(codes.PermissionDenied, "no")}, codes.PermissionDenied, 1},
		{"deadline is final", []error{status.Error(codes.DeadlineExceeded, "slow")}, codes.DeadlineExceeded, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			agent := &scriptedAgent{node: "node-a", errs: c.errs}
			addr := serveTLS(t, agent, pki.Cert, "127.0.0.1:0")
			p := newPool(t, nodeagent.Config{
				Resolver: nodeagent.StaticResolver{"node-a": addr}, CA: nodeagent.StaticCA{Pool: pki.Pool, ServerName: serverName},
				Tokens: &audienceTokens{}, Options: fast,
			})
			_, err := p.Node("node-a").GetNodeReport(ctx, &nodeagentv1.GetNodeReportRequest{})
			if status.Code(err) != c.wantCode {
				t.Fatalf("got %v, want %v", err, c.wantCode)
			}
			calls, tokens, peers := agent.stats()
			if calls != c.wantCalls {
				t.Fatalf("%d calls, want %d", calls, c.wantCalls)
			}
			// A token asked for every attempt, for node-a's agent; one connection for all.
			for i, tok := range tokens {
				if want := "Bearer " + strconv.Itoa(i+1) + ":" + contract.Audience("node-a"); tok != want {
					t.Fatalf("call %d sent %q, want %q", i, tok, want)
				}
			}
			if peers != 1 || p.Connections() != 1 {
				t.Fatalf("%d client connections seen by the agent, %d in the pool; want 1", peers, p.Connections())
			}
		})
	}
}

// TestBackoffEndsWithTheContext: a retry's pause never outlasts the caller's context; the
// call returns the agent's answer and the context's error as soon as the context ends.
func TestBackoffEndsWithTheContext(t *testing.T) {
	pki := newPKI(t)
	agent := &scriptedAgent{node: "node-a", errs: []error{
		status.Error(codes.ResourceExhausted, "x"), status.Error(codes.ResourceExhausted, "x"),
	}}
	addr := serveTLS(t, agent, pki.Cert, "127.0.0.1:0")
	p := newPool(t, nodeagent.Config{
		Resolver: nodeagent.StaticResolver{"node-a": addr}, CA: nodeagent.StaticCA{Pool: pki.Pool, ServerName: serverName},
		Tokens: &audienceTokens{}, Options: nodeagent.Options{Timeout: 5 * time.Second, Attempts: 4, Backoff: time.Minute},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	begin := time.Now()
	_, err := p.Node("node-a").GetNodeReport(ctx, &nodeagentv1.GetNodeReportRequest{})
	took := time.Since(begin)
	if status.Code(err) != codes.ResourceExhausted || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want ResourceExhausted joined with the context's deadline", err)
	}
	if calls, _, _ := agent.stats(); calls != 1 || took > 5*time.Second {
		t.Fatalf("%d calls in %s: want 1, returning when the 300ms context ends, not after the 30s-1m pause", calls, took)
	}
}

// TestReportOfAnotherNodeRefused: a report that names another node than the one asked (an
// agent posing as another node's, or lying) is refused with an error that names the node
// asked and not the agent's claim.
func TestReportOfAnotherNodeRefused(t *testing.T) {
	pki := newPKI(t)
	addr := serveTLS(t, &scriptedAgent{node: "node-b\nReady: True"}, pki.Cert, "127.0.0.1:0")
	p := newPool(t, nodeagent.Config{
		Resolver: nodeagent.StaticResolver{"node-a": addr}, CA: nodeagent.StaticCA{Pool: pki.Pool, ServerName: serverName},
		Tokens: &audienceTokens{}, Options: fast,
	})
	rep, err := p.Node("node-a").GetNodeReport(context.Background(), &nodeagentv1.GetNodeReportRequest{})
	var wrong *nodeagent.WrongNodeError
	if rep != nil || !errors.Is(err, nodeagent.ErrWrongNode) || !errors.As(err, &wrong) {
		t.Fatalf("report %v, error %v: want ErrWrongNode", rep, err)
	}
	if wrong.Asked != "node-a" || wrong.Reported != "node-b\nReady: True" || strings.Contains(err.Error(), "node-b") {
		t.Errorf("error %q (%+v): want node-a named, the claim kept out of the message", err, wrong)
	}
}

func TestTokenErrorIsUnauthenticatedAndNotRetried(t *testing.T) {
	pki := newPKI(t)
	agent := &scriptedAgent{node: "node-a"}
	addr := serveTLS(t, agent, pki.Cert, "127.0.0.1:0")
	p := newPool(t, nodeagent.Config{
		Resolver: nodeagent.StaticResolver{"node-a": addr}, CA: nodeagent.StaticCA{Pool: pki.Pool, ServerName: serverName},
		Tokens: nodeagent.TokenSourceFunc(func(context.Context, string) (string, error) {
			return "", errors.New("TokenRequest forbidden")
		}),
		Options: fast,
	})
	_, err := p.Node("node-a").GetNodeReport(context.Background(), &nodeagentv1.GetNodeReportRequest{})
	if calls, _, _ := agent.stats(); status.Code(err) != codes.Unauthenticated || calls != 0 {
		t.Fatalf("got %v after %d calls", err, calls)
	}
}

func TestPoolVerifiesTLS(t *testing.T) {
	ctx := context.Background()
	pki := newPKI(t)
	agent := &scriptedAgent{node: "node-a"}
	addr := serveTLS(t, agent, pki.Cert, "127.0.0.1:0")
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := lis.Addr().String()
	lis.Close()
	resolver := nodeagent.StaticResolver{"node-a": addr, "node-down": dead}

	cases := []struct {
		name string
		ca   nodeagent.CASource
		node string
		want codes.Code
	}{
		{"the chart's CA and name", nodeagent.StaticCA{Pool: pki.Pool, ServerName: serverName}, "node-a", codes.OK},
		{"another CA", nodeagent.StaticCA{Pool: newPKI(t).Pool, ServerName: serverName}, "node-a", codes.Unavailable},
		{"another name", nodeagent.StaticCA{Pool: pki.Pool, ServerName: "evil.example"}, "node-a", codes.Unavailable},
		{"agent down is retried then Unavailable", nodeagent.StaticCA{Pool: pki.Pool, ServerName: serverName}, "node-down", codes.Unavailable},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before, _, _ := agent.stats()
			p := newPool(t, nodeagent.Config{Resolver: resolver, CA: c.ca, Tokens: &audienceTokens{}, Options: fast})
			rep, err := p.Node(c.node).GetNodeReport(ctx, &nodeagentv1.GetNodeReportRequest{})
			if status.Code(err) != c.want {
				t.Fatalf("got %v, want %v", err, c.want)
			}
			after, _, _ := agent.stats()
			if c.want == codes.OK && (rep.NodeName != "node-a" || after != before+1) {
				t.Fatalf("report %v after %d calls", rep, after-before)
			}
			if c.want != codes.OK && after != before {
				t.Fatalf("the agent saw %d calls over an unverified connection", after-before)
			}
		})
	}
	t.Run("no agent on the node", func(t *testing.T) {
		p := newPool(t, nodeagent.Config{Resolver: resolver, CA: nodeagent.StaticCA{Pool: pki.Pool, ServerName: serverName}, Tokens: &audienceTokens{}, Options: fast})
		if _, err := p.Node("node-x").GetNodeReport(ctx, &nodeagentv1.GetNodeReportRequest{}); !errors.Is(err, nodeagent.ErrNoAgent) {
			t.Fatalf("got %v, want ErrNoAgent", err)
		}
	})
	t.Run("required fields", func(t *testing.T) {
		if _, err := nodeagent.NewPool(nodeagent.Config{}); err == nil {
			t.Fatal("a pool without resolver, CA and tokens")
		}
	})
}

func TestOneConnectionPerNode(t *testing.T) {
	pki := newPKI(t)
	agents := map[string]*scriptedAgent{"node-a": {node: "node-a"}, "node-b": {node: "node-b"}}
	resolver := nodeagent.StaticResolver{}
	for node, a := range agents {
		resolver[node] = serveTLS(t, a, pki.Cert, "127.0.0.1:0")
	}
	p := newPool(t, nodeagent.Config{Resolver: resolver, CA: nodeagent.StaticCA{Pool: pki.Pool, ServerName: serverName}, Tokens: &audienceTokens{}, Options: fast})
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range 40 {
		node := []string{"node-a", "node-b"}[i%2]
		wg.Go(func() {
			for range 5 {
				rep, err := p.Node(node).GetNodeReport(context.Background(), &nodeagentv1.GetNodeReportRequest{})
				if err == nil && rep.NodeName != node {
					err = errors.New("answered by " + rep.NodeName)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for node, a := range agents {
		if calls, _, peers := a.stats(); calls != 100 || peers != 1 {
			t.Errorf("%s: %d calls over %d connections, want 100 over 1", node, calls, peers)
		}
	}
	if n := p.Connections(); n != 2 {
		t.Errorf("the pool holds %d connections, want 2", n)
	}
}

// movingResolver is a node whose agent moves when told.
type movingResolver struct {
	mu   sync.Mutex
	addr string
}

func (m *movingResolver) Address(context.Context, string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.addr, nil
}

func (m *movingResolver) move(addr string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.addr = addr
}

// blockingAgent holds every GetNodeReport until its context ends.
type blockingAgent struct {
	nodeagentv1.UnimplementedNodeAgentServer
	started chan struct{}
}

func (b *blockingAgent) GetNodeReport(ctx context.Context, _ *nodeagentv1.GetNodeReportRequest) (*nodeagentv1.GetNodeReportResponse, error) {
	b.started <- struct{}{}
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestCallFollowsAMovedAgent: a call in flight when the pool learns that the agent moved (and
// closes the old connection) is retried at the new address, not failed as Canceled.
func TestCallFollowsAMovedAgent(t *testing.T) {
	pki := newPKI(t)
	old := &blockingAgent{started: make(chan struct{}, 1)}
	moved := &scriptedAgent{node: "node-a"}
	r := &movingResolver{addr: serveTLS(t, old, pki.Cert, "127.0.0.1:0")}
	newAddr := serveTLS(t, moved, pki.Cert, "127.0.0.1:0")
	p := newPool(t, nodeagent.Config{Resolver: r, CA: nodeagent.StaticCA{Pool: pki.Pool, ServerName: serverName}, Tokens: &audienceTokens{}, Options: fast})

	done := make(chan error, 1)
	go func() {
		rep, err := p.Node("node-a").GetNodeReport(context.Background(), &nodeagentv1.GetNodeReportRequest{})
		if err == nil && rep.NodeName != "node-a" {
			err = errors.New("answered by " + rep.NodeName)
		}
		done <- err
	}()
	<-old.started
	r.move(newAddr)
	// Another call sees the move first and replaces the connection.
	if _, err := p.Node("node-a").GetNodeReport(context.Background(), &nodeagentv1.GetNodeReportRequest{}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the call in flight during the move: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call in flight during the move never ended")
	}
	if calls, _, _ := moved.stats(); calls != 2 {
		t.Fatalf("the moved agent got %d calls, want 2", calls)
	}
}
