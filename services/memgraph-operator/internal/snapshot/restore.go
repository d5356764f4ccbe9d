package snapshot

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"time"

	"github.com/opsuite/suite/shared/objectstore"
)

// RestoredMarker is written into the data directory after a restore: a restarted init
// container finds it and leaves the directory (and what Memgraph wrote since) alone.
const RestoredMarker = ".opsuite-restored.json"

// ErrCorrupted says a stored file does not match its manifest entry.
var ErrCorrupted = errors.New("backup corrupted")

// ErrNotEmpty says the data directory already holds durability files: a restore would
// overwrite a graph, so it refuses.
var ErrNotEmpty = errors.New("data directory not empty")

// Store is what a restore reads: objectstore.Store's downloads.
type Store interface {
	Get(ctx context.Context, name string) (io.ReadCloser, error)
	GetBytes(ctx context.Context, name string, limit int64) ([]byte, error)
}

var _ Store = (*objectstore.Store)(nil)

// ReadManifest reads and checks the manifest of the backup in folder dir.
func ReadManifest(ctx context.Context, s Store, dir string) (Manifest, error) {
	b, err := s.GetBytes(ctx, path.Join(dir, ManifestName), 1<<20)
	if err != nil {
		return Manifest{}, err
	}
	return ParseManifest(b)
}

// Verify reads every file of the backup in dir and checks its size and SHA-256 against the
// manifest, writing nothing: a restore refused here has not touched any volume. A
// mismatch is an error wrapping ErrCorrupted and naming the file.
func Verify(ctx context.Context, s Store, dir string) (Manifest, error) {
	m, err := ReadManifest(ctx, s, dir)
	if err != nil {
		return m, err
	}
	for _, f := range m.Files {
		if err := copyChecked(ctx, s, dir, f, io.Discard); err != nil {
			return m, err
		}
	}
	return m, nil
}

// copyChecked streams one file of the backup into w and checks it: a missing object, or
// one whose size or SHA-256 is not its manifest entry's, is ErrCorrupted; so is a file
// whose content the manifest describes (Format) and that says otherwise of itself (its
// epoch, its commit timestamps, the whole records it holds).
func copyChecked(ctx context.Context, s Store, dir string, f ManifestFile, w io.Writer) error {
	r, err := s.Get(ctx, path.Join(dir, f.Name))
	if objectstore.IsNotFound(err) {
		return fmt.Errorf("%w: %s, which the manifest names, is not in the store", ErrCorrupted, f.Name)
	}
	if err != nil {
		return err
	}
	defer func() { _ = r.Close() }()
	h := sha256.New()
	var n countingWriter
	tee := io.TeeReader(r, io.MultiWriter(w, h, &n))
	info, ierr := Inspect(tee, f.Name, f.Size)
	if _, err := io.Copy(io.Discard, tee); err != nil {
		return fmt.Errorf("reading %s: %w", f.Name, err)
	}
	if int64(n) != f.Size {
		return fmt.Errorf("%w: %s holds %d bytes, the manifest says %d", ErrCorrupted, f.Name, n, f.Size)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != f.SHA256 {
		return fmt.Errorf("%w: %s has SHA-256 %s, the manifest says %s", ErrCorrupted, f.Name, got, f.SHA256)
	}
	if f.Format == "" {
		return nil
	}
	if ierr != nil {
		return fmt.Errorf("%w: %w", ErrCorrupted, ierr)
	}
	if info.Format != f.Format || info.Epoch != f.Epoch || info.Timestamp != f.Timestamp || info.Prev != f.Prev || info.Length != f.Size {
		return fmt.Errorf("%w: %s holds commits %d to %d of epoch %q in %d bytes (%s), its manifest entry says %d to %d of epoch %q in %d bytes (%s)",
			ErrCorrupted, f.Name, info.Prev, info.Timestamp, info.Epoch, info.Length, info.Format, f.Prev, f.Timestamp, f.Epoch, f.Size, f.Format)
	}
	return nil
}

type countingWriter int64

func (c *countingWriter) Write(p []byte) (int, error) {
	*c += countingWriter(len(p))
	return len(p), nil
}

// Outcome says what Restore did.
type Outcome struct {
	// AlreadyRestored: the marker was there, nothing was done.
	AlreadyRestored bool
	Manifest        Manifest
}

// Restore downloads the backup in folder dir into dataDir, for Memgraph to recover from
// on its start. It refuses a data directory holding durability files (ErrNotEmpty)
// unless it restored them itself (the marker), checks every file while downloading into
// a hidden staging folder (ErrCorrupted: nothing is moved into place), then moves the
// files in and writes the marker last.
func Restore(ctx context.Context, s Store, dir, dataDir string) (Outcome, error) {
	if _, err := os.Stat(filepath.Join(dataDir, RestoredMarker)); err == nil {
		return Outcome{AlreadyRestored: true}, nil
	}
	existing, err := ListFiles(dataDir)
	if err != nil {
		return Outcome{}, err
	}
	if len(existing) > 0 {
		return Outcome{}, fmt.Errorf("%w: %s holds %s and %d more durability files; a restore starts only on an empty volume",
			ErrNotEmpty, dataDir, existing[0].Name, len(existing)-1)
	}
	m, err := ReadManifest(ctx, s, dir)
	if err != nil {
		return Outcome{}, err
	}
	stage := filepath.Join(dataDir, ".opsuite-restore")
	if err := os.RemoveAll(stage); err != nil {
		return Outcome{}, err
	}
	defer func() { _ = os.RemoveAll(stage) }()
	for _, f := range m.Files {
		dst := filepath.Join(stage, filepath.FromSlash(f.Name))
		if err := os.MkdirAll(filepath.Dir(dst), 0o750); err != nil {
			return Outcome{}, err
		}
		if err := download(ctx, s, dir, f, dst); err != nil {
			return Outcome{Manifest: m}, err
		}
	}
	for _, f := range m.Files {
		dst := filepath.Join(dataDir, filepath.FromSlash(f.Name))
		if err := os.MkdirAll(filepath.Dir(dst), 0o750); err != nil {
			return Outcome{}, err
		}
		if err := os.Rename(filepath.Join(stage, filepath.FromSlash(f.Name)), dst); err != nil {
			return Outcome{}, err
		}
	}
	marker, err := json.Marshal(map[string]any{"backup": m.Backup, "cluster": m.Cluster, "snapshot": m.Snapshot, "timestamp": m.Timestamp,
		"epoch": m.Epoch, "restoredAt": time.Now().UTC()})
	if err != nil {
		return Outcome{}, err
	}
	if err := os.WriteFile(filepath.Join(dataDir, RestoredMarker), marker, 0o600); err != nil {
		return Outcome{}, err
	}
	return Outcome{Manifest: m}, nil
}

func download(ctx context.Context, s Store, dir string, f ManifestFile, dst string) error {
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if err := copyChecked(ctx, s, dir, f, out); err != nil {
		_ = out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}

// IsCorrupted reports whether err says a stored file did not match its manifest.
func IsCorrupted(err error) bool { return errors.Is(err, ErrCorrupted) }

// IsNotEmpty reports whether err is a refusal of a data directory that holds data.
func IsNotEmpty(err error) bool { return errors.Is(err, ErrNotEmpty) }
