package restore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/opsuite/suite/services/valkey-operator/internal/restore"
	"github.com/opsuite/suite/shared/objectstore"
	"github.com/opsuite/suite/shared/objectstore/objectstoretest"
)

// BenchmarkRestoreLoad measures the init container's load of one shard (download from
// versitygw, SHA-256 and size check, fsync, rename, AOF base link) against the baseline of
// downloading the same object to a file with the same client and nothing else, and that
// download fsynced (the load makes its file durable before the server may start).
// RESTORE_BENCH_MB sets the object's size (default 256 MB of random bytes: what the
// server does with it afterwards is the server's load, not measured here).
func BenchmarkRestoreLoad(b *testing.B) {
	mb := 256
	if v, err := strconv.Atoi(os.Getenv("RESTORE_BENCH_MB")); err == nil && v > 0 {
		mb = v
	}
	ctx := context.Background()
	srv := objectstoretest.Start(b)
	store := srv.Store(b, "bench", "")
	// The random payload lives only inside this call, so the loop below runs without it.
	up, err := func() (objectstore.Uploaded, error) {
		data := make([]byte, mb<<20)
		if _, err := rand.Read(data); err != nil {
			return objectstore.Uploaded{}, err
		}
		return store.Put(ctx, "shard-000.rdb", bytes.NewReader(data), "application/octet-stream")
	}()
	if err != nil {
		b.Fatal(err)
	}
	src := restore.Source{Bucket: "bench", Object: up.Key, Size: up.Size, SHA256: up.SHA256, Restore: "bench"}
	b.SetBytes(up.Size)
	var loadTime, copyTime, syncTime time.Duration
	for b.Loop() {
		dir := b.TempDir()
		t0 := time.Now()
		if _, err := restore.Load(ctx, store, src, restore.Target{Dir: dir, DBFilename: "dump.rdb", AppendOnly: true,
			AppendDirName: "appendonlydir", AppendFilename: "appendonly.aof"}); err != nil {
			b.Fatal(err)
		}
		loadTime += time.Since(t0)
		t1 := time.Now()
		r, err := store.Get(ctx, "shard-000.rdb")
		if err != nil {
			b.Fatal(err)
		}
		f, err := os.Create(filepath.Join(dir, "copy.rdb"))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.Copy(f, r); err != nil {
			b.Fatal(err)
		}
		_ = r.Close()
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
		copyTime += time.Since(t1)
		// The same download made durable, as the load makes it before the server starts.
		t2 := time.Now()
		r, err = store.Get(ctx, "shard-000.rdb")
		if err != nil {
			b.Fatal(err)
		}
		if f, err = os.Create(filepath.Join(dir, "synced.rdb")); err != nil {
			b.Fatal(err)
		}
		if _, err := io.Copy(f, r); err != nil {
			b.Fatal(err)
		}
		_ = r.Close()
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
		syncTime += time.Since(t2)
	}
	mbytes := float64(up.Size) / 1e6 * float64(b.N)
	b.ReportMetric(mbytes/loadTime.Seconds(), "restore-MB/s")
	b.ReportMetric(mbytes/copyTime.Seconds(), "copy-MB/s")
	b.ReportMetric(mbytes/syncTime.Seconds(), "copy-fsync-MB/s")
	b.ReportMetric(loadTime.Seconds()/copyTime.Seconds(), "restore/copy")
	b.ReportMetric(loadTime.Seconds()/syncTime.Seconds(), "restore/copy-fsync")
}
