package restore_test

import (
	"bytes"
	"context"
	"math/rand/v2"
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
// versitygw, size and SHA-256 check, fsync, rename, AOF base link) against the baseline of
// downloading the same object to a file with minio-go's FGetObject and its defaults, and
// that download fsynced (the load makes its file durable before the server may start).
// RESTORE_BENCH_MB sets the object's size (default 1024 MiB of random bytes, an RDB of a
// 1 GiB dataset of incompressible values: the load never parses it, and what the server
// does with it afterwards is the server's load, not measured here). Ratios are time over
// time, lower is better.
func BenchmarkRestoreLoad(b *testing.B) {
	mb := 1024
	if v, err := strconv.Atoi(os.Getenv("RESTORE_BENCH_MB")); err == nil && v > 0 {
		mb = v
	}
	ctx := context.Background()
	srv := objectstoretest.Start(b)
	store := srv.Store(b, "bench", "")
	// The random payload lives only inside this call, so the loop below runs without it.
	up, err := func() (objectstore.Uploaded, error) {
		data := make([]byte, mb<<20)
		rng := rand.NewChaCha8([32]byte{5})
		_, _ = rng.Read(data)
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
		if err := srv.DownloadFile(ctx, "bench", up.Key, filepath.Join(dir, "copy.rdb")); err != nil {
			b.Fatal(err)
		}
		copyTime += time.Since(t1)
		// The same download made durable, as the load makes it before the server starts.
		t2 := time.Now()
		synced := filepath.Join(dir, "synced.rdb")
		if err := srv.DownloadFile(ctx, "bench", up.Key, synced); err != nil {
			b.Fatal(err)
		}
		if err := fsync(synced); err != nil {
			b.Fatal(err)
		}
		syncTime += time.Since(t2)
		// The next round starts with as little dirty page cache as this one did.
		for _, name := range []string{"copy.rdb", "synced.rdb"} {
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				b.Fatal(err)
			}
		}
	}
	mbytes := float64(up.Size) / 1e6 * float64(b.N)
	b.ReportMetric(mbytes/loadTime.Seconds(), "restore-MB/s")
	b.ReportMetric(mbytes/copyTime.Seconds(), "copy-MB/s")
	b.ReportMetric(mbytes/syncTime.Seconds(), "copy-fsync-MB/s")
	b.ReportMetric(loadTime.Seconds()/copyTime.Seconds(), "restore/copy")
	b.ReportMetric(loadTime.Seconds()/syncTime.Seconds(), "restore/copy-fsync")
}

func fsync(name string) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
