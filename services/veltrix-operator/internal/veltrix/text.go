package veltrix

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"
)

// maxLine caps one text-protocol answer (TOPOLOGY is the longest).
const maxLine = 1 << 20

// Conn is one text-protocol connection: one command and one answer per line. It is not
// safe for concurrent use.
type Conn struct {
	addr    string
	timeout time.Duration
	nc      net.Conn
	r       *bufio.Reader
}

// Dial connects to a member's text-protocol address; timeout bounds the dial and each
// command (zero means DefaultTimeout).
func Dial(ctx context.Context, addr string, timeout time.Duration) (*Conn, error) {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	d := net.Dialer{Timeout: timeout}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, &Error{Op: "dial", Addr: addr, Kind: ErrUnreachable, Err: err, Timeout: timedOut(ctx, err, timeout)}
	}
	return &Conn{addr: addr, timeout: timeout, nc: nc, r: bufio.NewReaderSize(nc, 4096)}, nil
}

// Close closes the connection.
func (c *Conn) Close() error { return c.nc.Close() }

// Addr is the address dialled.
func (c *Conn) Addr() string { return c.addr }

// Ping sends PING and expects PONG.
func (c *Conn) Ping(ctx context.Context) error {
	line, err := c.do(ctx, "PING", "PING")
	if err != nil {
		return err
	}
	if line != "PONG" {
		return &Error{Op: "PING", Addr: c.addr, Kind: ErrUnreachable, Message: line, Err: errors.New("answer is not PONG")}
	}
	return nil
}

// Put stores value under key. Keys are one word; values one line.
func (c *Conn) Put(ctx context.Context, key, value string) error {
	if err := checkKey(key); err != nil {
		return err
	}
	if strings.ContainsAny(value, "\r\n") || value == "" {
		return fmt.Errorf("veltrix: value for %q must be one non-empty line", key)
	}
	return c.expectOK(ctx, "PUT "+key, "PUT "+key+" "+value)
}

// Get returns the value under key; ErrNotFound when there is none.
func (c *Conn) Get(ctx context.Context, key string) (string, error) {
	if err := checkKey(key); err != nil {
		return "", err
	}
	return c.do(ctx, "GET "+key, "GET "+key)
}

// Del deletes key.
func (c *Conn) Del(ctx context.Context, key string) error {
	if err := checkKey(key); err != nil {
		return err
	}
	return c.expectOK(ctx, "DEL "+key, "DEL "+key)
}

// Info returns the INFO line's key=value pairs (node_id, keys, search_ready, members,
// epoch, ...).
func (c *Conn) Info(ctx context.Context) (map[string]string, error) {
	line, err := c.do(ctx, "INFO", "INFO")
	if err != nil {
		return nil, err
	}
	info := ParseInfo(line)
	if len(info) == 0 {
		return nil, &Error{Op: "INFO", Addr: c.addr, Kind: ErrUnreachable, Message: line, Err: errors.New("answer has no key=value pairs")}
	}
	return info, nil
}

// Topology returns the TOPOLOGY line decoded into out.
func (c *Conn) Topology(ctx context.Context, out any) error {
	line, err := c.do(ctx, "TOPOLOGY", "TOPOLOGY")
	if err != nil {
		return err
	}
	if err := json.Unmarshal([]byte(line), out); err != nil {
		return &Error{Op: "TOPOLOGY", Addr: c.addr, Kind: ErrUnreachable, Err: err}
	}
	return nil
}

// ParseInfo splits an INFO line ("k=v k=v ...") into its pairs; words without '=' are
// ignored.
func ParseInfo(line string) map[string]string {
	out := map[string]string{}
	for _, f := range strings.Fields(line) {
		if k, v, ok := strings.Cut(f, "="); ok && k != "" {
			out[k] = v
		}
	}
	return out
}

func checkKey(key string) error {
	if key == "" || strings.ContainsAny(key, " \t\r\n") {
		return fmt.Errorf("veltrix: key %q must be one word", key)
	}
	return nil
}

func (c *Conn) expectOK(ctx context.Context, op, cmd string) error {
	line, err := c.do(ctx, op, cmd)
	if err != nil {
		return err
	}
	if line != "OK" {
		return &Error{Op: op, Addr: c.addr, Kind: ErrUnreachable, Message: line, Err: errors.New("answer is not OK")}
	}
	return nil
}

// do sends one command line and reads one answer line; an "ERR <reason>" answer becomes
// ErrNotFound or ErrRefused with the reason kept. After a transport failure the
// connection's framing is unknown, so it is closed.
func (c *Conn) do(ctx context.Context, op, cmd string) (string, error) {
	deadline := time.Now().Add(c.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := c.nc.SetDeadline(deadline); err != nil {
		return "", c.broken(op, err)
	}
	// A cancelled context interrupts a blocked read or write.
	stop := context.AfterFunc(ctx, func() { _ = c.nc.SetDeadline(time.Now()) })
	defer stop()
	if _, err := c.nc.Write([]byte(cmd + "\n")); err != nil {
		return "", c.broken(op, contextErr(ctx, err))
	}
	line, err := c.readLine()
	if err != nil {
		return "", c.broken(op, contextErr(ctx, err))
	}
	if reason, ok := strings.CutPrefix(line, "ERR"); ok && (reason == "" || reason[0] == ' ') {
		reason = strings.TrimSpace(reason)
		return "", &Error{Op: op, Addr: c.addr, Kind: kindOfReason(reason), Message: reason}
	}
	return line, nil
}

func (c *Conn) readLine() (string, error) {
	var b []byte
	for {
		part, more, err := c.r.ReadLine()
		if err != nil {
			return "", err
		}
		b = append(b, part...)
		if len(b) > maxLine {
			return "", fmt.Errorf("answer longer than %d bytes", maxLine)
		}
		if !more {
			return string(b), nil
		}
	}
}

func (c *Conn) broken(op string, err error) error {
	_ = c.nc.Close()
	return &Error{Op: op, Addr: c.addr, Kind: ErrUnreachable, Err: err, Timeout: timedOut(context.Background(), err, c.timeout)}
}

// contextErr prefers the context's error to the deadline it caused.
func contextErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w (%w)", ctx.Err(), err)
	}
	return err
}

// kindOfReason classifies a text-protocol ERR reason.
func kindOfReason(reason string) error {
	r := strings.ToLower(reason)
	if strings.Contains(r, "not found") || strings.Contains(r, "no such") {
		return ErrNotFound
	}
	return ErrRefused
}
