package bolt

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Serve accepts connections on ln and serves each with the Conn newConn returns, until ctx
// is cancelled (it returns nil) or ln is closed by someone else (it returns Accept's error);
// other Accept errors are retried with a backoff. Either way it closes ln and every open
// connection and waits for their handlers before returning.
func Serve(ctx context.Context, ln net.Listener, newConn func(remote net.Addr) Conn) error {
	ctx, cancel := context.WithCancel(ctx)
	var (
		mu   sync.Mutex
		open = map[net.Conn]struct{}{}
		wg   sync.WaitGroup
		ids  atomic.Int64
	)
	// However Serve ends, the listener and every connection are closed before it returns.
	context.AfterFunc(ctx, func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for c := range open {
			_ = c.Close()
		}
	})
	defer func() {
		cancel()
		wg.Wait()
	}()
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			// Transient failures such as EMFILE must not take the whole server down:
			// back off like net/http does and keep accepting.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
			}
			continue
		}
		backoff = 0
		mu.Lock()
		if ctx.Err() != nil { // raced with shutdown: the AfterFunc has already run
			mu.Unlock()
			_ = nc.Close()
			return nil
		}
		open[nc] = struct{}{}
		mu.Unlock()
		wg.Go(func() {
			defer func() {
				mu.Lock()
				delete(open, nc)
				mu.Unlock()
				_ = nc.Close()
			}()
			s := &session{
				nc: nc, r: bufio.NewReader(nc), w: bufio.NewWriter(nc),
				id: "bolt-" + strconv.FormatInt(ids.Add(1), 10),
			}
			s.serve(ctx, newConn)
		})
	}
}

// state is the server side of the Bolt connection state machine.
type state int

const (
	stateHello  state = iota // expecting HELLO
	stateLogon               // Bolt 5.1+: HELLO done, expecting LOGON
	stateReady               // READY, TX_READY, STREAMING and TX_STREAMING (see tx, streams)
	stateFailed              // after a FAILURE: IGNORED until RESET
)

// Message signatures.
const (
	msgHello    = 0x01
	msgGoodbye  = 0x02
	msgReset    = 0x0F
	msgRun      = 0x10
	msgBegin    = 0x11
	msgCommit   = 0x12
	msgRollback = 0x13
	msgDiscard  = 0x2F
	msgPull     = 0x3F
	msgRoute    = 0x66
	msgLogon    = 0x6A
	msgLogoff   = 0x6B

	msgSuccess = 0x70
	msgRecord  = 0x71
	msgIgnored = 0x7E
	msgFailure = 0x7F
)

// codeDatabaseError is Memgraph's code for an error that is the server's fault.
const codeDatabaseError = "Memgraph.DatabaseError.MemgraphError.MemgraphError"

// errClose ends a connection without a reply: Memgraph closes the socket on protocol
// violations (unexpected or malformed messages) and after a failed authentication.
var errClose = errors.New("bolt: closing connection")

// stream is an open result: RUN answered, records not yet all pulled or discarded.
type stream struct {
	res  *Result
	next int
}

type session struct {
	nc   net.Conn
	r    *bufio.Reader
	w    *bufio.Writer
	id   string
	ver  version
	conn Conn

	state     state
	userAgent string
	// tx is true between a successful BEGIN and COMMIT/ROLLBACK/RESET.
	tx bool
	// txDB and txMode come from BEGIN and apply to every RUN inside the transaction.
	txDB, txMode string
	// streams holds open results by qid; outside a transaction only qid 0 is used.
	streams map[int64]*stream
	lastQID int64
	nextQID int64

	in  []byte
	out packer
}

// handshakeTimeout bounds how long a silent client may hold a connection before it has
// even negotiated a version (port scanners, health probes that only open the socket).
// A variable so a test can shorten it.
var handshakeTimeout = 10 * time.Second

func (s *session) serve(ctx context.Context, newConn func(net.Addr) Conn) {
	_ = s.nc.SetReadDeadline(time.Now().Add(handshakeTimeout))
	v, err := handshake(s.nc)
	if err != nil {
		return
	}
	_ = s.nc.SetReadDeadline(time.Time{})
	s.ver = v
	s.out.v5 = v.major >= 5
	s.conn = newConn(s.nc.RemoteAddr())
	defer s.conn.Close()
	s.loop(ctx)
}

// loop handles messages until the client leaves, the connection fails or the protocol is
// violated.
func (s *session) loop(ctx context.Context) {
	s.streams = map[int64]*stream{}
	for {
		var err error
		s.in, err = readMessage(s.r, s.in)
		if err != nil {
			return
		}
		msg, err := decodeMessage(s.in)
		if err == nil {
			err = s.handle(ctx, msg)
		}
		if pe, ok := errors.AsType[packError](err); ok {
			// Nothing of the unpackable reply was written, so a FAILURE keeps the stream
			// consistent; RESET then drops the broken result.
			err = s.fail(pe.error, codeDatabaseError)
		}
		// Flush only once the client's pipeline is drained, so pipelined requests
		// (the driver sends RUN+PULL, BEGIN+RUN+PULL together) get one write.
		if err == nil && s.r.Buffered() == 0 {
			err = s.w.Flush()
		}
		if err != nil {
			_ = s.w.Flush() // deliver a final FAILURE before closing
			return
		}
	}
}

func decodeMessage(b []byte) (structure, error) {
	u := unpacker{b: b}
	v, err := u.unpack()
	if err != nil {
		return structure{}, err
	}
	m, ok := v.(structure)
	if !ok || len(u.b) != 0 {
		return structure{}, errors.New("bolt: message is not a single structure")
	}
	return m, nil
}

// packError marks a value the Conn returned that PackStream cannot carry (a bug in the
// Conn, reported to the client as a FAILURE rather than a dropped connection).
type packError struct{ error }

func (s *session) send(tag byte, fields ...any) error {
	s.out.buf = s.out.buf[:0]
	if err := s.out.pack(structure{tag: tag, fields: fields}); err != nil {
		return packError{err}
	}
	return writeMessage(s.w, s.out.buf)
}

func (s *session) success(meta map[string]any) error {
	if meta == nil {
		meta = map[string]any{}
	}
	return s.send(msgSuccess, meta)
}

// fail sends FAILURE for err and enters the FAILED state. A *Failure keeps its code;
// anything else gets Memgraph's generic query error code.
func (s *session) fail(err error, code string) error {
	msg := err.Error()
	if f, ok := errors.AsType[*Failure](err); ok {
		code, msg = f.Code, f.Message
	}
	s.state = stateFailed
	return s.send(msgFailure, map[string]any{"code": code, "message": msg})
}

func (s *session) handle(ctx context.Context, m structure) error {
	switch s.state {
	case stateHello:
		if m.tag == msgHello && len(m.fields) == 1 {
			return s.hello(m.fields[0])
		}
	case stateLogon:
		if m.tag == msgLogon && len(m.fields) == 1 {
			return s.logon(m.fields[0])
		}
	case stateFailed:
		switch m.tag {
		case msgReset:
			return s.reset()
		case msgGoodbye:
			return errClose
		}
		return s.send(msgIgnored)
	case stateReady:
		return s.ready(ctx, m)
	}
	// GOODBYE, or anything unexpected before authentication (a protocol violation).
	return errClose
}

func (s *session) ready(ctx context.Context, m structure) error {
	autocommitStreaming := !s.tx && len(s.streams) > 0
	switch {
	case m.tag == msgGoodbye && len(m.fields) == 0:
		return errClose
	case m.tag == msgReset && len(m.fields) == 0:
		return s.reset()
	case m.tag == msgRun && len(m.fields) == 3 && !autocommitStreaming:
		return s.run(ctx, m.fields)
	case (m.tag == msgPull || m.tag == msgDiscard) && len(m.fields) == 1 && len(s.streams) > 0:
		return s.pullOrDiscard(m.tag == msgPull, m.fields[0])
	case m.tag == msgBegin && len(m.fields) == 1 && !s.tx && !autocommitStreaming:
		return s.begin(m.fields[0])
	case (m.tag == msgCommit || m.tag == msgRollback) && len(m.fields) == 0 && s.tx:
		return s.endTx(m.tag == msgCommit)
	case m.tag == msgRoute && len(m.fields) == 3 && s.ver.atLeast(4, 3) && !s.tx && !autocommitStreaming:
		return s.route(m.fields[2])
	case m.tag == msgLogoff && len(m.fields) == 0 && s.ver.atLeast(5, 1) && !s.tx && !autocommitStreaming:
		s.state = stateLogon
		return s.success(nil)
	}
	return errClose // unexpected in this state or malformed: Memgraph closes too
}

func (s *session) hello(f any) error {
	extra, ok := f.(map[string]any)
	if !ok {
		return errClose
	}
	ua, ok := extra["user_agent"].(string)
	if !ok { // Memgraph refuses a HELLO without user_agent by closing
		return errClose
	}
	s.userAgent = ua
	if !s.ver.atLeast(5, 1) { // before 5.1 the credentials travel in HELLO
		if err := s.authenticate(extra); err != nil {
			return err
		}
		s.state = stateReady
	} else {
		s.state = stateLogon
	}
	return s.success(map[string]any{"server": ServerAgent, "connection_id": s.id})
}

func (s *session) logon(f any) error {
	token, ok := f.(map[string]any)
	if !ok {
		return errClose
	}
	if err := s.authenticate(token); err != nil {
		return err
	}
	s.state = stateReady
	return s.success(nil)
}

// authenticate checks the token; on rejection it sends FAILURE and closes, as Memgraph does.
func (s *session) authenticate(token map[string]any) error {
	a := Auth{}
	a.Scheme, _ = token["scheme"].(string)
	a.Principal, _ = token["principal"].(string)
	a.Credentials, _ = token["credentials"].(string)
	if err := s.conn.Authenticate(s.userAgent, a); err != nil {
		if ferr := s.fail(err, CodeUnauthenticated); ferr != nil {
			return ferr
		}
		return errClose
	}
	return nil
}

func (s *session) reset() error {
	if s.tx {
		_ = s.conn.Rollback() // RESET abandons the transaction whatever its state
	}
	s.tx, s.txDB, s.txMode = false, "", ""
	clear(s.streams)
	s.state = stateReady
	return s.success(nil)
}

func (s *session) run(ctx context.Context, f []any) error {
	text, ok1 := f[0].(string)
	params, ok2 := f[1].(map[string]any)
	extra, ok3 := f[2].(map[string]any)
	if !ok1 || (!ok2 && f[1] != nil) || (!ok3 && f[2] != nil) {
		return errClose
	}
	q := Query{Text: text, Params: params, InTx: s.tx, DB: s.txDB, Mode: s.txMode}
	if !s.tx {
		q.DB, q.Mode = dbAndMode(extra)
	}
	start := time.Now()
	res, err := s.conn.Run(ctx, q)
	if err != nil {
		return s.fail(err, CodeMemgraphError)
	}
	if res == nil {
		res = &Result{}
	}
	fields := res.Fields
	if fields == nil {
		fields = []string{}
	}
	meta := map[string]any{"fields": fields, "t_first": time.Since(start).Milliseconds()}
	var qid int64
	if s.tx { // qids only identify results inside explicit transactions
		qid = s.nextQID
		s.nextQID++
		meta["qid"] = qid
	}
	s.streams[qid] = &stream{res: res}
	s.lastQID = qid
	return s.success(meta)
}

// dbAndMode reads the routing-relevant keys of RUN's or BEGIN's extra map.
func dbAndMode(extra map[string]any) (db, mode string) {
	db, _ = extra["db"].(string)
	mode, _ = extra["mode"].(string)
	if mode == "" {
		mode = "w" // the Bolt default access mode
	}
	return db, mode
}

func (s *session) pullOrDiscard(pull bool, f any) error {
	extra, ok := f.(map[string]any)
	if !ok {
		return errClose
	}
	n, qid := int64(-1), int64(-1)
	if v, ok := extra["n"].(int64); ok {
		n = v
	}
	if v, ok := extra["qid"].(int64); ok {
		qid = v
	}
	if qid == -1 {
		qid = s.lastQID
	}
	start := time.Now()
	st, ok := s.streams[qid]
	if !ok {
		return s.fail(fmt.Errorf("no result with qid %d", qid), CodeMemgraphError)
	}
	remaining := int64(len(st.res.Records) - st.next)
	if n < 0 || n > remaining {
		n = remaining
	}
	for _, rec := range st.res.Records[st.next : st.next+int(n)] {
		if pull {
			if rec == nil {
				rec = []any{}
			}
			if err := s.send(msgRecord, rec); err != nil {
				return err
			}
		}
	}
	st.next += int(n)
	if st.next < len(st.res.Records) {
		return s.success(map[string]any{"has_more": true})
	}
	delete(s.streams, qid)
	typ := st.res.Type
	if typ == "" {
		typ = "r"
	}
	meta := map[string]any{"has_more": false, "type": typ, "t_last": time.Since(start).Milliseconds()}
	if len(st.res.Stats) > 0 {
		meta["stats"] = st.res.Stats
	}
	return s.success(meta)
}

func (s *session) begin(f any) error {
	extra, ok := f.(map[string]any)
	if !ok && f != nil {
		return errClose
	}
	db, mode := dbAndMode(extra)
	if err := s.conn.Begin(mode, db); err != nil {
		return s.fail(err, CodeMemgraphError)
	}
	s.tx, s.txDB, s.txMode = true, db, mode
	s.nextQID = 0
	return s.success(nil)
}

func (s *session) endTx(commit bool) error {
	// Results left open are discarded with the transaction.
	clear(s.streams)
	meta := map[string]any{}
	var err error
	if commit {
		var bookmark string
		if bookmark, err = s.conn.Commit(); bookmark != "" {
			meta["bookmark"] = bookmark
		}
	} else {
		err = s.conn.Rollback()
	}
	if err != nil {
		// Keep tx set: RESET then tells the Conn to roll back whatever is left.
		return s.fail(err, CodeMemgraphError)
	}
	s.tx, s.txDB, s.txMode = false, "", ""
	return s.success(meta)
}

func (s *session) route(f any) error {
	var db string
	switch x := f.(type) {
	case string: // Bolt 4.3 sends the database name itself
		db = x
	case map[string]any: // 4.4+ sends {db, imp_user}
		db, _ = x["db"].(string)
	case nil:
	default:
		return errClose
	}
	rt, err := s.conn.Route(db)
	if err != nil {
		return s.fail(err, CodeMemgraphError)
	}
	if rt == nil {
		rt = &RoutingTable{}
	}
	servers := []any{}
	for _, r := range []struct {
		role  string
		addrs []string
	}{{"ROUTE", rt.Routers}, {"WRITE", rt.Writers}, {"READ", rt.Readers}} {
		addrs := r.addrs
		if addrs == nil {
			addrs = []string{}
		}
		servers = append(servers, map[string]any{"addresses": addrs, "role": r.role})
	}
	// The driver keys its routing table cache by this name and takes it as the home
	// database, so never leave it empty: Memgraph's default database is "memgraph".
	name := cmp.Or(rt.DB, db, DefaultDatabase)
	table := map[string]any{"ttl": rt.TTL, "db": name, "servers": servers}
	return s.success(map[string]any{"rt": table})
}
