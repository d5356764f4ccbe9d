package memgraph_test

import (
	"context"
	"testing"
	"time"

	"github.com/opsuite/suite/services/memgraph-operator/internal/memgraph"
	"github.com/opsuite/suite/services/memgraph-operator/internal/memgraph/memgraphtest"
	"github.com/opsuite/suite/shared/testenv"
)

// TestClientTLS drives the real driver over bolt+s against simulator processes started
// with --bolt-cert-file/--bolt-key-file: the CA verifies them; another CA, a CA that is no
// certificate, and a server without TLS are KindTLS; plain Bolt to a TLS server fails.
// Then the certificate is renewed under a new CA and reloaded (RELOAD BOLT_SERVER TLS):
// a dialer with the old CA is refused, one built with the new CA connects, as the
// operator's next pass does after reading the Secret again.
func TestClientTLS(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ca := testenv.NewCA(t, "memgraph-ca")
	dir := t.TempDir()
	cl := memgraphtest.NewCluster(t)
	cl.ExtraArgs = memgraphtest.BoltTLSArgs(ca.WriteFiles(t, dir, "127.0.0.1"))
	coord := cl.StartCoordinator(1)
	data := cl.StartData("d_0")
	o := memgraph.Options{Timeout: 3 * time.Second, CA: ca.PEM}

	c, err := memgraph.NewDialer(o).Dial(ctx, coord.Bolt)
	if err != nil {
		t.Fatalf("bolt+s to the coordinator: %v", err)
	}
	defer func() { _ = c.Close(ctx) }()
	if rows, err := c.ShowInstances(ctx); err != nil || len(rows) != 1 {
		t.Fatalf("SHOW INSTANCES over TLS: %+v %v", rows, err)
	}
	d, err := memgraph.NewDialer(o).Dial(ctx, data.Bolt)
	if err != nil {
		t.Fatalf("bolt+s to the data instance: %v", err)
	}
	defer func() { _ = d.Close(ctx) }()
	if _, err := d.ReplicationRole(ctx); err != nil {
		t.Fatalf("SHOW REPLICATION ROLE over TLS: %v", err)
	}

	if _, err := memgraph.NewDialer(memgraph.Options{Timeout: 3 * time.Second}).Dial(ctx, coord.Bolt); err == nil {
		t.Error("plain Bolt to a TLS coordinator connected")
	}
	other := testenv.NewCA(t, "other-ca")
	for name, caPEM := range map[string][]byte{"another CA": other.PEM, "a CA that is no PEM": []byte("nope")} {
		_, err := memgraph.NewDialer(memgraph.Options{Timeout: 3 * time.Second, CA: caPEM}).Dial(ctx, coord.Bolt)
		if !memgraph.IsTLS(err) {
			t.Errorf("%s: %v, want a TLS error", name, err)
		}
	}
	plain := memgraphtest.NewCluster(t).StartData("plain")
	if _, err := memgraph.NewDialer(o).Dial(ctx, plain.Bolt); !memgraph.IsTLS(err) {
		t.Errorf("bolt+s to a server without TLS: %v, want a TLS error", err)
	}
	cl.Stop(data)
	if _, err := memgraph.NewDialer(o).Dial(ctx, data.Bolt); !memgraph.IsUnreachable(err) {
		t.Errorf("bolt+s to a stopped instance: %v, want unreachable (not TLS)", err)
	}

	// The served certificate, as the operator compares it with the Secret's.
	served, err := memgraph.ServedCertificate(ctx, coord.Bolt, o)
	if err != nil || len(served) == 0 {
		t.Fatalf("ServedCertificate: %v", err)
	}
	if _, err := memgraph.ServedCertificate(ctx, coord.Bolt, memgraph.Options{Timeout: 3 * time.Second, CA: other.PEM}); !memgraph.IsTLS(err) {
		t.Errorf("ServedCertificate trusting another CA: %v, want a TLS error", err)
	}

	// Rotation to a new CA: files renewed in place, the coordinator reloads them.
	next := testenv.NewCA(t, "memgraph-ca-2")
	next.WriteFiles(t, dir, "127.0.0.1")
	if err := c.Exec(ctx, memgraph.ReloadBoltTLSQuery); err != nil {
		t.Fatalf("RELOAD BOLT_SERVER TLS: %v", err)
	}
	if _, err := memgraph.NewDialer(o).Dial(ctx, coord.Bolt); !memgraph.IsTLS(err) {
		t.Errorf("the old CA after rotation: %v, want a TLS error", err)
	}
	s, err := memgraph.NewDialer(memgraph.Options{Timeout: 3 * time.Second, CA: next.PEM}).Dial(ctx, coord.Bolt)
	if err != nil {
		t.Fatalf("the new CA after rotation: %v", err)
	}
	_ = s.Close(ctx)
}
