package executor

import (
	"context"
	"crypto/tls"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/opsuite/suite/services/valkey-operator/internal/planner"
	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
	"github.com/opsuite/suite/shared/testenv"
)

// TestRebalancesWithACLAndTLS forms and rescales a cluster whose servers speak TLS only
// (clients, cluster bus, replication) and whose default user is off: the executor logs in
// as its own user and MIGRATE carries that user's AUTH2 to the target.
func TestRebalancesWithACLAndTLS(t *testing.T) {
	// The certificate is for clients too (testenv's always are): redis verifies the peer on
	// every cluster-bus connection whatever tls-auth-clients says.
	ca := testenv.NewCA(t, "test ca")
	files := ca.WriteFiles(t, t.TempDir(), "127.0.0.1")
	const user, pass = "valkey-operator", "s3cret-operator"
	cfg := serverConfig{
		tls: true,
		args: []string{"--tls-cert-file", files.Cert, "--tls-key-file", files.Key, "--tls-ca-cert-file", files.CA,
			"--tls-cluster", "yes", "--tls-replication", "yes", "--tls-auth-clients", "no",
			"--user", "default", "off",
			"--user", user, "on", ">" + pass, "~*", "&*", "+@all",
			"--masteruser", user, "--masterauth", pass},
		dial: valkey.Options{Username: user, Password: pass, TLS: &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}},
	}
	servers := startServersWith(t, 8, cfg)
	var all []planner.Member
	var addrs []string
	for _, s := range servers {
		all = append(all, s.member)
		addrs = append(addrs, s.member.Addr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()

	// Neither the default user nor plain text gets in.
	for name, o := range map[string]valkey.Options{
		"default user over TLS":  {TLS: cfg.dial.TLS, DialTimeout: time.Second},
		"operator in plain text": {Username: user, Password: pass, DialTimeout: time.Second},
	} {
		c, err := valkey.Dial(addrs[0], o)
		if err == nil {
			_, err = c.ClusterInfo(ctx)
			c.Close()
		}
		if err == nil {
			t.Fatalf("%s: CLUSTER INFO answered", name)
		}
		t.Logf("%s refused: %v", name, err)
	}

	e := New(func(addr string) (valkey.Conn, error) { return valkey.Dial(addr, cfg.dial) })
	e.KeyBatch = 50
	defer e.Close()
	small := planner.Desired{Shards: 3, Replicas: 1, Members: all[:6], MoveBatch: 2048}
	convergeReal(ctx, t, e, small, addrs[:6])

	kv, err := valkey.DialCluster(addrs[:6], cfg.dial)
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Close()
	const keys = 1500
	for i := range keys {
		if err := kv.Set(ctx, fmt.Sprintf("k%d", i), strconv.Itoa(i)); err != nil {
			t.Fatalf("SET k%d: %v", i, err)
		}
	}
	big := planner.Desired{Shards: 4, Replicas: 1, Members: all, MoveBatch: 2048}
	convergeReal(ctx, t, e, big, addrs)
	for i := range keys {
		v, err := kv.Get(ctx, fmt.Sprintf("k%d", i))
		if err != nil || v != strconv.Itoa(i) {
			t.Fatalf("after scale-out: GET k%d = %q, %v", i, v, err)
		}
	}
	// Replicas sync over TLS as the operator's user (masteruser); the last attached may
	// still be in its first sync.
	testenv.Eventually(t, 30*time.Second, "every replica's link up", func() (bool, string) {
		snap, failed := e.Observe(ctx, addrs)
		if len(failed) > 0 {
			return false, fmt.Sprint("unreachable: ", failed)
		}
		for _, v := range snap.Views {
			if v.Repl.Replica() && !v.Repl.MasterLinkUp {
				return false, fmt.Sprintf("%s: %+v", v.Addr, v.Repl)
			}
		}
		return true, ""
	})
	snap, failed := e.Observe(ctx, addrs)
	if len(failed) > 0 {
		t.Fatalf("unreachable: %v", failed)
	}
	var primaries, replicas int
	for _, v := range snap.Views {
		if me, _ := v.Myself(); me.Primary && me.SlotTotal() == valkey.SlotCount/4 {
			primaries++
		}
		if v.Repl.Replica() {
			replicas++
		}
		if !v.Info.OK() || v.Info.CurrentEpoch == 0 || v.Info.KnownNodes != 8 {
			t.Errorf("%s: cluster info %+v", v.Addr, v.Info)
		}
	}
	if primaries != 4 || replicas != 4 {
		t.Fatalf("%d primaries serve 4096 slots and %d replicas, want 4 and 4", primaries, replicas)
	}
}
