// Package veltrix is the operator's VeltrixDB client: the admin HTTP API on the metrics
// port (topology, membership, checkpoints; Bearer token) and the text protocol on the
// client port (INFO for the search-ready probe; PUT/GET/DEL/PING for tests). Every request
// is bounded by a timeout, and failures are *Error values whose Kind (ErrUnreachable,
// ErrUnauthorized, ErrNotFound, ErrRefused) says what the caller can do, with the
// server's own message kept.
package veltrix

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// DefaultTimeout bounds one request when Options.Timeout is zero: an operator pass must
// not hang on one unresponsive pod.
const DefaultTimeout = 5 * time.Second

// maxBody caps how much of an answer is read: topology and member lists are small, and a
// misbehaving server must not make the operator buffer without bound.
const maxBody = 4 << 20

// maxMessage caps the server message kept in an Error.
const maxMessage = 512

// Admin is what the operator asks a VeltrixDB member. addr is a member's admin HTTP address
// (host:metricsPort, or a base URL with scheme); textAddr its text-protocol address
// (host:serverPort).
type Admin interface {
	// Cluster is GET /admin/cluster.
	Cluster(ctx context.Context, addr string) (*Cluster, error)
	// Members is GET /admin/cluster/members.
	Members(ctx context.Context, addr string) ([]Member, error)
	// AddMember is POST /admin/cluster/members {"id","addr"}; addr in m is the member's
	// text-protocol address.
	AddMember(ctx context.Context, addr string, m Member) error
	// RemoveMember is DELETE /admin/cluster/members/<id>: it starts the removal (the
	// member is then leaving until its data moved); ErrRefused when the server declines.
	RemoveMember(ctx context.Context, addr, id string) error
	// ForceRemoveMember is DELETE /admin/cluster/members/<id>?force=true: the member goes
	// at once, without moving its data (its co-owners copy its partitions again); for a
	// member whose node and disks are lost. ErrNotFound when it is no member.
	ForceRemoveMember(ctx context.Context, addr, id string) error
	// Checkpoint is POST /admin/checkpoint.
	Checkpoint(ctx context.Context, addr string) error
	// Info is the text protocol's INFO line as key=value pairs.
	Info(ctx context.Context, textAddr string) (map[string]string, error)
}

// Options configure a Client.
type Options struct {
	// Token is the admin token sent as "Authorization: Bearer <token>"; empty sends none
	// (the server then admits loopback callers only).
	Token string
	// Timeout bounds each request (and each text-protocol command); zero means
	// DefaultTimeout.
	Timeout time.Duration
	// HTTPClient sends the admin requests; nil means a client on a shared transport.
	HTTPClient *http.Client
}

// Client implements Admin. It is safe for concurrent use; make one per token.
type Client struct {
	token   string
	timeout time.Duration
	http    *http.Client
}

var _ Admin = (*Client)(nil)

// sharedHTTP keeps connections to members alive across Clients (one per cluster and token).
var sharedHTTP = &http.Client{Transport: &http.Transport{
	Proxy:               nil, // members are addressed directly, never through a proxy
	MaxIdleConnsPerHost: 2,
	IdleConnTimeout:     90 * time.Second,
}}

// New returns a Client.
func New(o Options) *Client {
	c := &Client{token: o.Token, timeout: o.Timeout, http: o.HTTPClient}
	if c.timeout <= 0 {
		c.timeout = DefaultTimeout
	}
	if c.http == nil {
		c.http = sharedHTTP
	}
	return c
}

// Cluster is GET /admin/cluster.
func (c *Client) Cluster(ctx context.Context, addr string) (*Cluster, error) {
	var out Cluster
	if err := c.do(ctx, http.MethodGet, addr, "/admin/cluster", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Members is GET /admin/cluster/members.
func (c *Client) Members(ctx context.Context, addr string) ([]Member, error) {
	out := []Member{} // an empty list stays non-nil: "known, none" differs from "unknown"
	if err := c.do(ctx, http.MethodGet, addr, "/admin/cluster/members", nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// AddMember is POST /admin/cluster/members {"id","addr"} (m.Addr is the member's
// text-protocol address). Pods join by themselves (--join); this adds back a pod whose
// member was removed while it kept running.
func (c *Client) AddMember(ctx context.Context, addr string, m Member) error {
	body, err := json.Marshal(struct {
		ID   string `json:"id"`
		Addr string `json:"addr"`
	}{m.ID, m.Addr})
	if err != nil {
		return err
	}
	return c.do(ctx, http.MethodPost, addr, "/admin/cluster/members", body, nil)
}

// RemoveMember is DELETE /admin/cluster/members/<id>.
func (c *Client) RemoveMember(ctx context.Context, addr, id string) error {
	if id == "" {
		return errors.New("veltrix: RemoveMember needs a member id")
	}
	return c.do(ctx, http.MethodDelete, addr, "/admin/cluster/members/"+url.PathEscape(id), nil, nil)
}

// ForceRemoveMember is DELETE /admin/cluster/members/<id>?force=true.
func (c *Client) ForceRemoveMember(ctx context.Context, addr, id string) error {
	if id == "" {
		return errors.New("veltrix: ForceRemoveMember needs a member id")
	}
	return c.do(ctx, http.MethodDelete, addr, "/admin/cluster/members/"+url.PathEscape(id)+"?force=true", nil, nil)
}

// Checkpoint is POST /admin/checkpoint.
func (c *Client) Checkpoint(ctx context.Context, addr string) error {
	return c.do(ctx, http.MethodPost, addr, "/admin/checkpoint", nil, nil)
}

// Info dials textAddr, sends INFO and returns its key=value pairs.
func (c *Client) Info(ctx context.Context, textAddr string) (map[string]string, error) {
	conn, err := Dial(ctx, textAddr, c.timeout)
	if err != nil {
		return nil, err
	}
	defer func() { _ = conn.Close() }()
	return conn.Info(ctx)
}

// baseURL accepts host:port (http assumed) or a URL with a scheme.
func baseURL(addr string) string {
	if strings.Contains(addr, "://") {
		return strings.TrimRight(addr, "/")
	}
	return "http://" + addr
}

// do sends one admin request and decodes a 2xx JSON answer into out (when out is not nil).
func (c *Client) do(ctx context.Context, method, addr, path string, body []byte, out any) error {
	op := method + " " + path
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, baseURL(addr)+path, rd)
	if err != nil {
		return fmt.Errorf("veltrix %s on %s: %w", op, addr, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return &Error{Op: op, Addr: addr, Kind: ErrUnreachable, Err: err, Timeout: timedOut(ctx, err, c.timeout)}
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return &Error{Op: op, Addr: addr, Kind: ErrUnreachable, Status: resp.StatusCode, Err: err, Timeout: timedOut(ctx, err, c.timeout)}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return &Error{Op: op, Addr: addr, Kind: kindOfStatus(resp.StatusCode), Status: resp.StatusCode, Message: serverMessage(data)}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		// A 2xx that is not the documented JSON is not an answer we can use.
		return &Error{Op: op, Addr: addr, Kind: ErrUnreachable, Status: resp.StatusCode, Message: serverMessage(data), Err: err}
	}
	return nil
}

func kindOfStatus(code int) error {
	switch code {
	case http.StatusUnauthorized, http.StatusForbidden:
		return ErrUnauthorized
	case http.StatusNotFound:
		return ErrNotFound
	default:
		return ErrRefused
	}
}

// serverMessage extracts the reason from an error body: the "error" or "message" field of a
// JSON object, else the body's text, trimmed and capped.
func serverMessage(body []byte) string {
	var obj struct {
		Error   string `json:"error"`
		Message string `json:"message"`
	}
	msg := strings.TrimSpace(string(body))
	if json.Unmarshal(body, &obj) == nil {
		switch {
		case obj.Error != "":
			msg = obj.Error
		case obj.Message != "":
			msg = obj.Message
		}
	}
	if len(msg) > maxMessage {
		msg = msg[:maxMessage] + "…"
	}
	return msg
}
