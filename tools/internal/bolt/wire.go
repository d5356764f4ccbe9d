package bolt

import (
	"bufio"
	"errors"
)

// The wire helpers below are exported for tools/internal/bolt/boltclient, so the test client
// speaks exactly the PackStream and chunking the server does instead of a second copy.

// EncodeMessage packs one Bolt message: a structure of tag and fields. Nodes pack in the
// Bolt 4 layout (clients never send nodes).
func EncodeMessage(tag byte, fields ...any) ([]byte, error) {
	if len(fields) > 15 {
		return nil, errors.New("bolt: a message has at most 15 fields")
	}
	var p packer
	if err := p.pack(structure{tag: tag, fields: fields}); err != nil {
		return nil, err
	}
	return p.buf, nil
}

// DecodeMessage unpacks one Bolt message into its tag and fields. Integers decode as int64,
// lists as []any, maps as map[string]any and nodes as Node.
func DecodeMessage(b []byte) (tag byte, fields []any, err error) {
	m, err := decodeMessage(b)
	return m.tag, m.fields, err
}

// ReadMessage reads one chunked message, skipping NOOP chunks.
func ReadMessage(r *bufio.Reader) ([]byte, error) { return readMessage(r, nil) }

// WriteMessage writes msg chunked, with its end marker; the caller flushes w.
func WriteMessage(w *bufio.Writer, msg []byte) error { return writeMessage(w, msg) }

// Message signatures, for clients.
const (
	MsgHello    = msgHello
	MsgGoodbye  = msgGoodbye
	MsgReset    = msgReset
	MsgRun      = msgRun
	MsgBegin    = msgBegin
	MsgCommit   = msgCommit
	MsgRollback = msgRollback
	MsgPull     = msgPull
	MsgRoute    = msgRoute
	MsgLogon    = msgLogon
	MsgSuccess  = msgSuccess
	MsgRecord   = msgRecord
	MsgIgnored  = msgIgnored
	MsgFailure  = msgFailure
)
