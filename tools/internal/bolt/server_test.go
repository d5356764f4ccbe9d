package bolt

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// testConn is a small scripted Conn: it answers a few fixed queries and records every call,
// so the tests can assert what the server passed through.
type testConn struct {
	mu     sync.Mutex
	calls  []string
	runs   []Query
	closed bool
}

func (c *testConn) record(call string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, call)
}

func (c *testConn) Authenticate(userAgent string, a Auth) error {
	c.record("auth " + userAgent + " " + a.Scheme + " " + a.Principal)
	if a.Credentials != "secret" {
		return &Failure{Code: CodeUnauthenticated, Message: "Authentication failure"}
	}
	return nil
}

func (c *testConn) Run(_ context.Context, q Query) (*Result, error) {
	c.mu.Lock()
	c.runs = append(c.runs, q)
	c.mu.Unlock()
	switch q.Text {
	case "UNWIND range(1, 3) AS x RETURN x":
		return &Result{Fields: []string{"x"}, Records: [][]any{{1}, {2}, {3}}, Type: "r"}, nil
	case "CREATE (n:L {k: $k}) RETURN n":
		return &Result{
			Fields:  []string{"n"},
			Records: [][]any{{Node{ID: 5, ElementID: "5", Labels: []string{"L"}, Props: map[string]any{"k": q.Params["k"]}}}},
			Type:    "rw",
			Stats:   map[string]any{"nodes-created": 1},
		}, nil
	case "UNPACKABLE":
		return &Result{Fields: []string{"x"}, Records: [][]any{{1}, {make(chan int)}}}, nil
	case "SYNTAX":
		return nil, &Failure{Code: "Memgraph.ClientError.MemgraphError.SyntaxError", Message: "line 1"}
	}
	return nil, errors.New("Coordinator can run only coordinator queries!")
}

func (c *testConn) Begin(mode, db string) error { c.record("begin " + mode + " " + db); return nil }
func (c *testConn) Commit() (string, error)     { c.record("commit"); return "bm-1", nil }
func (c *testConn) Rollback() error             { c.record("rollback"); return nil }

func (c *testConn) Route(db string) (*RoutingTable, error) {
	c.record("route " + db)
	return &RoutingTable{TTL: 300, Routers: []string{"c1:7687", "c2:7687"}, Writers: []string{"d0:7687"}, Readers: []string{"d1:7687"}}, nil
}

func (c *testConn) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
}

func (c *testConn) snapshot() ([]string, []Query, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.calls), slices.Clone(c.runs), c.closed
}

// startServer serves on a loopback listener and returns its address, the Conns handed
// out, and a stop function that asserts Serve's clean shutdown.
func startServer(t *testing.T) (string, func() []*testConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var conns []*testConn
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, ln, func(net.Addr) Conn {
			c := &testConn{}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			return c
		})
	}()
	stopped := false
	stop := func() []*testConn {
		if !stopped {
			stopped = true
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Serve returned %v after cancel, want nil", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("Serve did not return after cancel")
			}
		}
		mu.Lock()
		defer mu.Unlock()
		return conns
	}
	t.Cleanup(func() { stop() })
	return ln.Addr().String(), stop
}

// client is a raw Bolt client: handshake bytes by hand, messages through the package's
// codec (pinned to the specification's bytes by TestPackGolden).
type client struct {
	t  *testing.T
	nc net.Conn
	r  *bufio.Reader
	w  *bufio.Writer
}

func dial(t *testing.T, addr string, proposals ...uint32) (*client, version) {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	hs := binary.BigEndian.AppendUint32(nil, magic)
	for i := range 4 {
		var p uint32
		if i < len(proposals) {
			p = proposals[i]
		}
		hs = binary.BigEndian.AppendUint32(hs, p)
	}
	if _, err := nc.Write(hs); err != nil {
		t.Fatal(err)
	}
	var reply [4]byte
	if _, err := io.ReadFull(nc, reply[:]); err != nil {
		t.Fatal(err)
	}
	return &client{t: t, nc: nc, r: bufio.NewReader(nc), w: bufio.NewWriter(nc)}, version{reply[3], reply[2]}
}

func (c *client) send(tag byte, fields ...any) {
	c.t.Helper()
	p := packer{}
	if err := p.pack(structure{tag: tag, fields: fields}); err != nil {
		c.t.Fatal(err)
	}
	if err := writeMessage(c.w, p.buf); err != nil {
		c.t.Fatal(err)
	}
	if err := c.w.Flush(); err != nil {
		c.t.Fatal(err)
	}
}

func (c *client) recv() structure {
	c.t.Helper()
	b, err := readMessage(c.r, nil)
	if err != nil {
		c.t.Fatalf("reading a reply: %v", err)
	}
	m, err := decodeMessage(b)
	if err != nil {
		c.t.Fatal(err)
	}
	return m
}

// expect reads one reply, checks its signature and returns its first field (the metadata
// map of SUCCESS/FAILURE, the value list of RECORD).
func (c *client) expect(tag byte) any {
	c.t.Helper()
	m := c.recv()
	if m.tag != tag {
		c.t.Fatalf("got message 0x%02X %v, want 0x%02X", m.tag, m.fields, tag)
	}
	if len(m.fields) == 0 {
		return nil
	}
	return m.fields[0]
}

func (c *client) success() map[string]any {
	c.t.Helper()
	return c.expect(msgSuccess).(map[string]any)
}

// expectClosed asserts that the server hung up.
func (c *client) expectClosed() {
	c.t.Helper()
	if _, err := readMessage(c.r, nil); !errors.Is(err, io.EOF) {
		c.t.Fatalf("read after close: %v, want EOF", err)
	}
}

func TestConversationBolt52(t *testing.T) {
	addr, stop := startServer(t)
	c, v := dial(t, addr, 0x000001FF, p(5, 8, 8), p(4, 4, 2))
	if v != (version{5, 2}) {
		t.Fatalf("negotiated %v, want 5.2", v)
	}

	// HELLO and LOGON pipelined, as the driver sends them.
	c.send(msgHello, map[string]any{"user_agent": "test/1", "routing": map[string]any{"address": addr}})
	c.send(msgLogon, map[string]any{"scheme": "basic", "principal": "admin", "credentials": "secret"})
	hello := c.success()
	if hello["server"] != ServerAgent || hello["connection_id"] != "bolt-1" {
		t.Fatalf("HELLO SUCCESS = %v", hello)
	}
	c.success()

	// Autocommit RUN, then PULL n=1 (has_more), then the rest.
	c.send(msgRun, "UNWIND range(1, 3) AS x RETURN x", map[string]any{}, map[string]any{"db": "memgraph", "mode": "r"})
	run := c.success()
	if !reflect.DeepEqual(run["fields"], []any{"x"}) || run["t_first"] == nil || run["qid"] != nil {
		t.Fatalf("RUN SUCCESS = %v, want fields [x], t_first and no qid outside a transaction", run)
	}
	c.send(msgPull, map[string]any{"n": int64(1)})
	if rec := c.expect(msgRecord); !reflect.DeepEqual(rec, []any{int64(1)}) {
		t.Fatalf("first RECORD = %v", rec)
	}
	if s := c.success(); s["has_more"] != true {
		t.Fatalf("PULL n=1 SUCCESS = %v, want has_more", s)
	}
	c.send(msgPull, map[string]any{"n": int64(-1)})
	c.expect(msgRecord)
	c.expect(msgRecord)
	if s := c.success(); s["has_more"] != false || s["type"] != "r" || s["t_last"] == nil {
		t.Fatalf("final PULL SUCCESS = %v", s)
	}

	// DISCARD drops the rest of a result without RECORDs.
	c.send(msgRun, "UNWIND range(1, 3) AS x RETURN x", map[string]any{}, map[string]any{})
	c.success()
	c.send(msgDiscard, map[string]any{"n": int64(-1)})
	if s := c.success(); s["has_more"] != false {
		t.Fatalf("DISCARD SUCCESS = %v", s)
	}

	// Explicit transaction: BEGIN, RUN (InTx, qid), PULL by qid, COMMIT with a bookmark;
	// a Node comes back in the Bolt 5 layout.
	c.send(msgBegin, map[string]any{"db": "memgraph", "mode": "w", "bookmarks": []any{}, "tx_metadata": map[string]any{"a": 1}})
	c.success()
	c.send(msgRun, "CREATE (n:L {k: $k}) RETURN n", map[string]any{"k": "v"}, map[string]any{})
	if s := c.success(); s["qid"] != int64(0) {
		t.Fatalf("RUN in transaction SUCCESS = %v, want qid 0", s)
	}
	c.send(msgPull, map[string]any{"n": int64(1000), "qid": int64(0)})
	want := Node{ID: 5, ElementID: "5", Labels: []string{"L"}, Props: map[string]any{"k": "v"}}
	if rec := c.expect(msgRecord); !reflect.DeepEqual(rec, []any{want}) {
		t.Fatalf("RECORD = %#v, want %#v", rec, want)
	}
	if s := c.success(); s["type"] != "rw" || !reflect.DeepEqual(s["stats"], map[string]any{"nodes-created": int64(1)}) {
		t.Fatalf("PULL SUCCESS = %v, want type rw and stats", s)
	}
	c.send(msgCommit)
	if s := c.success(); s["bookmark"] != "bm-1" {
		t.Fatalf("COMMIT SUCCESS = %v, want bookmark", s)
	}

	// FAILURE keeps a *Failure's code; the pipelined PULL is IGNORED until RESET.
	c.send(msgRun, "SYNTAX", map[string]any{}, map[string]any{})
	c.send(msgPull, map[string]any{"n": int64(-1)})
	if f := c.expect(msgFailure).(map[string]any); f["code"] != "Memgraph.ClientError.MemgraphError.SyntaxError" || f["message"] != "line 1" {
		t.Fatalf("FAILURE = %v", f)
	}
	c.expect(msgIgnored)
	c.send(msgRun, "UNWIND range(1, 3) AS x RETURN x", map[string]any{}, map[string]any{})
	c.expect(msgIgnored)
	c.send(msgReset)
	c.success()

	// A plain error gets Memgraph's generic code; RESET inside a transaction rolls it back.
	c.send(msgBegin, map[string]any{})
	c.success()
	c.send(msgRun, "SHOW STORAGE INFO", map[string]any{}, map[string]any{})
	if f := c.expect(msgFailure).(map[string]any); f["code"] != CodeMemgraphError || f["message"] != "Coordinator can run only coordinator queries!" {
		t.Fatalf("FAILURE = %v", f)
	}
	c.send(msgReset)
	c.success()

	// ROUTE (4.4+ form: the database in a map).
	c.send(msgRoute, map[string]any{"address": addr}, []any{}, map[string]any{"db": "memgraph"})
	rt := c.success()["rt"].(map[string]any)
	wantRT := map[string]any{"ttl": int64(300), "db": "memgraph", "servers": []any{
		map[string]any{"role": "ROUTE", "addresses": []any{"c1:7687", "c2:7687"}},
		map[string]any{"role": "WRITE", "addresses": []any{"d0:7687"}},
		map[string]any{"role": "READ", "addresses": []any{"d1:7687"}},
	}}
	if !reflect.DeepEqual(rt, wantRT) {
		t.Fatalf("ROUTE rt = %v, want %v", rt, wantRT)
	}

	// LOGOFF returns to authentication; LOGON again, then GOODBYE closes.
	c.send(msgLogoff)
	c.success()
	c.send(msgLogon, map[string]any{"scheme": "basic", "principal": "admin", "credentials": "secret"})
	c.success()
	c.send(msgGoodbye)
	c.expectClosed()

	conns := stop()
	if len(conns) != 1 {
		t.Fatalf("%d Conns created, want 1", len(conns))
	}
	calls, runs, closed := conns[0].snapshot()
	wantCalls := []string{"auth test/1 basic admin", "begin w memgraph", "commit", "begin w ", "rollback", "route memgraph", "auth test/1 basic admin"}
	if !reflect.DeepEqual(calls, wantCalls) {
		t.Fatalf("calls = %q, want %q", calls, wantCalls)
	}
	wantRuns := []Query{
		{Text: "UNWIND range(1, 3) AS x RETURN x", Params: map[string]any{}, DB: "memgraph", Mode: "r"},
		{Text: "UNWIND range(1, 3) AS x RETURN x", Params: map[string]any{}, Mode: "w"},
		{Text: "CREATE (n:L {k: $k}) RETURN n", Params: map[string]any{"k": "v"}, InTx: true, DB: "memgraph", Mode: "w"},
		{Text: "SYNTAX", Params: map[string]any{}, Mode: "w"},
		{Text: "SHOW STORAGE INFO", Params: map[string]any{}, InTx: true, Mode: "w"},
	}
	if !reflect.DeepEqual(runs, wantRuns) {
		t.Fatalf("runs = %+v\nwant %+v", runs, wantRuns)
	}
	if !closed {
		t.Fatal("Conn.Close was not called")
	}
}

func TestConversationBolt4(t *testing.T) {
	addr, stop := startServer(t)

	// 4.4: credentials in HELLO, no LOGON.
	c, v := dial(t, addr, p(4, 4, 2))
	if v != (version{4, 4}) {
		t.Fatalf("negotiated %v, want 4.4", v)
	}
	c.send(msgHello, map[string]any{"user_agent": "test/4", "scheme": "basic", "principal": "u", "credentials": "secret"})
	c.success()
	// Nodes use the 3-field Bolt 4 layout: the element_id is absent on the wire.
	c.send(msgRun, "CREATE (n:L {k: $k}) RETURN n", map[string]any{"k": int64(1)}, map[string]any{})
	c.success()
	c.send(msgPull, map[string]any{"n": int64(-1)})
	want := Node{ID: 5, Labels: []string{"L"}, Props: map[string]any{"k": int64(1)}}
	if rec := c.expect(msgRecord); !reflect.DeepEqual(rec, []any{want}) {
		t.Fatalf("RECORD = %#v, want %#v", rec, want)
	}
	c.success()

	// 4.3: ROUTE names the database as a string (or null for the default).
	c43, v := dial(t, addr, p(4, 3, 0))
	if v != (version{4, 3}) {
		t.Fatalf("negotiated %v, want 4.3", v)
	}
	c43.send(msgHello, map[string]any{"user_agent": "test/43", "scheme": "basic", "principal": "u", "credentials": "secret"})
	c43.success()
	c43.send(msgRoute, map[string]any{}, []any{}, nil)
	if rt := c43.success()["rt"].(map[string]any); rt["ttl"] != int64(300) || rt["db"] != DefaultDatabase {
		t.Fatalf("ROUTE rt = %v", rt)
	}

	// 4.1 has no ROUTE message: the server hangs up, as Memgraph does on unknown messages.
	c41, v := dial(t, addr, p(4, 1, 0))
	if v != (version{4, 1}) {
		t.Fatalf("negotiated %v, want 4.1", v)
	}
	c41.send(msgHello, map[string]any{"user_agent": "test/41", "scheme": "basic", "principal": "u", "credentials": "secret"})
	c41.success()
	c41.send(msgRoute, map[string]any{}, []any{}, nil)
	c41.expectClosed()

	for _, conn := range stop() {
		if _, _, closed := conn.snapshot(); !closed {
			t.Fatal("a Conn was not closed")
		}
	}
}

func TestAuthenticationFailureCloses(t *testing.T) {
	addr, _ := startServer(t)
	for _, tc := range []struct {
		name  string
		ver   uint32
		hello map[string]any
		logon map[string]any
	}{
		{"4.0 HELLO", p(4, 0, 0), map[string]any{"user_agent": "t", "scheme": "basic", "principal": "u", "credentials": "wrong"}, nil},
		{"5.2 LOGON", p(5, 2, 0), map[string]any{"user_agent": "t"}, map[string]any{"scheme": "basic", "principal": "u", "credentials": "wrong"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := dial(t, addr, tc.ver)
			c.send(msgHello, tc.hello)
			if tc.logon != nil {
				c.success()
				c.send(msgLogon, tc.logon)
			}
			if f := c.expect(msgFailure).(map[string]any); f["code"] != CodeUnauthenticated {
				t.Fatalf("FAILURE = %v", f)
			}
			c.expectClosed()
		})
	}
}

func TestProtocolViolationsClose(t *testing.T) {
	addr, _ := startServer(t)
	for _, tc := range []struct {
		name string
		do   func(c *client)
	}{
		{"RUN before HELLO", func(c *client) { c.send(msgRun, "RETURN 1", map[string]any{}, map[string]any{}) }},
		{"HELLO without user_agent", func(c *client) { c.send(msgHello, map[string]any{}) }},
		{"PULL without RUN", func(c *client) {
			c.send(msgHello, map[string]any{"user_agent": "t"})
			c.success()
			c.send(msgLogon, map[string]any{"scheme": "basic", "credentials": "secret"})
			c.success()
			c.send(msgPull, map[string]any{"n": int64(-1)})
		}},
		{"not a structure", func(c *client) {
			if err := writeMessage(c.w, []byte{0x01}); err != nil {
				t.Fatal(err)
			}
			_ = c.w.Flush()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := dial(t, addr, p(5, 2, 0))
			tc.do(c)
			c.expectClosed()
		})
	}
}

func TestNoCommonVersion(t *testing.T) {
	addr, stop := startServer(t)
	c, v := dial(t, addr, p(3, 0, 0))
	if v != (version{}) {
		t.Fatalf("negotiated %v, want none", v)
	}
	c.expectClosed()
	if conns := stop(); len(conns) != 0 {
		t.Fatalf("%d Conns created for a refused handshake, want 0", len(conns))
	}
}

// Cancelling Serve's context must also end connections that are idle in a read.
func TestServeStopsOpenConnections(t *testing.T) {
	addr, stop := startServer(t)
	c, _ := dial(t, addr, p(5, 2, 0))
	c.send(msgHello, map[string]any{"user_agent": "t"})
	c.success()
	stop()
	c.expectClosed()
}

// A value the Conn returns that PackStream cannot carry is the Conn's bug: the client gets
// a FAILURE (after the records already sent) instead of a dropped connection.
func TestUnpackableRecordFails(t *testing.T) {
	addr, _ := startServer(t)
	c, _ := dial(t, addr, p(5, 2, 0))
	c.send(msgHello, map[string]any{"user_agent": "t"})
	c.success()
	c.send(msgLogon, map[string]any{"scheme": "basic", "credentials": "secret"})
	c.success()
	c.send(msgRun, "UNPACKABLE", map[string]any{}, map[string]any{})
	c.success()
	c.send(msgPull, map[string]any{"n": int64(-1)})
	c.expect(msgRecord)
	if f := c.expect(msgFailure).(map[string]any); f["code"] != codeDatabaseError {
		t.Fatalf("FAILURE = %v, want %s", f, codeDatabaseError)
	}
	c.send(msgReset)
	c.success()
	c.send(msgRun, "UNWIND range(1, 3) AS x RETURN x", map[string]any{}, map[string]any{})
	c.success()
}

func TestHandshakeTimeout(t *testing.T) {
	old := handshakeTimeout
	handshakeTimeout = 100 * time.Millisecond
	t.Cleanup(func() { handshakeTimeout = old })
	addr, _ := startServer(t)
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = nc.Close() }()
	_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := nc.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("silent client: read = %v, want EOF once the server gives up", err)
	}
}

// FuzzSession feeds arbitrary chunked input to the message loop of every supported version:
// whatever a client sends, the server must answer or hang up, never panic or spin.
func FuzzSession(f *testing.F) {
	msg := func(tag byte, fields ...any) []byte {
		var p packer
		if err := p.pack(structure{tag: tag, fields: fields}); err != nil {
			f.Fatal(err)
		}
		var b bytes.Buffer
		w := bufio.NewWriter(&b)
		_ = writeMessage(w, p.buf)
		_ = w.Flush()
		return b.Bytes()
	}
	auth := map[string]any{"user_agent": "f", "scheme": "basic", "credentials": "secret"}
	run := func(q string) []byte { return msg(msgRun, q, map[string]any{}, map[string]any{}) }
	pull := msg(msgPull, map[string]any{"n": int64(1)})
	f.Add(slices.Concat(msg(msgHello, auth), msg(msgLogon, auth), run("UNWIND range(1, 3) AS x RETURN x"), pull, pull, msg(msgDiscard, map[string]any{})))
	f.Add(slices.Concat(msg(msgHello, auth), msg(msgBegin, map[string]any{}), run("CREATE (n:L {k: $k}) RETURN n"), pull, msg(msgCommit)))
	f.Add(slices.Concat(msg(msgHello, auth), run("SYNTAX"), pull, msg(msgReset), msg(msgRoute, map[string]any{}, []any{}, nil), msg(msgLogoff), msg(msgGoodbye)))
	f.Fuzz(func(t *testing.T, wire []byte) {
		for _, v := range supported {
			s := &session{
				r: bufio.NewReader(bytes.NewReader(wire)), w: bufio.NewWriter(io.Discard),
				id: "bolt-1", ver: v, out: packer{v5: v.major >= 5}, conn: &testConn{},
			}
			s.loop(context.Background())
		}
	})
}

// flakyListener fails its first Accepts the way a process out of file descriptors does.
type flakyListener struct {
	net.Listener
	failures atomic.Int32
}

func (l *flakyListener) Accept() (net.Conn, error) {
	if l.failures.Add(-1) >= 0 {
		return nil, errors.New("accept: too many open files")
	}
	return l.Listener.Accept()
}

func TestServeSurvivesTransientAcceptErrors(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := &flakyListener{Listener: inner}
	ln.failures.Store(3)
	done := make(chan error, 1)
	go func() {
		done <- Serve(context.Background(), ln, func(net.Addr) Conn { return &testConn{} })
	}()
	c, v := dial(t, inner.Addr().String(), p(5, 2, 0))
	if v != (version{5, 2}) {
		t.Fatalf("negotiated %v after transient Accept errors, want 5.2", v)
	}
	c.send(msgHello, map[string]any{"user_agent": "t"})
	c.success()

	// Closing the listener from outside ends Serve with Accept's error.
	_ = inner.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Serve = %v, want net.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after its listener was closed")
	}
}

// Inside a transaction several results may be open at once; PULL picks one by qid, and
// qid -1 (or none) means the latest.
func TestTransactionWithSeveralResults(t *testing.T) {
	addr, _ := startServer(t)
	c, _ := dial(t, addr, p(4, 4, 2))
	c.send(msgHello, map[string]any{"user_agent": "t", "scheme": "basic", "credentials": "secret"})
	c.success()
	c.send(msgBegin, map[string]any{"mode": "r"})
	c.success()
	query := "UNWIND range(1, 3) AS x RETURN x"
	c.send(msgRun, query, map[string]any{}, map[string]any{})
	c.send(msgRun, query, map[string]any{}, map[string]any{})
	if a, b := c.success()["qid"], c.success()["qid"]; a != int64(0) || b != int64(1) {
		t.Fatalf("qids %v, %v; want 0, 1", a, b)
	}
	c.send(msgPull, map[string]any{"n": int64(2), "qid": int64(0)})
	c.expect(msgRecord)
	c.expect(msgRecord)
	if s := c.success(); s["has_more"] != true {
		t.Fatalf("PULL qid 0 n=2: %v, want has_more", s)
	}
	c.send(msgDiscard, map[string]any{"n": int64(-1)}) // no qid: the latest, qid 1
	if s := c.success(); s["has_more"] != false {
		t.Fatalf("DISCARD latest: %v", s)
	}
	c.send(msgPull, map[string]any{"n": int64(-1), "qid": int64(0)})
	if rec := c.expect(msgRecord); !reflect.DeepEqual(rec, []any{int64(3)}) {
		t.Fatalf("rest of qid 0: %v, want [3]", rec)
	}
	c.success()
	c.send(msgRun, query, map[string]any{}, map[string]any{})
	c.success()
	c.send(msgPull, map[string]any{"n": int64(-1), "qid": int64(7)})
	if f := c.expect(msgFailure).(map[string]any); f["code"] != CodeMemgraphError {
		t.Fatalf("PULL of an unknown qid: %v", f)
	}
	c.send(msgRollback)
	c.expect(msgIgnored)
	c.send(msgReset)
	c.success()
}
