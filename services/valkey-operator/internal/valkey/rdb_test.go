package valkey_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
	"github.com/opsuite/suite/services/valkey-operator/internal/valkeytest"
	"github.com/opsuite/suite/shared/testenv"
)

// oneNodeCluster makes s a cluster of one that owns every slot, and writes n keys.
func oneNodeCluster(t *testing.T, s *valkeytest.Server, n int) map[string]string {
	t.Helper()
	ctx := context.Background()
	c, err := valkey.Dial(s.Addr, valkey.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.AddSlotsRange(ctx, valkey.SlotRange{Start: 0, End: valkey.SlotCount - 1}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "cluster state ok", func() (bool, string) {
		kv, err := c.ClusterInfo(ctx)
		return err == nil && kv["cluster_state"] == "ok", fmt.Sprint(kv["cluster_state"], err)
	})
	return writeKeys(t, []string{s.Addr}, n)
}

func writeKeys(t *testing.T, seeds []string, n int) map[string]string {
	t.Helper()
	d, err := valkey.DialCluster(seeds, valkey.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	keys, values := make([]string, n), make([]string, n)
	want := make(map[string]string, n)
	for i := range n {
		keys[i], values[i] = fmt.Sprintf("key:%d", i), fmt.Sprintf("value-%d-%s", i, strings.Repeat("x", i%50))
		want[keys[i]] = values[i]
	}
	if err := d.SetMany(context.Background(), keys, values); err != nil {
		t.Fatal(err)
	}
	return want
}

// loadAndRead starts a server on rdb (as a restored primary would) and checks it serves
// every key of want.
func loadAndRead(t *testing.T, rdb []byte, want map[string]string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "restored.rdb"), rdb, 0o600); err != nil {
		t.Fatal(err)
	}
	r := valkeytest.Start(t, "--dbfilename", "restored.rdb", "--dir", dir)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := valkey.Dial(r.Addr, valkey.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// A node that loads keys of slots nobody owns claims those slots; the test assigns
	// the rest so the one-node cluster serves.
	view, err := c.ClusterNodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var free []int
	for slot, owner := range view.Owners() {
		if owner == "" {
			free = append(free, slot)
		}
	}
	if len(free) > 0 {
		if err := c.AddSlotsRange(ctx, valkey.Ranges(free)...); err != nil {
			t.Fatal(err)
		}
	}
	d, err := valkey.DialCluster([]string{r.Addr}, valkey.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	testenv.Eventually(t, 10*time.Second, "restored node serves its keys", func() (bool, string) {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err := d.Get(cctx, "key:0")
		return err == nil, fmt.Sprint(err)
	})
	for k, v := range want {
		got, err := d.Get(ctx, k)
		if err != nil || got != v {
			t.Fatalf("restored %s = %q, %v; want %q", k, got, err, v)
		}
	}
}

func TestStreamRDBDisklessFromPrimary(t *testing.T) {
	s := valkeytest.Start(t)
	want := oneNodeCluster(t, s, 2000)
	var buf bytes.Buffer
	info, err := valkey.StreamRDB(context.Background(), s.Addr, valkey.Options{}, func(r io.Reader) error {
		_, err := io.Copy(&buf, r)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if !info.Diskless || info.Replica || info.Keys != 2000 || info.Bytes != int64(buf.Len()) || info.Version == "" {
		t.Fatalf("info %+v for %d bytes, want diskless, primary, 2000 keys", info, buf.Len())
	}
	if b := buf.Bytes(); b[len(b)-9] != 0xFF {
		t.Fatalf("the payload does not end with the RDB's EOF opcode and checksum: % x", b[len(b)-9:])
	}
	// Nothing touched the member's disk: diskless sync writes no RDB file.
	if entries, _ := filepath.Glob(filepath.Join(s.Dir, "*.rdb")); len(entries) != 0 {
		t.Fatalf("the member wrote %v", entries)
	}
	loadAndRead(t, buf.Bytes(), want)
}

// A member with repl-diskless-sync no writes the RDB first and sends it with its length:
// the same snapshot arrives.
func TestStreamRDBFromDiskAndFromReplica(t *testing.T) {
	p := valkeytest.Start(t, "--repl-diskless-sync", "no")
	want := oneNodeCluster(t, p, 500)
	var buf bytes.Buffer
	info, err := valkey.StreamRDB(context.Background(), p.Addr, valkey.Options{}, func(r io.Reader) error {
		_, err := io.Copy(&buf, r)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if info.Diskless || info.Keys != 500 || info.Bytes != int64(buf.Len()) {
		t.Fatalf("info %+v, want from disk, 500 keys, %d bytes", info, buf.Len())
	}

	// A replica of it serves the same keys.
	r := valkeytest.Start(t)
	ctx := context.Background()
	rc, err := valkey.Dial(r.Addr, valkey.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if err := rc.Meet(ctx, p.Addr, p.BusPort); err != nil {
		t.Fatal(err)
	}
	pc, _ := valkey.Dial(p.Addr, valkey.Options{})
	defer pc.Close()
	view, err := pc.ClusterNodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	me, _ := view.Myself()
	// Once the replica knows the primary (gossip); again would restart its sync on Redis 7.
	testenv.Eventually(t, 20*time.Second, "replica attached", func() (bool, string) {
		err := rc.Replicate(ctx, me.ID)
		return err == nil, fmt.Sprint(err)
	})
	testenv.Eventually(t, 20*time.Second, "replica in sync", func() (bool, string) {
		st, err := rc.ReplicationState(ctx)
		return err == nil && st.MasterLinkUp && !st.SyncInProgress, fmt.Sprintf("%+v %v", st, err)
	})
	buf.Reset()
	info, err = valkey.StreamRDB(ctx, r.Addr, valkey.Options{}, func(rd io.Reader) error {
		_, err := io.Copy(&buf, rd)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if !info.Replica || info.Keys != 500 {
		t.Fatalf("from the replica: %+v", info)
	}
	loadAndRead(t, buf.Bytes(), want)
}

func TestStreamRDBRefusals(t *testing.T) {
	s := valkeytest.Start(t)
	oneNodeCluster(t, s, 10)
	// A consumer that stops early gets no snapshot.
	_, err := valkey.StreamRDB(context.Background(), s.Addr, valkey.Options{}, func(r io.Reader) error {
		_, err := io.CopyN(io.Discard, r, 5)
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "not read to its end") {
		t.Fatalf("a consumer that stopped early: %v, want an error", err)
	}
	// Wrong credentials.
	_, err = valkey.StreamRDB(context.Background(), s.Addr, valkey.Options{Username: "nobody", Password: "wrong"}, func(io.Reader) error { return nil })
	if err == nil || strings.Contains(err.Error(), "wrong") {
		t.Fatalf("wrong password: %v (must fail without echoing it)", err)
	}
	// A cancelled context stops the transfer.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := valkey.StreamRDB(ctx, s.Addr, valkey.Options{}, func(io.Reader) error { return nil }); err == nil {
		t.Fatal("a cancelled context still streamed")
	}
}

// Over TLS, as a user with a password (the operator's way into a secure cluster).
func TestStreamRDBOverTLSWithACL(t *testing.T) {
	ca := testenv.NewCA(t, "valkey ca")
	files := ca.WriteFiles(t, t.TempDir(), "127.0.0.1")
	tlsPort := testenv.FreePort(t)
	const user, pass = "operator", "s3cret-op"
	s := valkeytest.Start(t, "--tls-port", strconv.Itoa(tlsPort), "--tls-cert-file", files.Cert, "--tls-key-file", files.Key,
		"--tls-ca-cert-file", files.CA, "--tls-auth-clients", "no",
		"--user", user, "on", ">"+pass, "~*", "&*", "+@all")
	want := oneNodeCluster(t, s, 300)
	o := valkey.Options{Username: user, Password: pass, TLS: &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}}
	var buf bytes.Buffer
	info, err := valkey.StreamRDB(context.Background(), fmt.Sprintf("127.0.0.1:%d", tlsPort), o, func(r io.Reader) error {
		_, err := io.Copy(&buf, r)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if info.Keys != 300 || info.Bytes != int64(buf.Len()) {
		t.Fatalf("over TLS: %+v", info)
	}
	loadAndRead(t, buf.Bytes(), want)
	// Plain text on the TLS port is no snapshot.
	o.TLS = nil
	if _, err := valkey.StreamRDB(context.Background(), fmt.Sprintf("127.0.0.1:%d", tlsPort), o, func(io.Reader) error { return nil }); err == nil {
		t.Fatal("plain text on the TLS port streamed")
	}
}
