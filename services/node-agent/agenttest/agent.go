// Package agenttest runs the real node agent in process for other modules' integration
// tests: internal/server on the real host code, with its own agent and PV roots in a
// temporary directory, loop devices allowed, behind the real gRPC stack (TLS, the
// authentication and authorization interceptor against a given apiserver) over an in-memory
// listener, reached through a shared/nodeagent Pool. Tests that prepare disks must run as
// root, in a private mount namespace (PrivateMountNamespace in TestMain). The agent's own
// tests share its host helpers too: MountPoints, UnmountUnder and Blkid look at mounts and
// devices without going through the agent.
package agenttest

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	nodeagentv1 "github.com/opsuite/suite/proto/nodeagent/v1"
	"github.com/opsuite/suite/services/node-agent/internal/auth"
	"github.com/opsuite/suite/services/node-agent/internal/host"
	"github.com/opsuite/suite/services/node-agent/internal/kube"
	"github.com/opsuite/suite/services/node-agent/internal/server"
	"github.com/opsuite/suite/shared/nodeagent"
	"github.com/opsuite/suite/shared/nodeagent/nodeagenttest"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/test/bufconn"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// ServerName is the name on the in-process agents' certificate.
const ServerName = "node-agent.agenttest.svc"

// Options describe one agent.
type Options struct {
	// Node is the agent's node name; default "node-a".
	Node string
	// REST is the apiserver the agent reviews tokens and access with (TokenReview for
	// audience contract.Audience(Node), SubjectAccessReview on the node), as in a cluster. It
	// also reads the Node's labels unless Labels is set.
	REST *rest.Config
	// ReviewCacheTTL, when set, is how long the agent reuses token and access reviews,
	// allowed or denied (the agent's defaults: 10s and 5s); short, a test sees RBAC it
	// changes at once.
	ReviewCacheTTL time.Duration
	// NoAuth serves without authentication and authorization (any token is accepted); only
	// when REST is nil, and only if the test says so.
	NoAuth bool
	// Labels are the node's labels, instead of reading the Node.
	Labels map[string]string
	// AllowRaiseSysctl lets EnsureSysctl raise values (of the real host!).
	AllowRaiseSysctl bool
	// SysctlMinimums are reported in every node report.
	SysctlMinimums map[string]int64
	// Log receives the agent's logs; default: discarded.
	Log *slog.Logger
}

// Agent is one node's agent, running until the test ends.
type Agent struct {
	// Node is the agent's node name.
	Node string
	// Root holds AgentRoot, PVRoot, the state file and the loop devices' backing files.
	Root, AgentRoot, PVRoot string

	t      testing.TB
	opts   server.Options
	labels server.NodeLabels
	log    *slog.Logger
	lis    *bufconn.Listener
	svc    *forwarder
	loops  []string
}

// Start runs an agent; it stops, and everything it mounted under Root is unmounted, when the
// test ends.
func Start(t testing.TB, o Options) *Agent {
	t.Helper()
	if o.Node == "" {
		o.Node = "node-a"
	}
	if o.REST == nil && !o.NoAuth {
		t.Fatal("agenttest: give REST (the apiserver that authenticates callers) or set NoAuth")
	}
	if o.REST != nil && o.NoAuth {
		t.Fatal("agenttest: NoAuth with REST: choose one")
	}
	if o.Log == nil {
		o.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	pki, err := sharedPKI()
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	a := &Agent{
		Node: o.Node, Root: root, AgentRoot: filepath.Join(root, "agent"), PVRoot: filepath.Join(root, "pv"),
		t: t, log: o.Log, lis: bufconn.Listen(1 << 20), svc: &forwarder{},
	}
	a.opts = server.Options{
		NodeName: o.Node, Version: "agenttest", PoolLabelPrefix: "pool.opsuite.io",
		AgentRoot: a.AgentRoot, PVRoot: a.PVRoot, StateFile: filepath.Join(a.AgentRoot, "state.json"),
		AllowRaiseSysctl: o.AllowRaiseSysctl, AllowLoopDevices: true, SysctlMinimums: o.SysctlMinimums,
	}
	policy := allowAll()
	switch {
	case o.Labels != nil:
		a.labels = server.StaticLabels(o.Labels)
	case o.REST == nil:
		a.labels = server.StaticLabels{}
	}
	if o.REST != nil {
		cs, err := kubernetes.NewForConfig(o.REST)
		if err != nil {
			t.Fatal(err)
		}
		policy = kube.NewPolicy(cs, o.Node, auth.CacheConfig{Allowed: o.ReviewCacheTTL, Denied: o.ReviewCacheTTL}, o.Log)
		if a.labels == nil {
			a.labels = &kube.NodeLabels{Client: cs, NodeName: o.Node, TTL: time.Second}
		}
	}
	a.Restart()
	gs := server.NewGRPCServer(a.svc, policy, credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{pki.Cert}, MinVersion: tls.VersionTLS12,
	}), server.NewHealth(), nil)
	go func() { _ = gs.Serve(a.lis) }()
	t.Cleanup(func() {
		gs.Stop()
		UnmountUnder(t, root)
	})
	return a
}

// Restart replaces the agent's server with a new one on the same state and restores what it
// had prepared, as when the agent's pod restarts; calls keep going to the same address.
// AttachLoop restarts the agent too, with the new device added to its --device-allow.
func (a *Agent) Restart() {
	a.t.Helper()
	cfg := host.DefaultConfig()
	// The agent sees the loop devices attached for it and nothing else: never the host's
	// disks, never another agent's loops (the first entry matches no device). It offers them
	// explicitly, as the local cluster's agents do theirs.
	cfg.Only = append([]string{"/dev/agenttest-none"}, a.loops...)
	cfg.DeviceAllow = a.loops
	h, err := host.New(cfg)
	if err != nil {
		a.t.Fatal(err)
	}
	srv, err := server.New(a.opts, h, a.labels, a.log)
	if err != nil {
		a.t.Fatal(err)
	}
	if err := srv.Restore(context.Background()); err != nil {
		a.t.Fatalf("agenttest: restoring node %s: %v", a.Node, err)
	}
	a.svc.set(srv)
}

// PV is a PV source path under the agent's PV root.
func (a *Agent) PV(name string) string { return filepath.Join(a.PVRoot, name) }

// address is the agent's name on the in-memory network.
func (a *Agent) address() string { return "agenttest-" + a.Node }

// Config is a shared/nodeagent configuration reaching these agents by their node names, with
// their CA and the given tokens (nodeagent.TokenRequester for a ServiceAccount against the
// agents' apiserver; any nodeagent.StaticToken for NoAuth agents).
func Config(tokens nodeagent.TokenSource, agents ...*Agent) nodeagent.Config {
	pki, _ := sharedPKI() // Start made it
	addrs := nodeagent.StaticResolver{}
	listeners := map[string]*bufconn.Listener{}
	for _, a := range agents {
		addrs[a.Node] = a.address()
		listeners[a.address()] = a.lis
	}
	return nodeagent.Config{
		Resolver: addrs,
		CA:       nodeagent.StaticCA{Pool: pki.Pool, ServerName: ServerName},
		Tokens:   tokens,
		Options:  nodeagent.Options{Timeout: 2 * time.Minute, Attempts: 3, Backoff: 50 * time.Millisecond},
		DialContext: func(ctx context.Context, addr string) (net.Conn, error) {
			lis, ok := listeners[addr]
			if !ok {
				return nil, fmt.Errorf("agenttest: no agent at %s", addr)
			}
			return lis.DialContext(ctx)
		},
	}
}

// Pool is a nodeagent.Pool over Config, closed when the test ends.
func Pool(t testing.TB, tokens nodeagent.TokenSource, agents ...*Agent) *nodeagent.Pool {
	t.Helper()
	p, err := nodeagent.NewPool(Config(tokens, agents...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

var (
	pkiOnce sync.Once
	pki     *nodeagenttest.PKI
	pkiErr  error
)

// sharedPKI is one CA and certificate for every agent of the process, so one Pool reaches
// them all.
func sharedPKI() (*nodeagenttest.PKI, error) {
	pkiOnce.Do(func() { pki, pkiErr = nodeagenttest.NewPKI(ServerName) })
	return pki, pkiErr
}

// forwarder is the service the gRPC server holds; Restart swaps the server behind it.
type forwarder struct {
	nodeagentv1.UnimplementedNodeAgentServer
	mu  sync.RWMutex
	srv *server.Server
}

func (f *forwarder) set(s *server.Server) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.srv = s
}

func (f *forwarder) get() *server.Server {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.srv
}

func (f *forwarder) GetNodeReport(ctx context.Context, r *nodeagentv1.GetNodeReportRequest) (*nodeagentv1.GetNodeReportResponse, error) {
	return f.get().GetNodeReport(ctx, r)
}

func (f *forwarder) PrepareDisks(ctx context.Context, r *nodeagentv1.PrepareDisksRequest) (*nodeagentv1.PrepareDisksResponse, error) {
	return f.get().PrepareDisks(ctx, r)
}

func (f *forwarder) ReleaseDisks(ctx context.Context, r *nodeagentv1.ReleaseDisksRequest) (*nodeagentv1.ReleaseDisksResponse, error) {
	return f.get().ReleaseDisks(ctx, r)
}

func (f *forwarder) EnsureSysctl(ctx context.Context, r *nodeagentv1.EnsureSysctlRequest) (*nodeagentv1.EnsureSysctlResponse, error) {
	return f.get().EnsureSysctl(ctx, r)
}

// allowAll is the policy of a NoAuth agent: every caller is "agenttest" and may do anything.
func allowAll() auth.Policy {
	return auth.Policy{Authn: anyone{}, Authz: anyone{}}
}

type anyone struct{}

func (anyone) Authenticate(context.Context, string) (auth.Identity, error) {
	return auth.Identity{User: "agenttest"}, nil
}

func (anyone) Authorize(context.Context, auth.Identity, auth.Attributes) (bool, string, error) {
	return true, "", nil
}
