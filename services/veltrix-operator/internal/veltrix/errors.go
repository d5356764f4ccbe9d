package veltrix

import (
	"errors"
	"fmt"
)

// The kinds of failure callers act on differently; test them with errors.Is.
var (
	// ErrUnreachable: no answer (connection refused, reset, timeout, unparsable reply); the
	// request may or may not have been applied.
	ErrUnreachable = errors.New("unreachable")
	// ErrUnauthorized: the admin API rejected the token (401/403): a configuration problem,
	// not the server declining the request.
	ErrUnauthorized = errors.New("unauthorized")
	// ErrNotFound: the member or key does not exist (404, or a text-protocol ERR saying so).
	ErrNotFound = errors.New("not found")
	// ErrRefused: the server answered and declined (any other 4xx or 5xx, or a text-protocol
	// ERR); Message keeps its reason.
	ErrRefused = errors.New("refused")
)

// Error is a failed request: which one, where, its kind and what the server said.
type Error struct {
	// Op names the request: "DELETE /admin/cluster/members/x", "GET key".
	Op   string
	Addr string
	// Kind is one of ErrUnreachable, ErrUnauthorized, ErrNotFound, ErrRefused.
	Kind error
	// Status is the HTTP status, 0 for the text protocol and for ErrUnreachable.
	Status int
	// Message is the server's own reason (its error body or the text after ERR), trimmed.
	Message string
	// Err is the transport error behind ErrUnreachable.
	Err error
}

func (e *Error) Error() string {
	s := fmt.Sprintf("veltrix %s on %s: %v", e.Op, e.Addr, e.Kind)
	if e.Status != 0 {
		s += fmt.Sprintf(" (HTTP %d)", e.Status)
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap lets errors.Is match both the kind and the transport error (context.DeadlineExceeded).
func (e *Error) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Err}
}

// ServerMessage returns the server's own reason carried by err, "" when it has none.
func ServerMessage(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return ""
}
