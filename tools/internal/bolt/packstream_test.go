package bolt

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// Golden encodings from the PackStream v1 specification: the codec is checked against
// bytes, not only against itself, so the raw test client built on it is trustworthy.
func TestPackGolden(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    any
		hex  string
	}{
		{"null", nil, "c0"},
		{"true", true, "c3"},
		{"false", false, "c2"},
		{"tiny int", 1, "01"},
		{"tiny int -16", -16, "f0"},
		{"int8", -17, "c8ef"},
		{"int8 min", -128, "c880"},
		{"int16", 128, "c90080"},
		{"int16 min", -129, "c9ff7f"},
		{"int32", 32768, "ca00008000"},
		{"int64", int64(math.MaxInt32) + 1, "cb0000000080000000"},
		{"int64 min", int64(math.MinInt64), "cb8000000000000000"},
		{"uint8", uint8(200), "c900c8"},
		{"float", 1.1, "c13ff199999999999a"},
		{"float32", float32(0.5), "c13fe0000000000000"},
		{"empty string", "", "80"},
		{"tiny string", "a", "8161"},
		{"string8", strings.Repeat("a", 16), "d010" + strings.Repeat("61", 16)},
		{"bytes", []byte{1, 2}, "cc020102"},
		{"list", []any{1, 2, 3}, "93010203"},
		{"typed list", []string{"a"}, "918161"},
		{"map sorted", map[string]any{"b": 2, "a": 1}, "a2816101816202"},
		{"typed map", map[string]int64{"a": 1}, "a1816101"},
		{"list16 header", make([]any, 256), "d50100" + strings.Repeat("c0", 256)},
		{"map8 header", manyKeys(16), "d810"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := packer{}
			if err := p.pack(tc.v); err != nil {
				t.Fatal(err)
			}
			got := hex.EncodeToString(p.buf)
			if !strings.HasPrefix(got, tc.hex) || (tc.name != "map8 header" && got != tc.hex) {
				t.Fatalf("pack(%v) = %s, want %s", tc.v, got, tc.hex)
			}
		})
	}
}

func manyKeys(n int) map[string]any {
	m := map[string]any{}
	for i := range n {
		m[string(rune('a'+i))] = i
	}
	return m
}

func TestPackNode(t *testing.T) {
	n := Node{ID: 7, Labels: []string{"L"}, Props: map[string]any{"k": "v"}}
	p4 := packer{}
	if err := p4.pack(n); err != nil {
		t.Fatal(err)
	}
	// B3 4E: id 7, ["L"], {"k": "v"}
	if got, want := hex.EncodeToString(p4.buf), "b34e0791814ca1816b8176"; got != want {
		t.Fatalf("Bolt 4 node = %s, want %s", got, want)
	}
	p5 := packer{v5: true}
	if err := p5.pack(n); err != nil {
		t.Fatal(err)
	}
	// B4 4E ... plus element_id "7" derived from the id when none is given.
	if got, want := hex.EncodeToString(p5.buf), "b44e0791814ca1816b81768137"; got != want {
		t.Fatalf("Bolt 5 node = %s, want %s", got, want)
	}
}

func TestPackRejects(t *testing.T) {
	for _, v := range []any{uint64(math.MaxUint64), struct{}{}, map[int]any{1: 1}, []any{make(chan int)}} {
		p := packer{}
		if err := p.pack(v); err == nil {
			t.Errorf("pack(%T) succeeded, want an error", v)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		in, want any
	}{
		{nil, nil},
		{true, true},
		{int8(-3), int64(-3)},
		{int16(300), int64(300)},
		{int32(-70000), int64(-70000)},
		{int64(math.MaxInt64), int64(math.MaxInt64)},
		{42, int64(42)},
		{-0.25, -0.25},
		{math.Inf(1), math.Inf(1)},
		{"héllo", "héllo"},
		{strings.Repeat("x", 70000), strings.Repeat("x", 70000)},
		{[]byte{}, []byte{}},
		{bytes.Repeat([]byte{9}, 300), bytes.Repeat([]byte{9}, 300)},
		{[]any{}, []any{}},
		{[]any{1, "a", nil, []any{true}}, []any{int64(1), "a", nil, []any{true}}},
		{map[string]any{}, map[string]any{}},
		{map[string]any{"m": map[string]any{"n": 1.5}}, map[string]any{"m": map[string]any{"n": 1.5}}},
		{
			Node{ID: 1, ElementID: "e1", Labels: []string{"A", "B"}, Props: map[string]any{"x": 1}},
			Node{ID: 1, ElementID: "e1", Labels: []string{"A", "B"}, Props: map[string]any{"x": int64(1)}},
		},
		{structure{tag: 0x58, fields: []any{1, 2}}, structure{tag: 0x58, fields: []any{int64(1), int64(2)}}},
	} {
		p := packer{v5: true}
		if err := p.pack(tc.in); err != nil {
			t.Fatalf("pack(%#v): %v", tc.in, err)
		}
		u := unpacker{b: p.buf}
		got, err := u.unpack()
		if err != nil {
			t.Fatalf("unpack(pack(%.40v)): %v", tc.in, err)
		}
		if len(u.b) != 0 {
			t.Fatalf("unpack(pack(%.40v)) left %d bytes", tc.in, len(u.b))
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Fatalf("round trip of %.40v = %#.40v, want %#.40v", tc.in, got, tc.want)
		}
	}
}

func TestUnpackRejects(t *testing.T) {
	for _, tc := range []struct{ name, hex string }{
		{"empty", ""},
		{"truncated int16", "c900"},
		{"truncated float", "c13ff1"},
		{"truncated string", "d00561"},
		{"forged list length", "d6ffffffff"},
		{"forged map length", "daffffffff"},
		{"forged bytes length", "ceffffffff"},
		{"non-string key", "a10101"},
		{"unknown marker", "c4"},
		{"too deep", strings.Repeat("91", maxDepth+1) + "c0"},
		{"node with int labels", "b34e079101a0"},
		{"node with 2 fields", "b24e0790"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := hex.DecodeString(tc.hex)
			if err != nil {
				t.Fatal(err)
			}
			u := unpacker{b: b}
			if v, err := u.unpack(); err == nil {
				t.Fatalf("unpack(%s) = %#v, want an error", tc.hex, v)
			}
		})
	}
}

// FuzzUnpack checks that no input panics or over-allocates, and that whatever decodes
// re-encodes to something that decodes to the same value.
func FuzzUnpack(f *testing.F) {
	for _, s := range []string{"c0", "93010203", "a2816101816202", "b44e0791814ca1816b81768137", "d50100", "b1708100"} {
		b, _ := hex.DecodeString(s)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		u := unpacker{b: b}
		v, err := u.unpack()
		if err != nil {
			return
		}
		p := packer{v5: true}
		if err := p.pack(v); err != nil {
			t.Fatalf("decoded %#v but cannot re-encode: %v", v, err)
		}
		u2 := unpacker{b: p.buf}
		v2, err := u2.unpack()
		if err != nil {
			t.Fatalf("re-encoded %#v does not decode: %v", v, err)
		}
		if !reflect.DeepEqual(canonical(v), canonical(v2)) {
			t.Fatalf("round trip changed %#v into %#v", v, v2)
		}
	})
}

// canonical replaces NaN (never equal to itself) so DeepEqual can compare, and fills a
// Node's empty element_id the way the encoder does.
func canonical(v any) any {
	switch x := v.(type) {
	case float64:
		if math.IsNaN(x) {
			return "NaN"
		}
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = canonical(e)
		}
		return out
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			out[k] = canonical(e)
		}
		return out
	case structure:
		return structure{tag: x.tag, fields: canonical(x.fields).([]any)}
	case Node:
		x.Props = canonical(x.Props).(map[string]any)
		if x.ElementID == "" {
			x.ElementID = strconv.FormatInt(x.ID, 10)
		}
		return x
	}
	return v
}

func TestFraming(t *testing.T) {
	big := bytes.Repeat([]byte{7}, 70000) // needs two chunks
	var out bytes.Buffer
	w := bufio.NewWriter(&out)
	if err := writeMessage(w, big); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	wire := out.Bytes()
	if got := hex.EncodeToString(wire[:2]); got != "ffff" {
		t.Fatalf("first chunk header %s, want ffff", got)
	}
	if got := hex.EncodeToString(wire[len(wire)-2:]); got != "0000" {
		t.Fatalf("end marker %s, want 0000", got)
	}
	// Two NOOP chunks (keep-alives) ahead of the message must be skipped.
	r := bufio.NewReader(bytes.NewReader(append([]byte{0, 0, 0, 0}, wire...)))
	got, err := readMessage(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, big) {
		t.Fatalf("dechunked %d bytes, want %d equal bytes", len(got), len(big))
	}
}

func TestFramingLimit(t *testing.T) {
	var wire []byte
	for range MaxMessageSize/math.MaxUint16 + 1 {
		wire = append(wire, 0xff, 0xff)
		wire = append(wire, make([]byte, math.MaxUint16)...)
	}
	_, err := readMessage(bufio.NewReader(bytes.NewReader(wire)), nil)
	if err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("oversized message: err = %v, want the size limit", err)
	}
}
