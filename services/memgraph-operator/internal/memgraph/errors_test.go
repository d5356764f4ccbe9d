package memgraph

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/neo4j/neo4j-go-driver/v5/neo4j"
)

func TestClassifyRefusal(t *testing.T) {
	cases := map[string]Refusal{
		"Couldn't set instance to main since there is already a main instance in cluster!": RefusalMainExists,
		"No instance with such name!": RefusalNoSuchInstance,
		"Alive main instance can't be unregistered! Shut it down to trigger failover and then unregister it!": RefusalAliveMain,
		"Request for removing coordinator 2 failed because the current leader cannot be removed!":             RefusalLeaderRemoval,
		"Instance d_1 is already a replica!":                                                                                                    RefusalAlreadyReplica,
		"Couldn't register replica instance since instance with such name already exists!":                                                      RefusalInstanceExists,
		"Couldn't add coordinator since instance with such id already exists!":                                                                  RefusalCoordinatorExists,
		"Writing to Raft log failed. Please retry the operation.":                                                                               RefusalRaftWrite,
		"Request forwarded to the leader but leader failed with request processing!":                                                            RefusalNotLeader,
		"Couldn't register instance since coordinator is not a leader! Current leader is coordinator with id 2 with bolt socket address c:7687": RefusalNotLeader,
		"Write queries are forbidden on the replica instance.":                                                                                  RefusalReplicaWrite,
		"Coordinator can run only coordinator queries!":                                                                                         RefusalCoordinatorOnly,
		"Only coordinator can register coordinator server!":                                                                                     RefusalNotCoordinator,
		"Managing coordinators is not allowed in multicommand transactions":                                                                     RefusalInTransaction,
		"Couldn't run ADD COORDINATOR since coordinator 2 is not a leader and knows no leader to forward it to!":                                RefusalNoLeader,
		"Coordinator 1 lost leadership; retry the operation.":                                                                                   RefusalNotLeader,
		"something new": RefusalOther,
	}
	for msg, want := range cases {
		if got := ClassifyRefusal(msg); got != want {
			t.Errorf("ClassifyRefusal(%q) = %v, want %v", msg, got, want)
		}
	}
}

func TestClassifyDriverErrors(t *testing.T) {
	const addr = "c-0:7687"
	refused := &neo4j.Neo4jError{Code: "Memgraph.ClientError.MemgraphError.MemgraphError",
		Msg: "Couldn't set instance to main since there is already a main instance in cluster!"}
	cases := []struct {
		name string
		err  error
		kind Kind
	}{
		{"failure", refused, KindRefused},
		{"wrapped failure", fmt.Errorf("run: %w", refused), KindRefused},
		{"auth", &neo4j.Neo4jError{Code: "Memgraph.ClientError.Security.Unauthenticated", Msg: "Authentication failure"}, KindUnauthenticated},
		{"connectivity", &neo4j.ConnectivityError{Inner: &net.OpError{Op: "dial", Err: errors.New("connection refused")}}, KindUnreachable},
		{"eof", io.EOF, KindUnreachable},
		{"deadline", context.DeadlineExceeded, KindUnreachable},
		{"usage", &neo4j.UsageError{Message: "bad"}, KindProtocol},
	}
	for _, c := range cases {
		err := classify(addr, SetInstanceToMain("d_1"), c.err)
		var e *Error
		if !errors.As(err, &e) || e.Kind != c.kind {
			t.Errorf("%s: classify = %v, want kind %v", c.name, err, c.kind)
			continue
		}
		if e.Addr != addr {
			t.Errorf("%s: Addr = %q", c.name, e.Addr)
		}
	}

	err := classify(addr, SetInstanceToMain("d_1"), refused)
	if !IsRefused(err) || IsUnreachable(err) || RefusalOf(err) != RefusalMainExists {
		t.Fatalf("refusal not recognised: %v", err)
	}
	var e *Error
	errors.As(err, &e)
	if e.Code != refused.Code || e.Message != refused.Msg {
		t.Errorf("server code/message not kept: %q %q", e.Code, e.Message)
	}
	if !strings.Contains(err.Error(), refused.Msg) || !strings.Contains(err.Error(), "SET INSTANCE d_1 TO MAIN") {
		t.Errorf("Error() = %q", err)
	}
	// Inlined values stay out of the error text.
	reg := classify(addr, RegisterInstance("d_1", "", "secret-host:1", "m:2", "r:3"), io.EOF)
	if strings.Contains(reg.Error(), "secret-host") {
		t.Errorf("Error() carries the config: %q", reg)
	}
	if RefusalOf(io.EOF) != RefusalNone || IsRefused(nil) {
		t.Error("a non-*Error classified as a refusal")
	}
}
