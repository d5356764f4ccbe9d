package backup_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
	"github.com/opsuite/suite/services/valkey-operator/internal/valkeytest"
	"github.com/opsuite/suite/shared/objectstore/objectstoretest"
)

// BenchmarkShardBackup measures one shard's backup path (a member's snapshot streamed over
// the replication protocol into versitygw) against the baseline of uploading the same
// RDB bytes, already in memory, with the same client. BACKUP_BENCH_MB sets the dataset
// (default 256 MiB of 1 KiB values). Reported: MB/s of each and their ratio, and of the
// snapshot alone (read and discarded), which bounds the backup from above.
func BenchmarkShardBackup(b *testing.B) {
	mb := 256
	if v, err := strconv.Atoi(os.Getenv("BACKUP_BENCH_MB")); err == nil && v > 0 {
		mb = v
	}
	s := valkeytest.Start(b, "--enable-debug-command", "yes")
	ctx := context.Background()
	c, err := valkey.Dial(s.Addr, valkey.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	if err := c.AddSlotsRange(ctx, valkey.SlotRange{Start: 0, End: valkey.SlotCount - 1}); err != nil {
		b.Fatal(err)
	}
	populate(b, s, mb<<10)
	srv := objectstoretest.Start(b)
	store := srv.Store(b, "bench", "")

	var rdb bytes.Buffer
	if _, err := valkey.StreamRDB(ctx, s.Addr, valkey.Options{}, func(r io.Reader) error {
		_, err := io.Copy(&rdb, r)
		return err
	}); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(rdb.Len()))
	b.ResetTimer()
	var backupTime, copyTime, snapTime time.Duration
	for b.Loop() {
		t2 := time.Now()
		if _, err := valkey.StreamRDB(ctx, s.Addr, valkey.Options{}, func(r io.Reader) error {
			_, err := io.Copy(io.Discard, r)
			return err
		}); err != nil {
			b.Fatal(err)
		}
		snapTime += time.Since(t2)
		t0 := time.Now()
		if _, err := valkey.StreamRDB(ctx, s.Addr, valkey.Options{}, func(r io.Reader) error {
			_, err := store.Put(ctx, "backup.rdb", r, "application/octet-stream")
			return err
		}); err != nil {
			b.Fatal(err)
		}
		backupTime += time.Since(t0)
		t1 := time.Now()
		if _, err := store.Put(ctx, "copy.rdb", bytes.NewReader(rdb.Bytes()), "application/octet-stream"); err != nil {
			b.Fatal(err)
		}
		copyTime += time.Since(t1)
	}
	mbytes := float64(rdb.Len()) / 1e6 * float64(b.N)
	b.ReportMetric(mbytes/backupTime.Seconds(), "backup-MB/s")
	b.ReportMetric(mbytes/copyTime.Seconds(), "copy-MB/s")
	b.ReportMetric(mbytes/snapTime.Seconds(), "snapshot-only-MB/s")
	b.ReportMetric(backupTime.Seconds()/copyTime.Seconds(), "backup/copy")
}

// populate fills the member with n keys of 1 KiB with DEBUG POPULATE (enabled for the
// benchmark), sent by the server's own CLI.
func populate(b *testing.B, s *valkeytest.Server, n int) {
	b.Helper()
	out, err := exec.Command(valkeytest.Bins(b).CLI, "-h", "127.0.0.1", "-p", strconv.Itoa(s.Port),
		"DEBUG", "POPULATE", strconv.Itoa(n), "key", "1024").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "OK") {
		b.Fatalf("DEBUG POPULATE: %s %v", out, err)
	}
}
