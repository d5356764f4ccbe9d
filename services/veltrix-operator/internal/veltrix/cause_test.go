package veltrix

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/opsuite/suite/shared/testenv"
)

// TestCauseOfUnanswered: a member that takes the connection and never answers (its packets
// dropped) costs one Timeout and reads "no answer within <Timeout>", over HTTP and over the
// text protocol; a port nobody listens on reads "connection refused". Neither carries the
// address or the raw error, so a condition naming them stays the same pass after pass.
func TestCauseOfUnanswered(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var held []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
		for _, c := range held {
			_ = c.Close()
		}
	})
	hole, dead := ln.Addr().String(), testenv.FreeAddr(t)
	c := New(Options{Timeout: 300 * time.Millisecond})
	for _, tc := range []struct {
		name  string
		call  func() error
		cause string
	}{
		{"members from a black hole", func() error { _, err := c.Members(context.Background(), hole); return err }, "no answer within 300ms"},
		{"INFO from a black hole", func() error { _, err := c.Info(context.Background(), hole); return err }, "no answer within 300ms"},
		{"members from nobody", func() error { _, err := c.Members(context.Background(), dead); return err }, "connection refused"},
		{"INFO from nobody", func() error { _, err := c.Info(context.Background(), dead); return err }, "connection refused"},
	} {
		begin := time.Now()
		err := tc.call()
		took := time.Since(begin)
		t.Logf("%s: %v after %s", tc.name, err, took.Round(time.Millisecond))
		if !errors.Is(err, ErrUnreachable) || Cause(err) != tc.cause {
			t.Errorf("%s: %v, cause %q; want unreachable, %q", tc.name, err, Cause(err), tc.cause)
		}
		if NotListening(err) != (tc.cause == "connection refused") {
			t.Errorf("%s: NotListening %v", tc.name, NotListening(err))
		}
		if took > 10*time.Second {
			t.Errorf("%s took %s with a 300ms timeout", tc.name, took)
		}
	}
	if got := Cause(&Error{Kind: ErrUnauthorized, Status: 401}); got != "unauthorized" {
		t.Errorf("Cause of a 401 = %q", got)
	}
}
