package valkey

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
	"testing/iotest"
)

// The end mark is found wherever reads split it, what follows it is dropped, and a
// stream that ends before it is cut short.
func TestMarkReaderSplitsAndEnds(t *testing.T) {
	mark := bytes.Repeat([]byte("m"), eofMarkLen-1)
	mark = append(mark, 'M')
	payload := make([]byte, 3*markReadSize+12345)
	rng := rand.NewChaCha8([32]byte{3})
	_, _ = rng.Read(payload)
	// A payload whose tail looks like the mark's start must still pass whole.
	copy(payload[len(payload)-eofMarkLen+1:], mark[:eofMarkLen-1])
	stream := append(append(append([]byte{}, payload...), mark...), "+replication stream"...)
	for name, r := range map[string]func() io.Reader{
		"whole":    func() io.Reader { return bytes.NewReader(stream) },
		"one byte": func() io.Reader { return iotest.OneByteReader(bytes.NewReader(stream)) },
		"halves":   func() io.Reader { return iotest.HalfReader(bytes.NewReader(stream)) },
	} {
		got, err := io.ReadAll(&markReader{r: r(), mark: mark})
		if err != nil || !bytes.Equal(got, payload) {
			t.Errorf("%s: read %d bytes (err %v), want the %d of the payload", name, len(got), err, len(payload))
		}
	}
	_, err := io.ReadAll(&markReader{r: bytes.NewReader(payload), mark: mark})
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("a stream without its mark: %v, want io.ErrUnexpectedEOF", err)
	}
}
