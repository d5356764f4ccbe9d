package bolt

import (
	"encoding/binary"
	"fmt"
	"io"
)

// magic opens every Bolt connection ("GoGoBolt").
const magic = 0x6060B017

// version is a Bolt protocol version.
type version struct{ major, minor byte }

func (v version) String() string { return fmt.Sprintf("%d.%d", v.major, v.minor) }

// atLeast reports whether v >= major.minor.
func (v version) atLeast(major, minor byte) bool {
	return v.major > major || (v.major == major && v.minor >= minor)
}

// supported lists the versions Memgraph speaks from 4.0 up (4.2, 5.0 and 5.1 never
// existed in Memgraph; its 1.0 is not served here), highest first so the best match
// within a range proposal is found first.
var supported = []version{{5, 2}, {4, 4}, {4, 3}, {4, 1}, {4, 0}}

// negotiate picks the version for four client proposals. Each proposal is
// 00 <range> <minor> <major>: the client accepts major.(minor-range) .. major.minor
// (ranges exist since 4.3; older clients send range 0). As the Bolt spec requires, the
// first proposal that matches wins (clients list their preferred versions first), and
// within it the highest supported minor. The zero version means no match.
func negotiate(proposals [4]uint32) version {
	for _, p := range proposals {
		major, minor, back := byte(p), byte(p>>8), byte(p>>16)
		for _, v := range supported {
			if v.major == major && v.minor <= minor && int(v.minor) >= int(minor)-int(back) {
				return v
			}
		}
	}
	return version{}
}

// handshake reads the magic and the proposals and answers with the chosen version.
func handshake(rw io.ReadWriter) (version, error) {
	var b [20]byte
	if _, err := io.ReadFull(rw, b[:]); err != nil {
		return version{}, err
	}
	if got := binary.BigEndian.Uint32(b[:4]); got != magic {
		return version{}, fmt.Errorf("bolt: bad magic 0x%08X", got)
	}
	var proposals [4]uint32
	for i := range proposals {
		proposals[i] = binary.BigEndian.Uint32(b[4+4*i:])
	}
	v := negotiate(proposals)
	if _, err := rw.Write([]byte{0, 0, v.minor, v.major}); err != nil {
		return version{}, err
	}
	if v == (version{}) {
		return v, fmt.Errorf("bolt: no supported version among proposals %08X", proposals)
	}
	return v, nil
}
