package memgraph_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/opsuite/suite/services/memgraph-operator/internal/memgraph"
	"github.com/opsuite/suite/services/memgraph-operator/internal/memgraph/memgraphtest"
	"github.com/opsuite/suite/shared/testenv"
)

// mapTo is an Options.Resolve over a fixed map.
func mapTo(m map[string]string) func(string) string {
	return func(addr string) string {
		if to, ok := m[addr]; ok {
			return to
		}
		return addr
	}
}

// TestClientResolve: Options.Resolve decides where a name is dialled and nothing else.
// The session and its errors keep the name; over TLS the certificate must name the host
// of that name (the simulator's certificate names no IP, yet it is dialled on 127.0.0.1),
// and one that does not is a TLS error, not skipped.
func TestClientResolve(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	plain := memgraphtest.NewCluster(t).StartData("d_0")
	ca := testenv.NewCA(t, "memgraph-ca")
	tlsCl := memgraphtest.NewCluster(t)
	tlsCl.ExtraArgs = memgraphtest.BoltTLSArgs(ca.WriteFiles(t, t.TempDir(), "coord.example"))
	coord := tlsCl.StartCoordinator(1)
	gone := closedPort(t)
	resolve := mapTo(map[string]string{
		"data.example:7687":  plain.Bolt,
		"coord.example:7687": coord.Bolt,
		"other.example:7687": coord.Bolt,
		"gone.example:7687":  gone,
	})

	s, err := memgraph.NewDialer(memgraph.Options{Timeout: 3 * time.Second, Resolve: resolve}).Dial(ctx, "data.example:7687")
	if err != nil {
		t.Fatalf("a mapped plain Bolt address: %v", err)
	}
	if s.Addr() != "data.example:7687" {
		t.Errorf("Addr() = %q, want the name dialled", s.Addr())
	}
	if _, err := s.ReplicationRole(ctx); err != nil {
		t.Errorf("SHOW REPLICATION ROLE through the mapping: %v", err)
	}
	_ = s.Close(ctx)
	_, err = memgraph.NewDialer(memgraph.Options{Timeout: 3 * time.Second, Resolve: resolve}).Dial(ctx, "gone.example:7687")
	var me *memgraph.Error
	if !memgraph.IsUnreachable(err) || !errors.As(err, &me) || me.Addr != "gone.example:7687" {
		t.Errorf("a mapping to a closed port: %v, want unreachable naming gone.example:7687", err)
	}

	o := memgraph.Options{Timeout: 3 * time.Second, CA: ca.PEM, Resolve: resolve}
	c, err := memgraph.NewDialer(o).Dial(ctx, "coord.example:7687")
	if err != nil {
		t.Fatalf("bolt+s to a mapped name its certificate holds: %v", err)
	}
	if rows, err := c.ShowInstances(ctx); err != nil || len(rows) != 1 {
		t.Errorf("SHOW INSTANCES over TLS through the mapping: %+v %v", rows, err)
	}
	_ = c.Close(ctx)
	if _, err := memgraph.NewDialer(o).Dial(ctx, "other.example:7687"); !memgraph.IsTLS(err) {
		t.Errorf("bolt+s to a mapped name the certificate does not hold: %v, want a TLS error", err)
	}
	if der, err := memgraph.ServedCertificate(ctx, "coord.example:7687", o); err != nil || len(der) == 0 {
		t.Errorf("ServedCertificate through the mapping: %v", err)
	}
	if _, err := memgraph.ServedCertificate(ctx, "other.example:7687", o); !memgraph.IsTLS(err) {
		t.Errorf("ServedCertificate of a name the certificate does not hold: %v, want a TLS error", err)
	}
}

// closedPort is a loopback address nothing listens on (just released).
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}
