package nodeagent

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"

	"github.com/opsuite/suite/shared/nodeagent/contract"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Config says how a Pool reaches agents.
type Config struct {
	// Resolver finds the address of a node's agent (PodResolver in a cluster).
	Resolver Resolver
	// CA verifies the agents' certificate and names it (ConfigMapCA or DirCA in a cluster).
	CA CASource
	// Tokens supplies each call's token for the node's audience (TokenRequester in a cluster).
	Tokens TokenSource
	// Options tune the calls.
	Options Options
	// DialContext replaces TCP; tests reach in-process agents with it.
	DialContext func(ctx context.Context, addr string) (net.Conn, error)
}

// Pool keeps one connection per node and hands out clients. A connection is closed when the
// node's agent moves to another address or no agent runs there any more; an idle one releases
// its transport on its own (gRPC's idle timeout).
type Pool struct {
	cfg   Config
	mu    sync.Mutex
	conns map[string]*nodeConn
}

type nodeConn struct {
	addr string
	cc   *grpc.ClientConn
}

// NewPool checks cfg and makes an empty pool; it connects on first use.
func NewPool(cfg Config) (*Pool, error) {
	if cfg.Resolver == nil || cfg.CA == nil || cfg.Tokens == nil {
		return nil, errors.New("nodeagent: Resolver, CA and Tokens are required")
	}
	cfg.Options = cfg.Options.withDefaults()
	return &Pool{cfg: cfg, conns: map[string]*nodeConn{}}, nil
}

// Node returns the client of a node's agent. It is cheap: the connection is found (or made)
// on each call.
func (p *Pool) Node(node string) *Client {
	return &Client{node: node, opts: p.cfg.Options, conn: func(ctx context.Context) (grpc.ClientConnInterface, error) {
		return p.conn(ctx, node)
	}}
}

// Close closes every connection.
func (p *Pool) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	for node, c := range p.conns {
		errs = append(errs, c.cc.Close())
		delete(p.conns, node)
	}
	return errors.Join(errs...)
}

// Connections is how many nodes have a connection, for tests and metrics.
func (p *Pool) Connections() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

func (p *Pool) conn(ctx context.Context, node string) (grpc.ClientConnInterface, error) {
	addr, err := p.cfg.Resolver.Address(ctx, node)
	if errors.Is(err, ErrNoAgent) {
		p.drop(node)
	}
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	if c := p.conns[node]; c != nil && c.addr == addr {
		p.mu.Unlock()
		return c.cc, nil
	}
	p.mu.Unlock()

	// A new connection, made outside the lock: loading the CA may read the apiserver.
	cc, err := p.dial(ctx, node, addr)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.conns[node]; c != nil {
		if c.addr == addr { // another call made it first
			_ = cc.Close()
			return c.cc, nil
		}
		_ = c.cc.Close()
	}
	p.conns[node] = &nodeConn{addr: addr, cc: cc}
	return cc, nil
}

// drop closes a node's connection: its agent is gone.
func (p *Pool) drop(node string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.conns[node]; c != nil {
		_ = c.cc.Close()
		delete(p.conns, node)
	}
}

func (p *Pool) dial(ctx context.Context, node, addr string) (*grpc.ClientConn, error) {
	pool, serverName, err := p.cfg.CA.CA(ctx)
	if err != nil {
		return nil, fmt.Errorf("nodeagent: loading the agents' CA: %w", err)
	}
	tc, err := tlsConfig(pool, serverName, node)
	if err != nil {
		return nil, err
	}
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(credentials.NewTLS(tc)),
		grpc.WithPerRPCCredentials(tokenCredentials{src: p.cfg.Tokens, audience: contract.Audience(node)}),
	}
	if p.cfg.DialContext != nil {
		opts = append(opts, grpc.WithContextDialer(p.cfg.DialContext))
	}
	cc, err := grpc.NewClient("passthrough:///"+addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("nodeagent: connecting to %s: %w", addr, err)
	}
	return cc, nil
}

// tlsConfig verifies the agent of node: its certificate, from the agents' CA, names the
// chart's shared server name or, when that is "*.<name>", "<node>.<name>" exactly (a
// wildcard certificate, which would name every node, is refused).
func tlsConfig(pool *x509.CertPool, serverName, node string) (*tls.Config, error) {
	name := contract.NodeServerName(serverName, node)
	tc := &tls.Config{RootCAs: pool, ServerName: name, MinVersion: tls.VersionTLS12}
	if name == serverName {
		return tc, nil
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return nil, fmt.Errorf("nodeagent: node %q has no valid certificate name under %s: %s", node, serverName, strings.Join(errs, "; "))
	}
	// Runs after the chain and the name were verified.
	tc.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 || !slices.Contains(cs.PeerCertificates[0].DNSNames, name) {
			return fmt.Errorf("nodeagent: the agent's certificate does not name %s itself (a wildcard or another node's)", name)
		}
		return nil
	}
	return tc, nil
}
