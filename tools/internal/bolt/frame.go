package bolt

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
)

// MaxMessageSize bounds one dechunked client message. The simulators only receive short
// queries; the bound keeps a misbehaving client from exhausting memory.
const MaxMessageSize = 4 << 20

// readMessage reads one chunked message: chunks of <u16 length><bytes> ended by a zero
// length. Zero-length chunks before a message are NOOP keep-alives (Bolt 4.1+) and skipped.
func readMessage(r *bufio.Reader, buf []byte) ([]byte, error) {
	buf = buf[:0]
	var hdr [2]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return nil, err
		}
		n := int(binary.BigEndian.Uint16(hdr[:]))
		if n == 0 {
			if len(buf) == 0 {
				continue // NOOP
			}
			return buf, nil
		}
		if len(buf)+n > MaxMessageSize {
			return nil, fmt.Errorf("bolt: message larger than %d bytes", MaxMessageSize)
		}
		start := len(buf)
		buf = append(buf, make([]byte, n)...)
		if _, err := io.ReadFull(r, buf[start:]); err != nil {
			return nil, err
		}
	}
}

// writeMessage writes msg as chunks of at most 65535 bytes followed by the end marker.
func writeMessage(w *bufio.Writer, msg []byte) error {
	for len(msg) > 0 {
		n := min(len(msg), math.MaxUint16)
		if _, err := w.Write(binary.BigEndian.AppendUint16(nil, uint16(n))); err != nil {
			return err
		}
		if _, err := w.Write(msg[:n]); err != nil {
			return err
		}
		msg = msg[n:]
	}
	_, err := w.Write([]byte{0, 0})
	return err
}
