package backup_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
	"github.com/opsuite/suite/services/valkey-operator/internal/valkeytest"
	"github.com/opsuite/suite/shared/objectstore"
	"github.com/opsuite/suite/shared/objectstore/objectstoretest"
	"github.com/opsuite/suite/shared/testenv"
)

// BenchmarkShardBackup measures one shard's backup path (a member's snapshot streamed over
// the replication protocol into versitygw, as the controller does it) against copying the
// same RDB, a file in the page cache, to the same store with minio-go's FPutObject and its
// defaults. BACKUP_BENCH_MB sets the dataset (default 1024 MiB of random, so
// incompressible, 1 KiB values: the RDB is about the dataset's size). Reported: MB/s of
// each and their ratio (backup/copy, time over time, lower is better), and of the snapshot
// alone (read and discarded), which bounds the backup from above.
func BenchmarkShardBackup(b *testing.B) {
	mb := 1024
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
	populate(b, s, mb<<10, 1024)
	srv := objectstoretest.Start(b)
	store := srv.Store(b, "bench", "")

	// The baseline's file: the same snapshot, written once.
	rdbFile := filepath.Join(b.TempDir(), "dump.rdb")
	f, err := os.Create(rdbFile)
	if err != nil {
		b.Fatal(err)
	}
	info, err := valkey.StreamRDB(ctx, s.Addr, valkey.Options{}, func(r io.Reader) error {
		_, err := io.Copy(f, r)
		return err
	})
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("RDB of %d keys: %d bytes", info.Keys, info.Bytes)
	// rdbcompression is the member's own setting (spec.config): with yes, the default, the
	// server tries LZF on every value, which random values never repay; no is the setting
	// for a dataset of values that do not compress. The RDB holds the same bytes either way.
	for _, compression := range []string{"yes", "no"} {
		b.Run("rdbcompression="+compression, func(b *testing.B) {
			admin, err := valkey.DialNodeAdmin(s.Addr, valkey.Options{})
			if err != nil {
				b.Fatal(err)
			}
			err = admin.ConfigSet(ctx, [][2]string{{"rdbcompression", compression}})
			admin.Close()
			if err != nil {
				b.Fatal(err)
			}
			benchShardBackup(b, s.Addr, store, srv, rdbFile, info.Bytes)
		})
	}
}

func benchShardBackup(b *testing.B, addr string, store *objectstore.Store, srv *objectstoretest.Server, rdbFile string, size int64) {
	ctx := context.Background()
	b.SetBytes(size)
	var backupTime, copyTime, snapTime time.Duration
	for b.Loop() {
		t0 := time.Now()
		if _, err := valkey.StreamRDB(ctx, addr, valkey.Options{}, func(r io.Reader) error {
			_, err := store.Put(ctx, "backup.rdb", r, "application/octet-stream")
			return err
		}); err != nil {
			b.Fatal(err)
		}
		backupTime += time.Since(t0)
		t1 := time.Now()
		if err := srv.UploadFile(ctx, "bench", "copy.rdb", rdbFile); err != nil {
			b.Fatal(err)
		}
		copyTime += time.Since(t1)
		t2 := time.Now()
		if _, err := valkey.StreamRDB(ctx, addr, valkey.Options{}, func(r io.Reader) error {
			_, err := io.Copy(io.Discard, r)
			return err
		}); err != nil {
			b.Fatal(err)
		}
		snapTime += time.Since(t2)
	}
	mbytes := float64(size) / 1e6 * float64(b.N)
	b.ReportMetric(mbytes/backupTime.Seconds(), "backup-MB/s")
	b.ReportMetric(mbytes/copyTime.Seconds(), "copy-MB/s")
	b.ReportMetric(mbytes/snapTime.Seconds(), "snapshot-only-MB/s")
	b.ReportMetric(backupTime.Seconds()/copyTime.Seconds(), "backup/copy")
}

// populate writes n keys of size random bytes each into the member, as RESP piped to the
// server's own CLI (valkey-cli --pipe, its mass insertion). The values are random so the
// RDB holds about the dataset's bytes, as it does for real data that is not mostly zeros.
func populate(b *testing.B, s *valkeytest.Server, n, size int) {
	b.Helper()
	cli := func(args ...string) *exec.Cmd {
		return exec.Command(valkeytest.Bins(b).CLI, append([]string{"-h", "127.0.0.1", "-p", strconv.Itoa(s.Port)}, args...)...)
	}
	// The node serves its slots once it has noticed it owns them all.
	testenv.Eventually(b, 20*time.Second, "cluster_state:ok", func() (bool, string) {
		out, err := cli("CLUSTER", "INFO").Output()
		return err == nil && strings.Contains(string(out), "cluster_state:ok"), string(out)
	})
	cmd := cli("--pipe")
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(in, 1<<20)
	rng := rand.NewChaCha8([32]byte{7})
	value := make([]byte, size)
	for i := range n {
		_, _ = rng.Read(value)
		key := "key:" + strconv.Itoa(i)
		_, _ = fmt.Fprintf(w, "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n", len(key), key, size)
		_, _ = w.Write(value)
		_, _ = w.WriteString("\r\n")
	}
	werr := w.Flush()
	_ = in.Close()
	if err := cmd.Wait(); err != nil || werr != nil || !strings.Contains(out.String(), "errors: 0") {
		o := out.String()
		b.Fatalf("valkey-cli --pipe: …%s %v %v", o[max(0, len(o)-500):], err, werr)
	}
}
