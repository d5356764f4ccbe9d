package veltrix

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"time"
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
	// Timeout is the request's own limit (Options.Timeout) when it ran out before an
	// answer came (ErrUnreachable: the packets may be dropped on the way), else 0.
	Timeout time.Duration
}

// Cause says in a few stable words why err left the caller without an answer, for a
// condition message: "no answer within 5s" when the request's own limit ran out (a member
// whose packets are dropped), "connection refused", "connection failed", "no usable
// answer", or the kind of any other failure ("unauthorized", "refused"). Never the raw
// error, whose text carries ports and changes from one attempt to the next.
func Cause(err error) string {
	var e *Error
	switch {
	case err == nil:
		return ""
	case !errors.As(err, &e):
		return "connection failed"
	case !errors.Is(e.Kind, ErrUnreachable):
		return e.Kind.Error()
	case e.Timeout > 0:
		return fmt.Sprintf("no answer within %s", e.Timeout)
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case e.Status != 0 || e.Message != "":
		return "no usable answer"
	}
	return "connection failed"
}

// NotListening says whether err is a refused connection: the member's address answered
// that nothing listens on the port (its process is down, or not started yet). That is no
// partition, in which packets are dropped and no answer comes: the member's own probes
// see it down too.
func NotListening(err error) bool {
	return errors.Is(err, ErrUnreachable) && errors.Is(err, syscall.ECONNREFUSED)
}

// timedOut is limit when err is the end of a request's own time (ctx's deadline, or a
// transport timeout), else 0.
func timedOut(ctx context.Context, err error, limit time.Duration) time.Duration {
	var ne net.Error
	if errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return limit
	}
	return 0
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
