// Package boltclient is a small raw Bolt client (HELLO/LOGON, RUN, PULL, BEGIN, COMMIT,
// ROLLBACK, RESET, ROUTE, GOODBYE) for tests that check a Bolt server from the outside, such as the end-to-end
// suite reading SHOW INSTANCES and counting nodes on each Memgraph pod. The repository's
// only driver, neo4j-go-driver, belongs to the memgraph-operator's internal/memgraph package;
// this client shares the wire code of tools/internal/bolt instead.
package boltclient

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"time"

	"github.com/opsuite/suite/tools/internal/bolt"
)

const (
	boltMagic   = 0x6060B017
	userAgent   = "opsuite-boltclient/1"
	dialTimeout = 5 * time.Second
)

// proposals are the handshake's four version proposals, preferred first: 5.2 down to 5.0,
// 4.4 and 4.3, 4.1 (00 <range> <minor> <major>).
var proposals = [4]uint32{0x00020205, 0x00010404, 0x00000104, 0}

// ErrIgnored is the answer to a message the server ignored (it was in the FAILED state).
var ErrIgnored = errors.New("bolt: message ignored")

// Options are how to connect; zero fields mean no authentication and a 10 s timeout per call.
type Options struct {
	Username, Password string
	// Timeout bounds each call (the context's deadline, when earlier, wins).
	Timeout time.Duration
	// TLS, when set, wraps the connection in TLS before the Bolt handshake (a server run
	// with --bolt-cert-file); ServerName defaults to the host of addr.
	TLS *tls.Config
}

// Client is one Bolt connection. It is not safe for concurrent use.
type Client struct {
	nc      net.Conn
	r       *bufio.Reader
	w       *bufio.Writer
	major   byte
	minor   byte
	timeout time.Duration
}

// Result is a query's outcome: field names, records, and the final SUCCESS metadata.
type Result struct {
	Fields  []string
	Records [][]any
	Summary map[string]any
}

// Column is the index of a field (-1 when absent).
func (r *Result) Column(name string) int { return slices.Index(r.Fields, name) }

// Dial connects to addr ("host:port"), negotiates a version and authenticates (HELLO with
// the credentials before Bolt 5.1, HELLO then LOGON since). A refused login is returned as a
// *bolt.Failure.
func Dial(ctx context.Context, addr string, o Options) (*Client, error) {
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	d := net.Dialer{Timeout: min(o.Timeout, dialTimeout)}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if o.TLS != nil {
		cfg := o.TLS.Clone()
		if cfg.ServerName == "" {
			cfg.ServerName, _, _ = net.SplitHostPort(addr)
		}
		tc := tls.Client(nc, cfg)
		hctx, cancel := context.WithTimeout(ctx, o.Timeout)
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			_ = nc.Close()
			return nil, fmt.Errorf("bolt TLS handshake: %w", err)
		}
		nc = tc
	}
	c := &Client{nc: nc, r: bufio.NewReader(nc), w: bufio.NewWriter(nc), timeout: o.Timeout}
	if err := c.open(ctx, o); err != nil {
		_ = nc.Close()
		return nil, err
	}
	return c, nil
}

func (c *Client) open(ctx context.Context, o Options) error {
	defer c.bound(ctx)()
	hs := binary.BigEndian.AppendUint32(nil, boltMagic)
	for _, p := range proposals {
		hs = binary.BigEndian.AppendUint32(hs, p)
	}
	if _, err := c.nc.Write(hs); err != nil {
		return err
	}
	var v [4]byte
	if _, err := io.ReadFull(c.nc, v[:]); err != nil {
		return fmt.Errorf("bolt handshake: %w", err)
	}
	if v == [4]byte{} {
		return errors.New("bolt handshake: the server supports none of 5.0-5.2, 4.3-4.4, 4.1")
	}
	c.major, c.minor = v[3], v[2]
	auth := map[string]any{"scheme": "none"}
	if o.Username != "" {
		auth = map[string]any{"scheme": "basic", "principal": o.Username, "credentials": o.Password}
	}
	hello := map[string]any{"user_agent": userAgent}
	logon := c.major > 5 || (c.major == 5 && c.minor >= 1)
	if !logon {
		for k, v := range auth {
			hello[k] = v
		}
	}
	if err := c.send(bolt.MsgHello, hello); err != nil {
		return err
	}
	if logon {
		if err := c.send(bolt.MsgLogon, auth); err != nil {
			return err
		}
	}
	if err := c.w.Flush(); err != nil {
		return err
	}
	if _, err := c.reply(); err != nil {
		return err
	}
	if logon {
		if _, err := c.reply(); err != nil {
			return err
		}
	}
	return nil
}

// Version is the negotiated Bolt version, such as "5.2".
func (c *Client) Version() string { return fmt.Sprintf("%d.%d", c.major, c.minor) }

// Run runs one autocommit query and pulls every record. A FAILURE is returned as a
// *bolt.Failure after the connection was reset, so the client stays usable.
func (c *Client) Run(ctx context.Context, query string, params map[string]any) (*Result, error) {
	defer c.bound(ctx)()
	if params == nil {
		params = map[string]any{}
	}
	if err := c.send(bolt.MsgRun, query, params, map[string]any{}); err != nil {
		return nil, err
	}
	if err := c.send(bolt.MsgPull, map[string]any{"n": int64(-1)}); err != nil {
		return nil, err
	}
	if err := c.w.Flush(); err != nil {
		return nil, err
	}
	meta, runErr := c.reply()
	res := &Result{}
	if runErr == nil {
		for _, f := range asList(meta["fields"]) {
			s, _ := f.(string)
			res.Fields = append(res.Fields, s)
		}
	}
	var pullErr error
	for {
		tag, fields, err := c.recv()
		if err != nil {
			return nil, err
		}
		if tag == bolt.MsgRecord {
			if len(fields) == 1 {
				res.Records = append(res.Records, asList(fields[0]))
			}
			continue
		}
		res.Summary, pullErr = replyOf(tag, fields)
		break
	}
	if err := cmpErr(runErr, pullErr); err != nil {
		if _, isFailure := errors.AsType[*bolt.Failure](err); isFailure {
			if rerr := c.reset(); rerr != nil {
				return nil, errors.Join(err, rerr)
			}
		}
		return nil, err
	}
	return res, nil
}

// cmpErr is the error that matters: RUN's FAILURE (PULL is then IGNORED), else PULL's.
func cmpErr(run, pull error) error {
	if run != nil {
		return run
	}
	return pull
}

// Begin opens an explicit transaction; Run then runs inside it until Commit or Rollback.
func (c *Client) Begin(ctx context.Context) error {
	return c.simple(ctx, bolt.MsgBegin, map[string]any{})
}

// Commit ends the explicit transaction.
func (c *Client) Commit(ctx context.Context) error { return c.simple(ctx, bolt.MsgCommit) }

// Rollback abandons the explicit transaction.
func (c *Client) Rollback(ctx context.Context) error { return c.simple(ctx, bolt.MsgRollback) }

// simple sends one message answered by SUCCESS or FAILURE (then resets).
func (c *Client) simple(ctx context.Context, tag byte, fields ...any) error {
	defer c.bound(ctx)()
	if err := c.send(tag, fields...); err != nil {
		return err
	}
	if err := c.w.Flush(); err != nil {
		return err
	}
	_, err := c.reply()
	if _, isFailure := errors.AsType[*bolt.Failure](err); isFailure {
		err = errors.Join(err, c.reset())
	}
	return err
}

// Route sends ROUTE (Bolt 4.3+) for the default database and returns the routing table.
func (c *Client) Route(ctx context.Context) (*bolt.RoutingTable, error) {
	defer c.bound(ctx)()
	if err := c.send(bolt.MsgRoute, map[string]any{"address": c.nc.RemoteAddr().String()}, []any{}, nil); err != nil {
		return nil, err
	}
	if err := c.w.Flush(); err != nil {
		return nil, err
	}
	meta, err := c.reply()
	if err != nil {
		if _, isFailure := errors.AsType[*bolt.Failure](err); isFailure {
			err = errors.Join(err, c.reset())
		}
		return nil, err
	}
	rt, _ := meta["rt"].(map[string]any)
	out := &bolt.RoutingTable{}
	out.TTL, _ = rt["ttl"].(int64)
	out.DB, _ = rt["db"].(string)
	for _, s := range asList(rt["servers"]) {
		m, _ := s.(map[string]any)
		var addrs []string
		for _, a := range asList(m["addresses"]) {
			if s, ok := a.(string); ok {
				addrs = append(addrs, s)
			}
		}
		switch m["role"] {
		case "ROUTE":
			out.Routers = append(out.Routers, addrs...)
		case "WRITE":
			out.Writers = append(out.Writers, addrs...)
		case "READ":
			out.Readers = append(out.Readers, addrs...)
		}
	}
	return out, nil
}

// Close says GOODBYE and closes the connection.
func (c *Client) Close() error {
	_ = c.nc.SetDeadline(time.Now().Add(time.Second))
	if err := c.send(bolt.MsgGoodbye); err == nil {
		_ = c.w.Flush()
	}
	return c.nc.Close()
}

func (c *Client) reset() error {
	if err := c.send(bolt.MsgReset); err != nil {
		return err
	}
	if err := c.w.Flush(); err != nil {
		return err
	}
	_, err := c.reply()
	return err
}

// bound applies the call's deadline to the socket, and cancellation of ctx, until the
// returned function runs.
func (c *Client) bound(ctx context.Context) func() {
	deadline := time.Now().Add(c.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = c.nc.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = c.nc.SetDeadline(time.Unix(1, 0)) })
	return func() { stop() }
}

func (c *Client) send(tag byte, fields ...any) error {
	msg, err := bolt.EncodeMessage(tag, fields...)
	if err != nil {
		return err
	}
	return bolt.WriteMessage(c.w, msg)
}

func (c *Client) recv() (byte, []any, error) {
	b, err := bolt.ReadMessage(c.r)
	if err != nil {
		return 0, nil, err
	}
	return bolt.DecodeMessage(b)
}

// reply reads SUCCESS (its metadata), FAILURE (a *bolt.Failure) or IGNORED (ErrIgnored).
func (c *Client) reply() (map[string]any, error) {
	tag, fields, err := c.recv()
	if err != nil {
		return nil, err
	}
	return replyOf(tag, fields)
}

func replyOf(tag byte, fields []any) (map[string]any, error) {
	var meta map[string]any
	if len(fields) > 0 {
		meta, _ = fields[0].(map[string]any)
	}
	switch tag {
	case bolt.MsgSuccess:
		return meta, nil
	case bolt.MsgFailure:
		code, _ := meta["code"].(string)
		msg, _ := meta["message"].(string)
		return nil, &bolt.Failure{Code: code, Message: msg}
	case bolt.MsgIgnored:
		return nil, ErrIgnored
	}
	return nil, fmt.Errorf("bolt: unexpected message 0x%02X", tag)
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

// Query dials addr, runs one query and closes the connection.
func Query(ctx context.Context, addr string, o Options, query string) (*Result, error) {
	c, err := Dial(ctx, addr, o)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.Run(ctx, query, nil)
}
