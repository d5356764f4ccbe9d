package restore_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opsuite/suite/services/valkey-operator/internal/restore"
	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
	"github.com/opsuite/suite/services/valkey-operator/internal/valkeytest"
	"github.com/opsuite/suite/shared/objectstore"
	"github.com/opsuite/suite/shared/objectstore/objectstoretest"
)

// snapshot stores the RDB of a one-node cluster holding n checksummed keys (the backup's
// own way: StreamRDB into Put) and returns the source naming it and the keys.
func snapshot(t *testing.T, store *objectstore.Store, n int) (restore.Source, map[string]string) {
	t.Helper()
	ctx := context.Background()
	s := valkeytest.Start(t)
	conn, err := valkey.Dial(s.Addr, valkey.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.AddSlotsRange(ctx, valkey.SlotRange{Start: 0, End: valkey.SlotCount - 1}); err != nil {
		t.Fatal(err)
	}
	cl, err := valkey.DialCluster([]string{s.Addr}, valkey.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	keys, values := make([]string, n), make([]string, n)
	want := map[string]string{}
	for i := range n {
		keys[i], values[i] = "k"+strconv.Itoa(i), fmt.Sprintf("%x", sha256.Sum256([]byte(strconv.Itoa(i))))
		want[keys[i]] = values[i]
	}
	testenv := func() error { return cl.SetMany(ctx, keys, values) }
	deadline := time.Now().Add(20 * time.Second)
	for err := testenv(); err != nil; err = testenv() {
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	var up objectstore.Uploaded
	if _, err := valkey.StreamRDB(ctx, s.Addr, valkey.Options{}, func(r io.Reader) error {
		var perr error
		up, perr = store.Put(ctx, "b/shard-000.rdb", r, "application/octet-stream")
		return perr
	}); err != nil {
		t.Fatal(err)
	}
	return restore.Source{Bucket: "backups", Object: up.Key, Size: up.Size, SHA256: up.SHA256, Restore: "uid/b"}, want
}

func readAll(t *testing.T, addr string, want map[string]string) {
	t.Helper()
	cl, err := valkey.DialCluster([]string{addr}, valkey.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for k, v := range want {
		if got, err := cl.Get(ctx, k); err != nil || got != v {
			t.Fatalf("%s = %q, %v; want %q", k, got, err, v)
		}
	}
}

// The init container's load, against versitygw and a real server with the operator's
// default appendonly yes (which ignores a plain dump.rdb and would start empty): the RDB
// becomes the base of a new AOF, the server loads every key, claims the slots it holds
// keys of, and a second start of the pod leaves the directory as it is.
func TestLoadIntoAppendOnlyServer(t *testing.T) {
	srv := objectstoretest.Start(t)
	store := srv.Store(t, "backups", "")
	src, want := snapshot(t, store, 2000)
	ctx := context.Background()

	config := filepath.Join(t.TempDir(), "valkey.conf")
	if err := os.WriteFile(config, []byte("port 6379\ndir \"/data\"\nappendonly yes\nappenddirname \"aof\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(dir string) error {
		env := map[string]string{restore.EnvSource: string(src.Encode()), restore.EnvAccessKeyID: srv.AccessKey,
			restore.EnvSecretAccessKey: srv.SecretKey}
		src.Endpoint, src.PathStyle, src.Region = srv.Endpoint, true, objectstoretest.Region
		env[restore.EnvSource] = string(src.Encode())
		var out bytes.Buffer
		err := restore.Run(ctx, []string{"--data-dir=" + dir, "--config=" + config}, func(k string) string { return env[k] }, &out)
		if strings.Contains(out.String(), srv.SecretKey) {
			t.Errorf("the init container printed a key: %s", out.String())
		}
		t.Logf("init container: %s", strings.TrimSpace(out.String()))
		return err
	}
	var dir string
	s := valkeytest.StartPrepared(t, func(d string) error { dir = d; return run(d) }, "--appendonly", "yes", "--appenddirname", "aof",
		"--cluster-require-full-coverage", "no")
	readAll(t, s.Addr, want)
	manifest, err := os.ReadFile(filepath.Join(dir, "aof", "appendonly.aof.manifest"))
	if err != nil || !strings.Contains(string(manifest), "appendonly.aof.1.base.rdb") {
		t.Fatalf("AOF manifest %q, %v", manifest, err)
	}
	conn, err := valkey.Dial(s.Addr, valkey.Options{})
	if err != nil {
		t.Fatal(err)
	}
	v, err := conn.ClusterNodes(ctx)
	conn.Close()
	if me, _ := v.Myself(); err != nil || len(me.Slots) == 0 {
		t.Fatalf("the restored node claims no slot: %+v, %v", me, err)
	}

	// The pod starts again (the server wrote its nodes.conf and AOF): nothing is touched.
	s.Stop()
	before := tree(t, dir)
	if err := run(dir); err != nil {
		t.Fatal(err)
	}
	if after := tree(t, dir); after != before {
		t.Fatalf("a second run changed the data directory:\n%s\nwas\n%s", after, before)
	}
}

func tree(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if fi.Name() == "server.log" {
			return nil
		}
		fmt.Fprintf(&b, "%s %d %s\n", p, fi.Size(), fi.ModTime())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// A corrupted object is refused and leaves no data file; a directory holding data the
// restore did not write is never written over; without a source the container does
// nothing; a source under another restore's marker is refused.
func TestLoadRefuses(t *testing.T) {
	srv := objectstoretest.Start(t)
	store := srv.Store(t, "backups", "")
	ctx := context.Background()
	good := []byte("REDIS0011 not really an RDB, but bytes with a checksum")
	up, err := store.Put(ctx, "b/shard-000.rdb", bytes.NewReader(good), "application/octet-stream")
	if err != nil {
		t.Fatal(err)
	}
	src := restore.Source{Bucket: "backups", Object: up.Key, Size: up.Size, SHA256: up.SHA256, Restore: "uid/b"}
	target := func(dir string) restore.Target {
		return restore.Target{Dir: dir, DBFilename: "dump.rdb", AppendDirName: "appendonlydir", AppendFilename: "appendonly.aof"}
	}

	// Same size, one byte changed.
	bad := bytes.Clone(good)
	bad[3] ^= 1
	if _, err := store.Put(ctx, "c/shard-000.rdb", bytes.NewReader(bad), "application/octet-stream"); err != nil {
		t.Fatal(err)
	}
	corrupt := src
	corrupt.Object = "c/shard-000.rdb"
	dir := t.TempDir()
	_, err = restore.Load(ctx, store, corrupt, target(dir))
	var ce *restore.CorruptError
	if !errors.As(err, &ce) || ce.Why != "sha256" {
		t.Fatalf("corrupted object: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "dump.rdb")); !os.IsNotExist(err) {
		t.Fatalf("a corrupted object left dump.rdb: %v", err)
	}
	// Longer than the manifest says, and missing.
	long := src
	long.Size--
	if _, err := restore.Load(ctx, store, long, target(t.TempDir())); !errors.As(err, &ce) || ce.Why != "size" {
		t.Fatalf("size mismatch: %v", err)
	}
	gone := src
	gone.Object = "nowhere/shard-000.rdb"
	if _, err := restore.Load(ctx, store, gone, target(t.TempDir())); !errors.As(err, &ce) || ce.Why != "missing" {
		t.Fatalf("missing object: %v", err)
	}
	// After the corrupt attempt, the good object loads into the same directory.
	if out, err := restore.Load(ctx, store, src, target(dir)); err != nil || out != restore.Restored {
		t.Fatalf("retry after a failed attempt: %v %v", out, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "dump.rdb")); !bytes.Equal(b, good) {
		t.Fatal("dump.rdb is not the object")
	}
	// Another restore's directory.
	other := src
	other.Restore = "uid/other"
	if _, err := restore.Load(ctx, store, other, target(dir)); !errors.Is(err, restore.ErrNotEmpty) {
		t.Fatalf("another restore's directory: %v", err)
	}

	// Data of an earlier server.
	held := t.TempDir()
	if err := os.WriteFile(filepath.Join(held, "nodes.conf"), []byte("kept"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := restore.Load(ctx, store, src, target(held)); !errors.Is(err, restore.ErrNotEmpty) {
		t.Fatalf("non-empty directory: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(held, "nodes.conf")); string(b) != "kept" {
		t.Fatal("the kept data was changed")
	}
	if _, err := os.Stat(filepath.Join(held, "dump.rdb")); !os.IsNotExist(err) {
		t.Fatal("a restore wrote into a non-empty directory")
	}

	// No source: nothing to do.
	var out bytes.Buffer
	if err := restore.Run(ctx, []string{"--data-dir=" + t.TempDir()}, func(string) string { return "" }, &out); err != nil || !strings.Contains(out.String(), "nothing to restore") {
		t.Fatalf("without a source: %v %q", err, out.String())
	}
}

func TestParseManifest(t *testing.T) {
	shard := func(i int, ranges ...valkey.SlotRange) restore.ManifestShard {
		return restore.ManifestShard{Index: i, Slots: ranges, Object: fmt.Sprintf("shard-%03d.rdb", i), Size: 10, SHA256: strings.Repeat("a", 64)}
	}
	ok := restore.Manifest{Format: 1, ShardCount: 2, Shards: []restore.ManifestShard{
		shard(0, valkey.SlotRange{Start: 0, End: 8000}), shard(1, valkey.SlotRange{Start: 8001, End: 16383})}}
	for _, tt := range []struct {
		name   string
		mutate func(*restore.Manifest)
		want   string
	}{
		{"valid", func(*restore.Manifest) {}, ""},
		{"unknown format", func(m *restore.Manifest) { m.Format = 2 }, "format 2"},
		{"count differs", func(m *restore.Manifest) { m.ShardCount = 3 }, "shardCount 3"},
		{"gap", func(m *restore.Manifest) { m.Shards[1].Slots[0].Start = 8002 }, "slot 8001 is in no shard"},
		{"overlap", func(m *restore.Manifest) { m.Shards[1].Slots[0].Start = 8000 }, "slot 8000 is in shards 0 and 1"},
		{"out of range", func(m *restore.Manifest) { m.Shards[1].Slots[0].End = 16384 }, "out of 0-16383"},
		{"object outside the folder", func(m *restore.Manifest) { m.Shards[0].Object = "../x.rdb" }, "not a plain name"},
		{"no checksum", func(m *restore.Manifest) { m.Shards[0].SHA256 = "" }, "no SHA-256"},
		{"out of order", func(m *restore.Manifest) { m.Shards[0].Index = 1 }, "position 0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			raw, _ := json.Marshal(ok)
			var m restore.Manifest
			_ = json.Unmarshal(raw, &m)
			tt.mutate(&m)
			raw, _ = json.Marshal(m)
			_, err := restore.ParseManifest(raw)
			if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
		})
	}
}
