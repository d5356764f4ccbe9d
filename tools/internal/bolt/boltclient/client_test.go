package boltclient

import (
	"context"
	"errors"
	"net"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/opsuite/suite/tools/internal/bolt"
)

// conn is the server side the tests talk to: it records what arrived and answers by query.
type conn struct {
	mu    *sync.Mutex
	seen  *[]string
	block chan struct{}
}

func (c conn) Authenticate(agent string, a bolt.Auth) error {
	c.mu.Lock()
	*c.seen = append(*c.seen, "auth "+agent+" "+a.Scheme+" "+a.Principal)
	c.mu.Unlock()
	if a.Scheme == "basic" && a.Credentials != "secret" {
		return &bolt.Failure{Code: bolt.CodeUnauthenticated, Message: "Authentication failure"}
	}
	return nil
}

func (c conn) Run(ctx context.Context, q bolt.Query) (*bolt.Result, error) {
	c.mu.Lock()
	*c.seen = append(*c.seen, "run "+q.Text)
	c.mu.Unlock()
	switch q.Text {
	case "SHOW INSTANCES":
		return &bolt.Result{Fields: []string{"name", "role"}, Records: [][]any{{"coordinator_1", "leader"}, {"demo_data_0", "main"}}}, nil
	case "ECHO":
		return &bolt.Result{Fields: []string{"x", "n"}, Records: [][]any{{q.Params["x"], bolt.Node{ID: 7, Labels: []string{"E2E"}, Props: map[string]any{"step": "a"}}}}}, nil
	case "BLOCK":
		select {
		case <-c.block:
		case <-ctx.Done():
		}
		return &bolt.Result{}, nil
	}
	if q.Text == "IN TX" {
		return &bolt.Result{Fields: []string{"in_tx"}, Records: [][]any{{q.InTx}}}, nil
	}
	return nil, &bolt.Failure{Code: bolt.CodeMemgraphError, Message: "unknown query " + q.Text}
}

func (conn) Begin(string, string) error { return nil }
func (conn) Commit() (string, error)    { return "", nil }
func (conn) Rollback() error            { return nil }
func (conn) Route(string) (*bolt.RoutingTable, error) {
	return &bolt.RoutingTable{TTL: 300, Routers: []string{"c:7687"}, Writers: []string{"m:7687"}, Readers: []string{"r:7687"}}, nil
}
func (conn) Close() {}

// serve starts the repository's Bolt server on a loopback port.
func serve(t *testing.T) (addr string, seen func() []string, unblock func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var log []string
	block := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = bolt.Serve(ctx, ln, func(net.Addr) bolt.Conn { return conn{mu: &mu, seen: &log, block: block} })
	}()
	t.Cleanup(func() { cancel(); <-done })
	var once sync.Once
	return ln.Addr().String(), func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), log...)
	}, func() { once.Do(func() { close(block) }) }
}

// dial connects and closes the client when the test ends.
func dial(t *testing.T, addr string, o Options) *Client {
	t.Helper()
	c, err := Dial(t.Context(), addr, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestRunAndRoute(t *testing.T) {
	addr, seen, _ := serve(t)
	ctx := t.Context()
	c, err := Dial(ctx, addr, Options{Username: "admin", Password: "secret"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Version() != "5.2" {
		t.Errorf("negotiated %s, want 5.2 (the server's highest)", c.Version())
	}
	res, err := c.Run(ctx, "SHOW INSTANCES", nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"name", "role"}; !reflect.DeepEqual(res.Fields, want) || res.Column("role") != 1 || res.Column("nope") != -1 {
		t.Errorf("fields %v, want %v", res.Fields, want)
	}
	if want := [][]any{{"coordinator_1", "leader"}, {"demo_data_0", "main"}}; !reflect.DeepEqual(res.Records, want) {
		t.Errorf("records %v, want %v", res.Records, want)
	}
	res, err = c.Run(ctx, "ECHO", map[string]any{"x": int64(42)})
	if err != nil {
		t.Fatal(err)
	}
	node := bolt.Node{ID: 7, ElementID: "7", Labels: []string{"E2E"}, Props: map[string]any{"step": "a"}}
	if want := [][]any{{int64(42), node}}; !reflect.DeepEqual(res.Records, want) {
		t.Errorf("records %#v, want %#v", res.Records, want)
	}
	rt, err := c.Route(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := (&bolt.RoutingTable{TTL: 300, DB: bolt.DefaultDatabase, Routers: []string{"c:7687"}, Writers: []string{"m:7687"}, Readers: []string{"r:7687"}}); !reflect.DeepEqual(rt, want) {
		t.Errorf("routing table %+v, want %+v", rt, want)
	}
	if want := []string{"auth " + userAgent + " basic admin", "run SHOW INSTANCES", "run ECHO"}; !reflect.DeepEqual(seen(), want) {
		t.Errorf("server saw %q, want %q", seen(), want)
	}
}

// A FAILURE comes back with its code, and the connection is reset and usable again.
func TestFailureThenReuse(t *testing.T) {
	addr, _, _ := serve(t)
	ctx := t.Context()
	c := dial(t, addr, Options{})
	_, err := c.Run(ctx, "UNREGISTER INSTANCE x", nil)
	f, ok := errors.AsType[*bolt.Failure](err)
	if !ok || f.Code != bolt.CodeMemgraphError || f.Message != "unknown query UNREGISTER INSTANCE x" {
		t.Fatalf("error %v, want the server's FAILURE", err)
	}
	if res, err := c.Run(ctx, "SHOW INSTANCES", nil); err != nil || len(res.Records) != 2 {
		t.Fatalf("after a FAILURE: %v, %v", res, err)
	}
}

func TestAuthenticationRefused(t *testing.T) {
	addr, _, _ := serve(t)
	_, err := Dial(t.Context(), addr, Options{Username: "admin", Password: "wrong"})
	if f, ok := errors.AsType[*bolt.Failure](err); !ok || f.Code != bolt.CodeUnauthenticated {
		t.Fatalf("error %v, want FAILURE %s", err, bolt.CodeUnauthenticated)
	}
}

// A query the server does not answer ends with the context, not later.
func TestContextBoundsACall(t *testing.T) {
	addr, _, unblock := serve(t)
	defer unblock()
	c := dial(t, addr, Options{Timeout: time.Minute})
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	begin := time.Now()
	_, err := c.Run(ctx, "BLOCK", nil)
	if err == nil {
		t.Fatal("a blocked query returned no error")
	}
	if d := time.Since(begin); d > 5*time.Second {
		t.Errorf("the call took %s past a 200ms deadline", d)
	}
}

func TestQueryOneShot(t *testing.T) {
	addr, _, _ := serve(t)
	res, err := Query(t.Context(), addr, Options{}, "SHOW INSTANCES")
	if err != nil || len(res.Records) != 2 {
		t.Fatalf("Query: %v, %v", res, err)
	}
	if _, err := Query(t.Context(), "127.0.0.1:1", Options{}, "SHOW INSTANCES"); err == nil {
		t.Error("Query to a closed port returned no error")
	}
}

func TestExplicitTransaction(t *testing.T) {
	addr, _, _ := serve(t)
	ctx := t.Context()
	c := dial(t, addr, Options{})
	inTx := func() any {
		t.Helper()
		res, err := c.Run(ctx, "IN TX", nil)
		if err != nil || len(res.Records) != 1 {
			t.Fatalf("IN TX: %v, %v", res, err)
		}
		return res.Records[0][0]
	}
	if err := c.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	if got := inTx(); got != true {
		t.Errorf("inside BEGIN the server saw InTx=%v", got)
	}
	if err := c.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := inTx(); got != false {
		t.Errorf("after COMMIT the server saw InTx=%v", got)
	}
	if err := c.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if got := inTx(); got != false {
		t.Errorf("after ROLLBACK the server saw InTx=%v", got)
	}
	// A protocol violation: the server closes the connection, the client reports it.
	if err := c.Commit(ctx); err == nil {
		t.Error("COMMIT outside a transaction succeeded")
	}
}
