package memgraphsim

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"net"
	"testing"
	"time"
)

// boltClient is the least of a Bolt 4.4 client the process tests need: the wire as a
// driver speaks it, so the binary's flags, listeners and Bolt server are exercised
// together. (The repository's only real driver, neo4j-go-driver, belongs to the
// operator's internal/memgraph package, whose tests run it against this simulator.)
type boltClient struct {
	t  *testing.T
	nc net.Conn
	r  *bufio.Reader
}

// boltFailure is a FAILURE reply.
type boltFailure struct{ Code, Message string }

func (f *boltFailure) Error() string { return f.Code + ": " + f.Message }

func dialBolt(t *testing.T, addr, user, password string) (*boltClient, error) {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(30 * time.Second))
	hs := []byte{0x60, 0x60, 0xB0, 0x17, 0, 0, 4, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	if _, err := nc.Write(hs); err != nil {
		return nil, err
	}
	var v [4]byte
	if _, err := io.ReadFull(nc, v[:]); err != nil {
		return nil, err
	}
	if v != [4]byte{0, 0, 4, 4} {
		return nil, fmt.Errorf("server chose version %v, want 4.4", v)
	}
	c := &boltClient{t: t, nc: nc, r: bufio.NewReader(nc)}
	c.send(0x01, map[string]any{"user_agent": "memgraphsim-test/1", "scheme": "basic", "principal": user, "credentials": password})
	if _, err := c.reply(); err != nil {
		return nil, err
	}
	return c, nil
}

// run sends RUN and PULL and returns the field names and the records.
func (c *boltClient) run(query string) ([]string, [][]any, error) {
	c.t.Helper()
	c.send(0x10, query, map[string]any{}, map[string]any{})
	c.send(0x3F, map[string]any{"n": int64(-1)})
	meta, err := c.reply()
	if err != nil {
		if _, ierr := c.reply(); ierr == nil { // PULL is IGNORED after a FAILURE
			c.t.Fatal("PULL after a FAILURE was not ignored")
		}
		c.send(0x0F)
		if _, rerr := c.reply(); rerr != nil {
			c.t.Fatalf("RESET: %v", rerr)
		}
		return nil, nil, err
	}
	var fields []string
	for _, f := range meta["fields"].([]any) {
		fields = append(fields, f.(string))
	}
	var records [][]any
	for {
		tag, vals := c.recv()
		switch tag {
		case 0x71:
			records = append(records, vals[0].([]any))
		case 0x70:
			return fields, records, nil
		default:
			c.t.Fatalf("PULL answered 0x%02X %v", tag, vals)
		}
	}
}

// route sends ROUTE and returns the routing table's servers by role.
func (c *boltClient) route() (map[string][]string, error) {
	c.t.Helper()
	c.send(0x66, map[string]any{"address": c.nc.RemoteAddr().String()}, []any{}, map[string]any{})
	meta, err := c.reply()
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	rt := meta["rt"].(map[string]any)
	for _, s := range rt["servers"].([]any) {
		m := s.(map[string]any)
		for _, a := range m["addresses"].([]any) {
			out[m["role"].(string)] = append(out[m["role"].(string)], a.(string))
		}
	}
	return out, nil
}

// reply reads SUCCESS (its metadata) or FAILURE (as an error).
func (c *boltClient) reply() (map[string]any, error) {
	c.t.Helper()
	tag, vals := c.recv()
	switch tag {
	case 0x70:
		return vals[0].(map[string]any), nil
	case 0x7F:
		m := vals[0].(map[string]any)
		return nil, &boltFailure{Code: m["code"].(string), Message: m["message"].(string)}
	case 0x7E:
		return nil, &boltFailure{Code: "IGNORED"}
	}
	c.t.Fatalf("unexpected message 0x%02X %v", tag, vals)
	return nil, nil
}

func (c *boltClient) send(tag byte, fields ...any) {
	c.t.Helper()
	b := []byte{0xB0 | byte(len(fields)), tag}
	for _, f := range fields {
		b = packValue(b, f)
	}
	var out []byte
	for len(b) > 0 {
		n := min(len(b), math.MaxUint16)
		out = binary.BigEndian.AppendUint16(out, uint16(n))
		out = append(out, b[:n]...)
		b = b[n:]
	}
	if _, err := c.nc.Write(append(out, 0, 0)); err != nil {
		c.t.Fatal(err)
	}
}

func (c *boltClient) recv() (byte, []any) {
	c.t.Helper()
	var msg []byte
	for {
		var h [2]byte
		if _, err := io.ReadFull(c.r, h[:]); err != nil {
			c.t.Fatalf("read: %v", err)
		}
		n := binary.BigEndian.Uint16(h[:])
		if n == 0 {
			if len(msg) == 0 {
				continue // NOOP
			}
			break
		}
		chunk := make([]byte, n)
		if _, err := io.ReadFull(c.r, chunk); err != nil {
			c.t.Fatalf("read: %v", err)
		}
		msg = append(msg, chunk...)
	}
	u := unpacker{b: msg}
	v := u.value()
	s, ok := v.(boltStruct)
	if !ok || u.err != nil {
		c.t.Fatalf("bad message %x: %v", msg, u.err)
	}
	return s.tag, s.fields
}

type boltStruct struct {
	tag    byte
	fields []any
}

func packValue(b []byte, v any) []byte {
	header := func(tiny, base byte, n int) []byte {
		if n < 16 {
			return append(b, tiny|byte(n))
		}
		return binary.BigEndian.AppendUint32(append(b, base+2), uint32(n))
	}
	switch x := v.(type) {
	case nil:
		return append(b, 0xC0)
	case bool:
		if x {
			return append(b, 0xC3)
		}
		return append(b, 0xC2)
	case int64:
		return binary.BigEndian.AppendUint64(append(b, 0xCB), uint64(x))
	case string:
		b = header(0x80, 0xD0, len(x))
		return append(b, x...)
	case []any:
		b = header(0x90, 0xD4, len(x))
		for _, e := range x {
			b = packValue(b, e)
		}
		return b
	case map[string]any:
		b = header(0xA0, 0xD8, len(x))
		for k, e := range x {
			b = packValue(packValue(b, k), e)
		}
		return b
	}
	panic(fmt.Sprintf("cannot pack %T", v))
}

type unpacker struct {
	b   []byte
	err error
}

func (u *unpacker) take(n int) []byte {
	if u.err != nil || len(u.b) < n {
		u.err = io.ErrUnexpectedEOF
		return make([]byte, n)
	}
	out := u.b[:n]
	u.b = u.b[n:]
	return out
}

func (u *unpacker) size(m byte) int {
	switch m & 0x03 {
	case 0:
		return int(u.take(1)[0])
	case 1:
		return int(binary.BigEndian.Uint16(u.take(2)))
	default:
		return int(binary.BigEndian.Uint32(u.take(4)))
	}
}

func (u *unpacker) value() any {
	m := u.take(1)[0]
	switch {
	case m < 0x80:
		return int64(m)
	case m >= 0xF0:
		return int64(int8(m))
	case m>>4 == 0x8:
		return string(u.take(int(m & 0x0F)))
	case m>>4 == 0x9:
		return u.list(int(m & 0x0F))
	case m>>4 == 0xA:
		return u.dict(int(m & 0x0F))
	case m>>4 == 0xB:
		tag := u.take(1)[0]
		return boltStruct{tag: tag, fields: u.list(int(m & 0x0F))}
	}
	switch m {
	case 0xC0:
		return nil
	case 0xC1:
		return math.Float64frombits(binary.BigEndian.Uint64(u.take(8)))
	case 0xC2:
		return false
	case 0xC3:
		return true
	case 0xC8:
		return int64(int8(u.take(1)[0]))
	case 0xC9:
		return int64(int16(binary.BigEndian.Uint16(u.take(2))))
	case 0xCA:
		return int64(int32(binary.BigEndian.Uint32(u.take(4))))
	case 0xCB:
		return int64(binary.BigEndian.Uint64(u.take(8)))
	case 0xD0, 0xD1, 0xD2:
		return string(u.take(u.size(m)))
	case 0xD4, 0xD5, 0xD6:
		return u.list(u.size(m))
	case 0xD8, 0xD9, 0xDA:
		return u.dict(u.size(m))
	}
	u.err = fmt.Errorf("marker 0x%02X", m)
	return nil
}

func (u *unpacker) list(n int) []any {
	out := make([]any, 0, n)
	for range n {
		out = append(out, u.value())
	}
	return out
}

func (u *unpacker) dict(n int) map[string]any {
	out := map[string]any{}
	for range n {
		k, _ := u.value().(string)
		out[k] = u.value()
	}
	return out
}
