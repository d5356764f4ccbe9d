package memgraph_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/opsuite/suite/services/memgraph-operator/internal/memgraph"
	"github.com/opsuite/suite/shared/testenv"
)

// TestDialBoundedAndCause: a member that takes the connection and never answers (its
// packets dropped) costs one Timeout, not a TCP timeout, and reads "no answer within
// <Timeout>"; a port nobody listens on reads "connection refused" and is NotListening.
// Both are unreachable; neither message carries the address or the raw error.
func TestDialBoundedAndCause(t *testing.T) {
	d := memgraph.NewDialer(memgraph.Options{Timeout: 500 * time.Millisecond})
	for _, c := range []struct {
		name, addr, cause string
	}{
		{"black hole", testenv.BlackHole(t), "no answer within 500ms"},
		{"nobody listening", testenv.FreeAddr(t), "connection refused"},
	} {
		begin := time.Now()
		s, err := d.Dial(context.Background(), c.addr)
		took := time.Since(begin)
		if err == nil {
			_ = s.Close(context.Background())
			t.Fatalf("%s: Dial answered", c.name)
		}
		t.Logf("%s: %v after %s", c.name, err, took.Round(time.Millisecond))
		if !memgraph.IsUnreachable(err) || memgraph.Cause(err) != c.cause {
			t.Errorf("%s: unreachable %v, cause %q; want unreachable, %q", c.name, memgraph.IsUnreachable(err), memgraph.Cause(err), c.cause)
		}
		if memgraph.NotListening(err) != (c.cause == "connection refused") {
			t.Errorf("%s: NotListening %v", c.name, memgraph.NotListening(err))
		}
		if took > 10*time.Second {
			t.Errorf("%s: Dial took %s with a 500ms timeout", c.name, took)
		}
	}
	if got := memgraph.Cause(&memgraph.Error{Kind: memgraph.KindRefused, Message: "No instance with such name!"}); got != "refused" {
		t.Errorf("Cause of a refusal = %q, want the kind", got)
	}
	if got := memgraph.Cause(errors.New("x")); got != "connection failed" {
		t.Errorf("Cause of a foreign error = %q", got)
	}
}
