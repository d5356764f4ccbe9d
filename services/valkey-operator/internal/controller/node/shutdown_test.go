package node

import (
	"context"
	"testing"
)

func TestShutdownValue(t *testing.T) {
	for _, tc := range []struct {
		current, want string
		change        bool
	}{
		{"default", "failover", true},
		{"", "failover", true},
		{"nosave", "nosave failover", true},
		{"save now", "save now failover", true},
		{"failover", "failover", false},
		{"nosave failover", "nosave failover", false},
	} {
		got, change := shutdownValue(tc.current)
		if got != tc.want || change != tc.change {
			t.Errorf("shutdownValue(%q) = %q, %t; want %q, %t", tc.current, got, change, tc.want, tc.change)
		}
	}
}

// TestSettleShutdownOnServersWithout: Redis 7.0 and Valkey 8.0 (valkeytest.Bins) refuse
// shutdown-on-sigterm failover; the controller takes the refusal as the server's answer
// for this incarnation (no retry each pass) and leaves the running value alone. A new
// incarnation asks again.
func TestSettleShutdownOnServersWithout(t *testing.T) {
	s := startServer(t)
	conn, err := s.admin()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	st := &nodeState{}
	settleShutdown(context.Background(), conn, st, "pod-a/0")
	if st.shutdown != "pod-a/0" {
		t.Errorf("after the refusal the state is %q, want settled for pod-a/0", st.shutdown)
	}
	if got := s.configGet(t, shutdownKey); got != "default" {
		t.Errorf("shutdown-on-sigterm is %q, want the server's default left alone", got)
	}
	st.shutdown = "pod-a/0"
	settleShutdown(context.Background(), conn, st, "pod-a/1")
	if st.shutdown != "pod-a/1" {
		t.Errorf("a restarted server was not asked again: state %q", st.shutdown)
	}
}
