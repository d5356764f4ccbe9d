package bolt

import (
	"bytes"
	"encoding/hex"
	"testing"
)

// p builds a proposal: 00 <range> <minor> <major>.
func p(major, minor, back byte) uint32 {
	return uint32(back)<<16 | uint32(minor)<<8 | uint32(major)
}

func TestNegotiate(t *testing.T) {
	manifest := uint32(0x000001FF)
	for _, tc := range []struct {
		name      string
		proposals [4]uint32
		want      version
	}{
		{"exact 5.2", [4]uint32{p(5, 2, 0)}, version{5, 2}},
		{"go driver 5.28 (manifest, 5.8 range 8, 4.4 range 2, 3.0)", [4]uint32{manifest, p(5, 8, 8), p(4, 4, 2), p(3, 0, 0)}, version{5, 2}},
		{"range 5.6 back 5 picks the highest inside", [4]uint32{p(5, 6, 5)}, version{5, 2}},
		{"5.0 and 5.1 are not Memgraph's", [4]uint32{p(5, 1, 1)}, version{}},
		{"range above what we speak", [4]uint32{p(5, 8, 2)}, version{}},
		{"range 4.4 back 2", [4]uint32{p(4, 4, 2)}, version{4, 4}},
		{"4.2 range falls to 4.1", [4]uint32{p(4, 2, 1)}, version{4, 1}},
		{"4.2 alone never existed", [4]uint32{p(4, 2, 0)}, version{}},
		{"legacy 4.1", [4]uint32{p(4, 1, 0)}, version{4, 1}},
		{"legacy 4.0", [4]uint32{p(4, 0, 0)}, version{4, 0}},
		{"4.1 range back 1 takes 4.1", [4]uint32{p(4, 1, 1)}, version{4, 1}},
		{"first matching proposal wins", [4]uint32{p(4, 3, 0), p(5, 2, 0)}, version{4, 3}},
		{"skips unknown first", [4]uint32{p(6, 0, 0), p(5, 2, 0)}, version{5, 2}},
		{"bolt 3 only", [4]uint32{p(3, 0, 0)}, version{}},
		{"all zero", [4]uint32{}, version{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := negotiate(tc.proposals); got != tc.want {
				t.Fatalf("negotiate = %v, want %v", got, tc.want)
			}
		})
	}
}

// rw joins a scripted input with a captured output.
type rw struct {
	*bytes.Reader
	out bytes.Buffer
}

func (r *rw) Write(b []byte) (int, error) { return r.out.Write(b) }

func TestHandshakeWire(t *testing.T) {
	in, _ := hex.DecodeString("6060b017" + "00020404" + "00000104" + "00000000" + "00000000")
	c := &rw{Reader: bytes.NewReader(in)}
	v, err := handshake(c)
	if err != nil || v != (version{4, 4}) {
		t.Fatalf("handshake = %v, %v; want 4.4", v, err)
	}
	if got := hex.EncodeToString(c.out.Bytes()); got != "00000404" {
		t.Fatalf("reply %s, want 00000404", got)
	}

	in, _ = hex.DecodeString("6060b017" + "00000003" + "00000000" + "00000000" + "00000000")
	c = &rw{Reader: bytes.NewReader(in)}
	if _, err := handshake(c); err == nil {
		t.Fatal("handshake with no supported version succeeded")
	}
	if got := hex.EncodeToString(c.out.Bytes()); got != "00000000" {
		t.Fatalf("no-match reply %s, want 00000000", got)
	}

	in, _ = hex.DecodeString("474554202f20485454502f312e310d0a486f73743a20780d0a0d0a") // an HTTP request
	c = &rw{Reader: bytes.NewReader(in)}
	if _, err := handshake(c); err == nil || c.out.Len() != 0 {
		t.Fatalf("bad magic: err %v, reply %x; want an error and no reply", err, c.out.Bytes())
	}
}
