package bolt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
)

// PackStream v1 markers (https://neo4j.com/docs/bolt/current/packstream/).
const (
	mNull    = 0xC0
	mFloat   = 0xC1
	mFalse   = 0xC2
	mTrue    = 0xC3
	mInt8    = 0xC8
	mInt16   = 0xC9
	mInt32   = 0xCA
	mInt64   = 0xCB
	mBytes8  = 0xCC
	mBytes16 = 0xCD
	mBytes32 = 0xCE
	mString8 = 0xD0
	mList8   = 0xD4
	mMap8    = 0xD8

	mTinyString = 0x80
	mTinyList   = 0x90
	mTinyMap    = 0xA0
	mTinyStruct = 0xB0

	tagNode = 0x4E
)

// maxDepth bounds container nesting while decoding: a hostile message of nested one-byte
// lists would otherwise recurse until the goroutine stack limit kills the whole process.
const maxDepth = 64

// structure is a PackStream structure other than Node; only messages use it.
type structure struct {
	tag    byte
	fields []any
}

// packer appends PackStream values to buf. v5 selects the Bolt 5 Node layout (element_id).
type packer struct {
	buf []byte
	v5  bool
}

func (p *packer) header(tiny, base byte, n int) {
	switch {
	case n < 16 && tiny != 0:
		p.buf = append(p.buf, tiny|byte(n))
	case n <= math.MaxUint8:
		p.buf = append(p.buf, base, byte(n))
	case n <= math.MaxUint16:
		p.buf = binary.BigEndian.AppendUint16(append(p.buf, base+1), uint16(n))
	default:
		p.buf = binary.BigEndian.AppendUint32(append(p.buf, base+2), uint32(n))
	}
}

func (p *packer) int(i int64) {
	switch {
	case i >= -16 && i <= math.MaxInt8:
		p.buf = append(p.buf, byte(int8(i)))
	case i >= math.MinInt8 && i <= math.MaxInt8:
		p.buf = append(p.buf, mInt8, byte(int8(i)))
	case i >= math.MinInt16 && i <= math.MaxInt16:
		p.buf = binary.BigEndian.AppendUint16(append(p.buf, mInt16), uint16(int16(i)))
	case i >= math.MinInt32 && i <= math.MaxInt32:
		p.buf = binary.BigEndian.AppendUint32(append(p.buf, mInt32), uint32(int32(i)))
	default:
		p.buf = binary.BigEndian.AppendUint64(append(p.buf, mInt64), uint64(i))
	}
}

func (p *packer) string(s string) {
	p.header(mTinyString, mString8, len(s))
	p.buf = append(p.buf, s...)
}

func (p *packer) structHeader(tag byte, n int) {
	p.buf = append(p.buf, mTinyStruct|byte(n), tag)
}

// pack appends v. The common types are handled directly; other slices and string-keyed
// maps go through reflection so a Conn can return e.g. []string or map[string]int64.
func (p *packer) pack(v any) error {
	switch x := v.(type) {
	case nil:
		p.buf = append(p.buf, mNull)
	case bool:
		if x {
			p.buf = append(p.buf, mTrue)
		} else {
			p.buf = append(p.buf, mFalse)
		}
	case int:
		p.int(int64(x))
	case int8:
		p.int(int64(x))
	case int16:
		p.int(int64(x))
	case int32:
		p.int(int64(x))
	case int64:
		p.int(x)
	case uint8:
		p.int(int64(x))
	case uint16:
		p.int(int64(x))
	case uint32:
		p.int(int64(x))
	case uint:
		if uint64(x) > math.MaxInt64 {
			return fmt.Errorf("bolt: %d does not fit an Integer", x)
		}
		p.int(int64(x))
	case uint64:
		if x > math.MaxInt64 {
			return fmt.Errorf("bolt: %d does not fit an Integer", x)
		}
		p.int(int64(x))
	case float32:
		p.float(float64(x))
	case float64:
		p.float(x)
	case string:
		p.string(x)
	case []byte:
		p.header(0, mBytes8, len(x))
		p.buf = append(p.buf, x...)
	case []any:
		p.header(mTinyList, mList8, len(x))
		for _, e := range x {
			if err := p.pack(e); err != nil {
				return err
			}
		}
	case map[string]any:
		p.header(mTinyMap, mMap8, len(x))
		for _, k := range sortedKeys(x) {
			p.string(k)
			if err := p.pack(x[k]); err != nil {
				return err
			}
		}
	case Node:
		return p.node(x)
	case *Node:
		if x == nil {
			p.buf = append(p.buf, mNull)
			return nil
		}
		return p.node(*x)
	case structure:
		if len(x.fields) > 15 {
			return fmt.Errorf("bolt: structure 0x%02X has %d fields", x.tag, len(x.fields))
		}
		p.structHeader(x.tag, len(x.fields))
		for _, f := range x.fields {
			if err := p.pack(f); err != nil {
				return err
			}
		}
	default:
		return p.reflect(v)
	}
	return nil
}

func (p *packer) float(f float64) {
	p.buf = binary.BigEndian.AppendUint64(append(p.buf, mFloat), math.Float64bits(f))
}

func (p *packer) node(n Node) error {
	fields := 3
	if p.v5 {
		fields = 4
	}
	p.structHeader(tagNode, fields)
	p.int(n.ID)
	p.header(mTinyList, mList8, len(n.Labels))
	for _, l := range n.Labels {
		p.string(l)
	}
	props := n.Props
	if props == nil {
		props = map[string]any{}
	}
	if err := p.pack(props); err != nil {
		return err
	}
	if p.v5 {
		id := n.ElementID
		if id == "" {
			// Bolt 5 requires an element_id; Memgraph derives it from the internal id.
			id = strconv.FormatInt(n.ID, 10)
		}
		p.string(id)
	}
	return nil
}

func (p *packer) reflect(v any) error {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Slice, reflect.Array:
		p.header(mTinyList, mList8, rv.Len())
		for i := range rv.Len() {
			if err := p.pack(rv.Index(i).Interface()); err != nil {
				return err
			}
		}
		return nil
	case reflect.Map:
		if rv.Type().Key().Kind() != reflect.String {
			break
		}
		keys := make([]string, 0, rv.Len())
		for _, k := range rv.MapKeys() {
			keys = append(keys, k.String())
		}
		sort.Strings(keys)
		p.header(mTinyMap, mMap8, len(keys))
		for _, k := range keys {
			p.string(k)
			if err := p.pack(rv.MapIndex(reflect.ValueOf(k).Convert(rv.Type().Key())).Interface()); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("bolt: cannot pack %T", v)
}

// sortedKeys makes the encoding deterministic, which keeps tests and captures stable.
func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

var errTruncated = errors.New("bolt: truncated PackStream value")

// unpacker decodes PackStream values from b. Integers decode as int64, lists as []any,
// maps as map[string]any, Node structures as Node and other structures as structure.
type unpacker struct {
	b     []byte
	depth int
}

func (u *unpacker) take(n int) ([]byte, error) {
	if n < 0 || n > len(u.b) {
		return nil, errTruncated
	}
	out := u.b[:n]
	u.b = u.b[n:]
	return out, nil
}

// size reads a length of w bytes (1, 2 or 4) after a marker.
func (u *unpacker) size(w int) (int, error) {
	b, err := u.take(w)
	if err != nil {
		return 0, err
	}
	switch w {
	case 1:
		return int(b[0]), nil
	case 2:
		return int(binary.BigEndian.Uint16(b)), nil
	default:
		n := binary.BigEndian.Uint32(b)
		if uint64(n) > uint64(len(u.b)) {
			return 0, errTruncated // also keeps the int conversion in range on 32-bit
		}
		return int(n), nil
	}
}

func (u *unpacker) unpack() (any, error) {
	mb, err := u.take(1)
	if err != nil {
		return nil, err
	}
	m := mb[0]
	switch {
	case m <= 0x7F || m >= 0xF0:
		return int64(int8(m)), nil
	case m&0xF0 == mTinyString:
		return u.stringOf(int(m & 0x0F))
	case m&0xF0 == mTinyList:
		return u.list(int(m & 0x0F))
	case m&0xF0 == mTinyMap:
		return u.mapOf(int(m & 0x0F))
	case m&0xF0 == mTinyStruct:
		return u.structOf(int(m & 0x0F))
	}
	switch m {
	case mNull:
		return nil, nil
	case mTrue:
		return true, nil
	case mFalse:
		return false, nil
	case mFloat:
		b, err := u.take(8)
		if err != nil {
			return nil, err
		}
		return math.Float64frombits(binary.BigEndian.Uint64(b)), nil
	case mInt8, mInt16, mInt32, mInt64:
		b, err := u.take(1 << (m - mInt8))
		if err != nil {
			return nil, err
		}
		switch m {
		case mInt8:
			return int64(int8(b[0])), nil
		case mInt16:
			return int64(int16(binary.BigEndian.Uint16(b))), nil
		case mInt32:
			return int64(int32(binary.BigEndian.Uint32(b))), nil
		}
		return int64(binary.BigEndian.Uint64(b)), nil
	case mBytes8, mBytes8 + 1, mBytes8 + 2:
		n, err := u.size(1 << (m - mBytes8))
		if err != nil {
			return nil, err
		}
		b, err := u.take(n)
		if err != nil {
			return nil, err
		}
		return append([]byte{}, b...), nil
	case mString8, mString8 + 1, mString8 + 2:
		n, err := u.size(1 << (m - mString8))
		if err != nil {
			return nil, err
		}
		return u.stringOf(n)
	case mList8, mList8 + 1, mList8 + 2:
		n, err := u.size(1 << (m - mList8))
		if err != nil {
			return nil, err
		}
		return u.list(n)
	case mMap8, mMap8 + 1, mMap8 + 2:
		n, err := u.size(1 << (m - mMap8))
		if err != nil {
			return nil, err
		}
		return u.mapOf(n)
	}
	return nil, fmt.Errorf("bolt: unknown PackStream marker 0x%02X", m)
}

func (u *unpacker) stringOf(n int) (string, error) {
	b, err := u.take(n)
	return string(b), err
}

// enter guards recursion and rejects element counts the remaining bytes cannot hold, so a
// forged length cannot make us allocate gigabytes.
func (u *unpacker) enter(n, minBytesPerElem int) error {
	if u.depth >= maxDepth {
		return fmt.Errorf("bolt: PackStream nesting deeper than %d", maxDepth)
	}
	if n*minBytesPerElem > len(u.b) {
		return errTruncated
	}
	u.depth++
	return nil
}

func (u *unpacker) list(n int) ([]any, error) {
	if err := u.enter(n, 1); err != nil {
		return nil, err
	}
	defer func() { u.depth-- }()
	out := make([]any, n)
	for i := range out {
		v, err := u.unpack()
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

func (u *unpacker) mapOf(n int) (map[string]any, error) {
	if err := u.enter(n, 2); err != nil {
		return nil, err
	}
	defer func() { u.depth-- }()
	out := make(map[string]any, n)
	for range n {
		k, err := u.unpack()
		if err != nil {
			return nil, err
		}
		ks, ok := k.(string)
		if !ok {
			return nil, fmt.Errorf("bolt: map key is %T, not a string", k)
		}
		if out[ks], err = u.unpack(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (u *unpacker) structOf(n int) (any, error) {
	tb, err := u.take(1)
	if err != nil {
		return nil, err
	}
	fields, err := u.list(n)
	if err != nil {
		return nil, err
	}
	if tb[0] == tagNode {
		return nodeOf(fields)
	}
	return structure{tag: tb[0], fields: fields}, nil
}

func nodeOf(f []any) (Node, error) {
	bad := fmt.Errorf("bolt: malformed Node structure")
	if len(f) != 3 && len(f) != 4 {
		return Node{}, bad
	}
	id, ok1 := f[0].(int64)
	labels, ok2 := f[1].([]any)
	props, ok3 := f[2].(map[string]any)
	if !ok1 || !ok2 || !ok3 {
		return Node{}, bad
	}
	n := Node{ID: id, Labels: make([]string, len(labels)), Props: props}
	for i, l := range labels {
		s, ok := l.(string)
		if !ok {
			return Node{}, bad
		}
		n.Labels[i] = s
	}
	if len(f) == 4 {
		s, ok := f[3].(string)
		if !ok {
			return Node{}, bad
		}
		n.ElementID = s
	}
	return n, nil
}
