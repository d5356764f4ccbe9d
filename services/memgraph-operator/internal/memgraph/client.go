package memgraph

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/neo4j/neo4j-go-driver/v5/neo4j"
	"github.com/neo4j/neo4j-go-driver/v5/neo4j/config"
)

// Dialer opens a Session to one Memgraph instance.
type Dialer interface {
	// Dial connects to boltAddr ("host:port") directly and checks that it answers.
	Dial(ctx context.Context, boltAddr string) (Session, error)
}

// Session is a connection to one instance. Each method is one autocommit query.
type Session interface {
	// Addr is the Bolt address the session was dialled to.
	Addr() string
	// ShowInstances runs SHOW INSTANCES on a coordinator (the leader's answer is
	// authoritative; a follower answers from its own, possibly stale, state).
	ShowInstances(ctx context.Context) ([]Instance, error)
	// ReplicationLag runs SHOW REPLICATION LAG on the leader (served through the MAIN).
	ReplicationLag(ctx context.Context) ([]Lag, error)
	// ReplicationRole runs SHOW REPLICATION ROLE on a data instance ("main" or "replica").
	ReplicationRole(ctx context.Context) (string, error)
	// CoordinatorSettings runs SHOW COORDINATOR SETTINGS on a coordinator.
	CoordinatorSettings(ctx context.Context) (map[string]string, error)
	// Replicas runs SHOW REPLICAS on a data instance (the MAIN lists its replicas).
	Replicas(ctx context.Context) ([]Replica, error)
	// Exec runs one admin command (built by this package's builders) and discards its rows.
	Exec(ctx context.Context, cypher string) error
	// Query runs a read or write query with its values inlined and returns its rows.
	Query(ctx context.Context, cypher string) ([]map[string]any, error)
	Close(ctx context.Context) error
}

// Options configure NewDialer.
type Options struct {
	// Username and Password authenticate; an empty Username connects without auth.
	Username, Password string
	// Timeout bounds the connect and each query (default DefaultTimeout).
	Timeout time.Duration
	// UserAgent is sent in HELLO (default "memgraph-operator").
	UserAgent string
	// CA, when set, turns TLS on: the Dialer connects with bolt+s and verifies each
	// server's certificate against these PEM certificates and the host it dials (the
	// pod's DNS name). Empty dials plain bolt://.
	CA []byte
	// Resolve, when set, maps each "host:port" to the address that is dialled instead (nil
	// dials as is). It is for tests that run every member on loopback ports behind the
	// DNS names the operator registers; the name given to Dial stays the host a
	// certificate must name, the Session's Addr and the one errors report.
	Resolve func(addr string) string
}

// DefaultTimeout keeps a pass short when an instance hangs: admin commands are small.
const DefaultTimeout = 5 * time.Second

// NewDialer returns the Bolt Dialer.
func NewDialer(o Options) Dialer {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.UserAgent == "" {
		o.UserAgent = "memgraph-operator"
	}
	d := boltDialer{opts: o}
	if len(o.CA) > 0 {
		d.roots = x509.NewCertPool()
		if !d.roots.AppendCertsFromPEM(o.CA) {
			d.caErr = errors.New("the CA holds no PEM certificate")
		}
	}
	return d
}

type boltDialer struct {
	opts Options
	// roots verify the servers when TLS is on (nil: plain Bolt); caErr says why Options.CA
	// could not be used, and fails every Dial.
	roots *x509.CertPool
	caErr error
}

// tlsConfig is the client TLS of every connection; the driver sets ServerName to the
// host dialled, so the certificate must name it.
func (d boltDialer) tlsConfig() *tls.Config {
	return &tls.Config{RootCAs: d.roots, MinVersion: tls.VersionTLS12}
}

// target is where addr is dialled: through Options.Resolve when set.
func (d boltDialer) target(addr string) string {
	if d.opts.Resolve == nil {
		return addr
	}
	return d.opts.Resolve(addr)
}

// verifyingAs is tlsConfig for a connection dialled elsewhere than host (Resolve): the
// driver always verifies against the host it dials, so it is told not to (bolt+ssc) and
// VerifyConnection checks the chain against these roots and host, as bolt+s would.
func (d boltDialer) verifyingAs(host string) *tls.Config {
	cfg := d.tlsConfig()
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("the server sent no certificate")
		}
		opts := x509.VerifyOptions{Roots: d.roots, DNSName: host, Intermediates: x509.NewCertPool()}
		for _, c := range cs.PeerCertificates[1:] {
			opts.Intermediates.AddCert(c)
		}
		_, err := cs.PeerCertificates[0].Verify(opts)
		return err
	}
	return cfg
}

func (d boltDialer) Dial(ctx context.Context, boltAddr string) (Session, error) {
	if d.caErr != nil {
		return nil, &Error{Kind: KindTLS, Addr: boltAddr, Err: d.caErr}
	}
	auth := neo4j.NoAuth()
	if d.opts.Username != "" {
		auth = neo4j.BasicAuth(d.opts.Username, d.opts.Password, "")
	}
	timeout := d.opts.Timeout
	// bolt://, bolt+s:// and bolt+ssc:// are direct connections: the driver never routes
	// them elsewhere.
	scheme := "bolt://"
	tlsCfg := d.tlsConfig()
	target := d.target(boltAddr)
	switch {
	case d.roots == nil: // plain Bolt
	case target == boltAddr:
		scheme = "bolt+s://"
	default:
		// Dialled elsewhere than the name: the certificate is checked against the name.
		scheme = "bolt+ssc://"
		host, _, _ := net.SplitHostPort(boltAddr)
		tlsCfg = d.verifyingAs(host)
	}
	drv, err := neo4j.NewDriverWithContext(scheme+target, auth, func(c *config.Config) {
		c.UserAgent = d.opts.UserAgent
		c.SocketConnectTimeout = timeout
		c.ConnectionAcquisitionTimeout = timeout
		c.MaxConnectionPoolSize = 1
		c.MaxTransactionRetryTime = 0
		c.TelemetryDisabled = true
		if d.roots != nil {
			c.TlsConfig = tlsCfg
		}
	})
	if err != nil {
		return nil, &Error{Kind: KindProtocol, Addr: boltAddr, Err: err}
	}
	s := &boltSession{addr: boltAddr, drv: drv, timeout: timeout}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := drv.VerifyConnectivity(cctx); err != nil {
		expired := cctx.Err() != nil
		closeBounded(ctx, timeout, drv.Close)
		if d.roots != nil && !expired {
			// The driver does not expose its TLS errors; a handshake of our own says
			// whether TLS was the cause, as the typed error the condition needs.
			if herr := d.handshake(ctx, boltAddr); herr != nil {
				return nil, &Error{Kind: KindTLS, Addr: boltAddr, Err: herr}
			}
		}
		return nil, withTimeout(classify(boltAddr, "", err), expired, timeout)
	}
	return s, nil
}

// closeBounded closes within limit, whatever ctx's own deadline: a close may write to (or,
// returning a connection to the pool, read from) a server whose packets are dropped, and
// must not hold the pass for a TCP timeout.
func closeBounded(ctx context.Context, limit time.Duration, close func(context.Context) error) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), limit)
	defer cancel()
	_ = close(cctx)
}

// withTimeout records on an unreachable err that the call's own limit ran out (expired, or
// the transport says it timed out): no answer came within limit.
func withTimeout(err error, expired bool, limit time.Duration) error {
	var e *Error
	if !errors.As(err, &e) || e.Kind != KindUnreachable {
		return err
	}
	var ne net.Error
	if expired || errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) || strings.Contains(err.Error(), "i/o timeout") {
		e.Timeout = limit
	}
	return err
}

// ServedCertificate is the leaf certificate (DER) addr serves, verified as Dial verifies
// it (o.CA and the host dialled); a failed handshake is KindTLS, a failed connection
// KindUnreachable. o.CA must be set.
func ServedCertificate(ctx context.Context, addr string, o Options) ([]byte, error) {
	d, ok := NewDialer(o).(boltDialer)
	switch {
	case !ok || len(o.CA) == 0:
		return nil, &Error{Kind: KindProtocol, Addr: addr, Err: errors.New("ServedCertificate needs Options.CA")}
	case d.caErr != nil:
		return nil, &Error{Kind: KindTLS, Addr: addr, Err: d.caErr}
	}
	ctx, cancel := context.WithTimeout(ctx, d.opts.Timeout)
	defer cancel()
	var nd net.Dialer
	conn, err := nd.DialContext(ctx, "tcp", d.target(addr))
	if err != nil {
		return nil, &Error{Kind: KindUnreachable, Addr: addr, Err: err}
	}
	defer func() { _ = conn.Close() }()
	cfg := d.tlsConfig()
	cfg.ServerName, _, _ = net.SplitHostPort(addr)
	tc := tls.Client(conn, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		if ctx.Err() != nil {
			return nil, &Error{Kind: KindUnreachable, Addr: addr, Err: err}
		}
		return nil, &Error{Kind: KindTLS, Addr: addr, Err: err}
	}
	return tc.ConnectionState().PeerCertificates[0].Raw, nil
}

// handshake connects to addr and runs a TLS handshake alone: nil when the TCP dial
// fails or the time runs out (not a TLS problem) or the handshake succeeds, else the
// handshake's error.
func (d boltDialer) handshake(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, d.opts.Timeout)
	defer cancel()
	var nd net.Dialer
	conn, err := nd.DialContext(ctx, "tcp", d.target(addr))
	if err != nil {
		return nil
	}
	defer func() { _ = conn.Close() }()
	cfg := d.tlsConfig()
	cfg.ServerName, _, _ = net.SplitHostPort(addr)
	err = tls.Client(conn, cfg).HandshakeContext(ctx)
	if ctx.Err() != nil || errors.Is(err, os.ErrDeadlineExceeded) {
		return nil
	}
	return err
}

type boltSession struct {
	addr    string
	drv     neo4j.DriverWithContext
	timeout time.Duration
}

func (s *boltSession) Addr() string { return s.addr }

func (s *boltSession) Close(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.timeout)
	defer cancel()
	if err := s.drv.Close(ctx); err != nil {
		return classify(s.addr, "", err)
	}
	return nil
}

// run sends one autocommit query (session.Run: never BEGIN, which Memgraph refuses for
// admin queries) and collects its records.
func (s *boltSession) run(ctx context.Context, cypher string) ([]*neo4j.Record, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	sess := s.drv.NewSession(ctx, neo4j.SessionConfig{AccessMode: neo4j.AccessModeWrite})
	defer closeBounded(ctx, s.timeout, sess.Close)
	res, err := sess.Run(ctx, cypher, nil)
	if err != nil {
		return nil, withTimeout(classify(s.addr, cypher, err), ctx.Err() != nil, s.timeout)
	}
	recs, err := res.Collect(ctx)
	if err != nil {
		return nil, withTimeout(classify(s.addr, cypher, err), ctx.Err() != nil, s.timeout)
	}
	return recs, nil
}

func (s *boltSession) Exec(ctx context.Context, cypher string) error {
	_, err := s.run(ctx, cypher)
	return err
}

func (s *boltSession) Query(ctx context.Context, cypher string) ([]map[string]any, error) {
	recs, err := s.run(ctx, cypher)
	if err != nil {
		return nil, err
	}
	rows := make([]map[string]any, 0, len(recs))
	for _, r := range recs {
		rows = append(rows, r.AsMap())
	}
	return rows, nil
}

func (s *boltSession) ShowInstances(ctx context.Context) ([]Instance, error) {
	return queryParsed(ctx, s, ShowInstancesQuery, ParseInstances)
}

func (s *boltSession) ReplicationLag(ctx context.Context) ([]Lag, error) {
	return queryParsed(ctx, s, ShowReplicationLagQuery, ParseLag)
}

func (s *boltSession) CoordinatorSettings(ctx context.Context) (map[string]string, error) {
	return queryParsed(ctx, s, ShowCoordinatorSettingsQuery, ParseCoordinatorSettings)
}

func (s *boltSession) Replicas(ctx context.Context) ([]Replica, error) {
	return queryParsed(ctx, s, ShowReplicasQuery, ParseReplicas)
}

// queryParsed runs a read query and parses its rows; a parse failure is KindProtocol.
func queryParsed[T any](ctx context.Context, s *boltSession, q string, parse func([]map[string]any) (T, error)) (T, error) {
	var zero T
	rows, err := s.Query(ctx, q)
	if err != nil {
		return zero, err
	}
	out, err := parse(rows)
	if err != nil {
		return zero, &Error{Kind: KindProtocol, Addr: s.addr, Query: q, Err: err}
	}
	return out, nil
}

func (s *boltSession) ReplicationRole(ctx context.Context) (string, error) {
	rows, err := s.Query(ctx, ShowReplicationRoleQuery)
	if err != nil {
		return "", err
	}
	if len(rows) != 1 {
		return "", &Error{Kind: KindProtocol, Addr: s.addr, Query: ShowReplicationRoleQuery,
			Err: fmt.Errorf("%d rows, want 1", len(rows))}
	}
	role, ok := rows[0]["replication role"].(string)
	if !ok {
		return "", &Error{Kind: KindProtocol, Addr: s.addr, Query: ShowReplicationRoleQuery,
			Err: errors.New(`no string column "replication role"`)}
	}
	return strings.ToLower(role), nil
}

// classify turns a driver error into an *Error of the right Kind, keeping the server's
// code and message verbatim.
func classify(addr, query string, err error) error {
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	var n4j *neo4j.Neo4jError
	if errors.As(err, &n4j) {
		kind := KindRefused
		if strings.Contains(n4j.Code, ".Security.") {
			kind = KindUnauthenticated
		}
		return &Error{Kind: kind, Addr: addr, Query: query, Code: n4j.Code, Message: n4j.Msg, Err: err}
	}
	var auth *neo4j.InvalidAuthenticationError
	if errors.As(err, &auth) || strings.Contains(err.Error(), ".Security.Unauthenticated") {
		return &Error{Kind: KindUnauthenticated, Addr: addr, Query: query, Err: err}
	}
	var usage *neo4j.UsageError
	if errors.As(err, &usage) {
		return &Error{Kind: KindProtocol, Addr: addr, Query: query, Err: err}
	}
	// Everything else is the transport: dial failures, resets, timeouts, cancellation.
	return &Error{Kind: KindUnreachable, Addr: addr, Query: query, Err: err}
}
