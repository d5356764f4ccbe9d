package valkey

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// RDBInfo describes a snapshot StreamRDB read.
type RDBInfo struct {
	// Bytes is the RDB payload's length.
	Bytes int64
	// Keys is the key count the RDB declares for its database (RESIZEDB); -1 when the
	// header holds something this reader does not parse before it (module data).
	Keys int64
	// Version is the server's version (valkey_version, else redis_version).
	Version string
	// Replica reports whether the member was a replica when asked.
	Replica bool
	// Diskless reports whether the member streamed the RDB from memory (the $EOF: form);
	// false means it wrote the RDB to its disk first (repl-diskless-sync no).
	Diskless bool
}

// rdbIdle bounds the silence on a synchronisation: a member preparing its snapshot sends
// a newline every second, so a minute without a byte is a dead connection.
const rdbIdle = time.Minute

// rdbHeaderPeek is how much of the payload is buffered to find the key count in its
// header: the version, the auxiliary fields and the database's RESIZEDB come first.
const rdbHeaderPeek = 256 << 10

// StreamRDB takes a consistent snapshot of the member at addr as a replica's full
// synchronisation does (valkey-cli --rdb): on a connection of its own, AUTH, REPLCONF capa
// eof (so a member with repl-diskless-sync, the default, forks and streams the RDB from
// memory without writing its disk), REPLCONF rdb-only 1 (the member sends the RDB and no
// replication stream after it, and does not count the connection as a replica), then
// SYNC. The payload goes to consume as it arrives; StreamRDB returns once consume has
// read all of it, and fails when consume stops early or the payload is cut short.
func StreamRDB(ctx context.Context, addr string, o Options, consume func(io.Reader) error) (RDBInfo, error) {
	if o.DialTimeout == 0 {
		o.DialTimeout = 5 * time.Second
	}
	d := net.Dialer{Timeout: o.DialTimeout}
	raw, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return RDBInfo{}, fmt.Errorf("connecting to %s: %w", addr, err)
	}
	var nc = raw
	if o.TLS != nil {
		cfg := o.TLS.Clone()
		if cfg.ServerName == "" && !cfg.InsecureSkipVerify {
			// As valkey-go does: the certificate must name the address dialled.
			cfg.ServerName, _, _ = net.SplitHostPort(addr)
		}
		nc = tls.Client(raw, cfg)
	}
	defer func() { _ = nc.Close() }()
	// Cancelling ctx unblocks a read or write in progress.
	stop := context.AfterFunc(ctx, func() { _ = nc.Close() })
	defer stop()
	rc := &respConn{c: nc, r: bufio.NewReaderSize(&idleReader{c: nc}, 64<<10), addr: addr}

	if o.Password != "" {
		user := o.Username
		if user == "" {
			user = "default"
		}
		if _, err := rc.call("AUTH", user, o.Password); err != nil {
			return RDBInfo{}, wrapCtx(ctx, err)
		}
	}
	info, err := rc.call("INFO", "server")
	if err != nil {
		return RDBInfo{}, wrapCtx(ctx, err)
	}
	out := RDBInfo{Keys: -1}
	kv := ParseInfo(info)
	out.Version = kv["valkey_version"]
	if out.Version == "" {
		out.Version = kv["redis_version"]
	}
	repl, err := rc.call("INFO", "replication")
	if err != nil {
		return RDBInfo{}, wrapCtx(ctx, err)
	}
	out.Replica = ParseReplication(repl).Replica()
	if _, err := rc.call("REPLCONF", "capa", "eof"); err != nil {
		return RDBInfo{}, wrapCtx(ctx, err)
	}
	// Servers before Redis 7.0 refuse rdb-only; they stream the replication feed after
	// the RDB, which is never read: the connection closes once the RDB is in.
	_, _ = rc.call("REPLCONF", "rdb-only", "1")
	if err := rc.send("SYNC"); err != nil {
		return RDBInfo{}, wrapCtx(ctx, err)
	}
	payload, diskless, err := rc.payload()
	if err != nil {
		return RDBInfo{}, wrapCtx(ctx, err)
	}
	out.Diskless = diskless
	counted := &countingReader{r: payload}
	br := bufio.NewReaderSize(counted, rdbHeaderPeek)
	head, _ := br.Peek(rdbHeaderPeek)
	if !validMagic(head) {
		return RDBInfo{}, fmt.Errorf("SYNC on %s: the payload is not an RDB (starts %q)", addr, head[:min(len(head), 9)])
	}
	out.Keys = rdbKeyCount(head)
	if err := consume(br); err != nil {
		return RDBInfo{}, wrapCtx(ctx, err)
	}
	// What consume left unread, or a payload cut short, is no snapshot.
	n, err := io.Copy(io.Discard, br)
	if err != nil {
		return RDBInfo{}, wrapCtx(ctx, fmt.Errorf("SYNC on %s: %w", addr, err))
	}
	if n != 0 {
		return RDBInfo{}, fmt.Errorf("SYNC on %s: the RDB was not read to its end (%d bytes left)", addr, n)
	}
	if !counted.eof {
		return RDBInfo{}, fmt.Errorf("SYNC on %s: the RDB ended early", addr)
	}
	out.Bytes = counted.n
	return out, nil
}

func wrapCtx(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w (%w)", ctx.Err(), err)
	}
	return err
}

// respConn is the few RESP exchanges a synchronisation needs.
type respConn struct {
	c    net.Conn
	r    *bufio.Reader
	addr string
}

// idleReader fails a read after rdbIdle without a byte.
type idleReader struct{ c net.Conn }

func (i *idleReader) Read(p []byte) (int, error) {
	_ = i.c.SetReadDeadline(time.Now().Add(rdbIdle))
	return i.c.Read(p)
}

func (c *respConn) send(args ...string) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	_ = c.c.SetWriteDeadline(time.Now().Add(rdbIdle))
	if _, err := c.c.Write(b.Bytes()); err != nil {
		return fmt.Errorf("%s on %s: %w", args[0], c.addr, err)
	}
	return nil
}

// call sends one command and reads a simple, error or bulk string reply.
func (c *respConn) call(args ...string) (string, error) {
	if err := c.send(args...); err != nil {
		return "", err
	}
	what := strings.Join(args[:min(len(args), 2)], " ")
	if args[0] == "AUTH" {
		what = "AUTH"
	}
	line, err := c.line()
	if err != nil {
		return "", fmt.Errorf("%s on %s: %w", what, c.addr, err)
	}
	switch {
	case strings.HasPrefix(line, "+"):
		return line[1:], nil
	case strings.HasPrefix(line, "-"):
		return "", fmt.Errorf("%s on %s: %s", what, c.addr, line[1:])
	case strings.HasPrefix(line, "$"), strings.HasPrefix(line, "="):
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", fmt.Errorf("%s on %s: bad reply %q", what, c.addr, line)
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(c.r, buf); err != nil {
			return "", fmt.Errorf("%s on %s: %w", what, c.addr, err)
		}
		return StripVerbatim(string(buf[:n])), nil
	default:
		return "", fmt.Errorf("%s on %s: unexpected reply %q", what, c.addr, line)
	}
}

func (c *respConn) line() (string, error) {
	s, err := c.r.ReadString('\n')
	if err != nil {
		return "", err
	}
	return strings.TrimRight(s, "\r\n"), nil
}

// eofMarkLen is the length of the random mark that ends a diskless payload.
const eofMarkLen = 40

// payload reads SYNC's answer up to the RDB: newlines while the member prepares the
// snapshot, then $<length> (a file on the member's disk) or $EOF:<mark> (streamed from
// memory, ended by the mark).
func (c *respConn) payload() (io.Reader, bool, error) {
	for {
		line, err := c.line()
		if err != nil {
			return nil, false, fmt.Errorf("SYNC on %s: %w", c.addr, err)
		}
		switch {
		case line == "":
			continue // keep-alive
		case strings.HasPrefix(line, "-"):
			return nil, false, fmt.Errorf("SYNC on %s: %s", c.addr, line[1:])
		case strings.HasPrefix(line, "$EOF:"):
			mark := line[len("$EOF:"):]
			if len(mark) != eofMarkLen {
				return nil, false, fmt.Errorf("SYNC on %s: bad end mark in %q", c.addr, line)
			}
			return &markReader{r: c.r, mark: []byte(mark)}, true, nil
		case strings.HasPrefix(line, "$"):
			n, err := strconv.ParseInt(line[1:], 10, 64)
			if err != nil || n < 0 {
				return nil, false, fmt.Errorf("SYNC on %s: bad payload length %q", c.addr, line)
			}
			return &lengthReader{r: io.LimitReader(c.r, n), left: n}, false, nil
		default:
			return nil, false, fmt.Errorf("SYNC on %s: unexpected reply %q", c.addr, line)
		}
	}
}

// lengthReader reads exactly the announced length; less is io.ErrUnexpectedEOF.
type lengthReader struct {
	r    io.Reader
	left int64
}

func (l *lengthReader) Read(p []byte) (int, error) {
	if l.left == 0 {
		return 0, io.EOF
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	if err == io.EOF && l.left > 0 {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

// markReader passes bytes through until the end mark, which it swallows; a connection
// that closes before the mark is io.ErrUnexpectedEOF.
type markReader struct {
	r    io.Reader
	mark []byte
	// buf[start:end] are bytes read but not yet passed on: they may start the mark.
	buf        []byte
	start, end int
	done       bool
}

// markReadSize is how much one read from the connection asks for: a few socket buffers,
// so a snapshot of gigabytes takes few reads and no allocation after the first.
const markReadSize = 256 << 10

func (m *markReader) Read(p []byte) (int, error) {
	for {
		held := m.buf[m.start:m.end]
		if m.done {
			if len(held) == 0 {
				return 0, io.EOF
			}
			n := copy(p, held)
			m.start += n
			return n, nil
		}
		// Pass on what can no longer be the start of the mark.
		if safe := len(held) - (len(m.mark) - 1); safe > 0 {
			n := copy(p, held[:safe])
			m.start += n
			return n, nil
		}
		if m.buf == nil {
			m.buf = make([]byte, markReadSize+len(m.mark))
		}
		// Fewer than a mark's bytes are held: move them to the front and read after them.
		m.end = copy(m.buf, held)
		m.start = 0
		n, err := m.r.Read(m.buf[m.end:])
		m.end += n
		// The mark can only end in what was just read, so the search starts a mark's
		// length before it.
		from := max(0, m.end-n-len(m.mark))
		if i := bytes.Index(m.buf[from:m.end], m.mark); i >= 0 {
			// Anything after the mark is the replication stream of a server that ignored
			// rdb-only: not part of the snapshot.
			m.end, m.done = from+i, true
			continue
		}
		if err == io.EOF {
			return 0, io.ErrUnexpectedEOF
		}
		if err != nil {
			return 0, err
		}
	}
}

type countingReader struct {
	r   io.Reader
	n   int64
	eof bool
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if err == io.EOF {
		c.eof = true
	}
	return n, err
}

func validMagic(b []byte) bool {
	digits := func(s []byte) bool {
		for _, c := range s {
			if c < '0' || c > '9' {
				return false
			}
		}
		return true
	}
	switch {
	case len(b) >= 9 && bytes.HasPrefix(b, []byte("REDIS")):
		return digits(b[5:9])
	case len(b) >= 9 && bytes.HasPrefix(b, []byte("VALKEY")):
		return digits(b[6:9])
	}
	return false
}

// RDB opcodes read before the first key.
const (
	rdbOpSlotInfo  = 0xF4
	rdbOpFunction2 = 0xF5
	rdbOpAux       = 0xFA
	rdbOpResizeDB  = 0xFB
	rdbOpSelectDB  = 0xFE
	rdbOpEOF       = 0xFF
)

// rdbKeyCount reads the key count the RDB header declares (the sum of the RESIZEDB sizes
// of its databases before the first key; 0 for an RDB with none), or -1 when head ends,
// or holds something it does not parse, before that.
func rdbKeyCount(head []byte) int64 {
	p := &rdbParser{b: head[9:]}
	var keys int64
	for {
		op, ok := p.byte()
		if !ok {
			return -1
		}
		switch op {
		case rdbOpAux:
			key, value := p.skipString(), p.skipString()
			if !key || !value {
				return -1
			}
		case rdbOpFunction2:
			if !p.skipString() {
				return -1
			}
		case rdbOpSelectDB:
			if _, ok := p.length(); !ok {
				return -1
			}
		case rdbOpResizeDB:
			size, ok := p.length()
			if _, ok2 := p.length(); !ok || !ok2 {
				return -1
			}
			keys += int64(size)
			// Cluster mode has database 0 only: its keys follow.
			return keys
		case rdbOpEOF:
			return keys
		case rdbOpSlotInfo:
			for range 3 {
				if _, ok := p.length(); !ok {
					return -1
				}
			}
		default:
			return -1
		}
	}
}

type rdbParser struct {
	b []byte
}

func (p *rdbParser) byte() (byte, bool) {
	if len(p.b) == 0 {
		return 0, false
	}
	c := p.b[0]
	p.b = p.b[1:]
	return c, true
}

func (p *rdbParser) take(n uint64) ([]byte, bool) {
	if uint64(len(p.b)) < n {
		return nil, false
	}
	out := p.b[:n]
	p.b = p.b[n:]
	return out, true
}

// lengthOrEncoding reads a length; special reports the 0b11 form, whose 6 bits name a
// string encoding instead.
func (p *rdbParser) lengthOrEncoding() (n uint64, special bool, ok bool) {
	c, ok := p.byte()
	if !ok {
		return 0, false, false
	}
	switch c >> 6 {
	case 0:
		return uint64(c & 0x3F), false, true
	case 1:
		d, ok := p.byte()
		return uint64(c&0x3F)<<8 | uint64(d), false, ok
	case 2:
		switch c {
		case 0x80:
			b, ok := p.take(4)
			if !ok {
				return 0, false, false
			}
			return uint64(binary.BigEndian.Uint32(b)), false, true
		case 0x81:
			b, ok := p.take(8)
			if !ok {
				return 0, false, false
			}
			return binary.BigEndian.Uint64(b), false, true
		}
		return 0, false, false
	default:
		return uint64(c & 0x3F), true, true
	}
}

func (p *rdbParser) length() (uint64, bool) {
	n, special, ok := p.lengthOrEncoding()
	return n, ok && !special
}

func (p *rdbParser) skipString() bool {
	n, special, ok := p.lengthOrEncoding()
	if !ok {
		return false
	}
	if !special {
		_, ok = p.take(n)
		return ok
	}
	switch n {
	case 0:
		_, ok = p.take(1)
	case 1:
		_, ok = p.take(2)
	case 2:
		_, ok = p.take(4)
	case 3: // LZF: compressed length, plain length, compressed bytes
		clen, ok1 := p.length()
		_, ok2 := p.length()
		if !ok1 || !ok2 {
			return false
		}
		_, ok = p.take(clen)
	default:
		return false
	}
	return ok
}
