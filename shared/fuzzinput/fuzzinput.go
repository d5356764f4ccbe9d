// Package fuzzinput reads a fuzz input as a script of small numbers, for fuzz targets that
// decode their scenario from the bytes Go's fuzzing engine mutates.
package fuzzinput

// Bytes reads a fuzz input a byte at a time; past its end every read is 0, so any input,
// however short, decodes to a whole scenario.
type Bytes struct {
	b []byte
	i int
}

// New reads b.
func New(b []byte) *Bytes { return &Bytes{b: b} }

// Next is the next byte (0 to 255), 0 past the end.
func (s *Bytes) Next() int {
	if s.i >= len(s.b) {
		return 0
	}
	s.i++
	return int(s.b[s.i-1])
}

// More reports whether bytes are left.
func (s *Bytes) More() bool { return s.i < len(s.b) }

// Rest is what is left unread (nil at the end).
func (s *Bytes) Rest() []byte {
	if s.i >= len(s.b) {
		return nil
	}
	return s.b[s.i:]
}
