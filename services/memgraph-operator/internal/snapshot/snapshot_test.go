package snapshot_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/opsuite/suite/services/memgraph-operator/internal/snapshot"
	"github.com/opsuite/suite/shared/objectstore/objectstoretest"
)

func writeFile(t *testing.T, p string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestAgentServesDurabilityFilesOnly: the agent lists and serves snapshots/ and wal/
// files to a caller with the token, refuses one without it, and serves nothing else of the
// data directory (the user store, a path out of it, hidden files). It says what a file
// records (Info), and serves the first N bytes of a file being written, never more than
// it holds.
func TestAgentServesDurabilityFilesOnly(t *testing.T) {
	data := t.TempDir()
	writeFile(t, filepath.Join(data, "snapshots", "20261205000000000001_timestamp_7"), []byte("snapshot bytes"))
	writeFile(t, filepath.Join(data, "snapshots", ".tmp"), []byte("half"))
	writeFile(t, filepath.Join(data, "wal", "wal1"), []byte("wal bytes"))
	writeFile(t, filepath.Join(data, "auth", "users"), []byte("secret users"))
	token := filepath.Join(t.TempDir(), "token")
	writeFile(t, token, []byte("s3cret\n"))
	srv := httptest.NewServer((&snapshot.Agent{DataDir: data, TokenFile: token}).Handler())
	defer srv.Close()
	ctx := context.Background()

	c := snapshot.Client{BaseURL: srv.URL, Token: "s3cret"}
	files, err := c.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 || files[0].Name != "snapshots/20261205000000000001_timestamp_7" || files[0].Size != 14 || files[1].Name != "wal/wal1" {
		t.Fatalf("listed %+v", files)
	}
	r, n, err := c.Open(ctx, files[0].Name)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(r)
	_ = r.Close()
	if string(b) != "snapshot bytes" || n != 14 {
		t.Fatalf("served %q (%d)", b, n)
	}
	if _, err := (snapshot.Client{BaseURL: srv.URL, Token: "wrong"}).List(ctx); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("a wrong token listed: %v", err)
	}

	// A WAL file being written: its whole transactions, and exactly that many bytes.
	whole := simWAL(2, 7, 9)
	writeFile(t, filepath.Join(data, "wal", "20261205000000000002_current"), append(bytes.Clone(whole), simWALLine(2, 9, 10)[:20]...))
	info, err := c.Info(ctx, "wal/20261205000000000002_current")
	if err != nil || info.Prev != 7 || info.Timestamp != 9 || info.Length != int64(len(whole)) || info.Epoch != "2" || !info.Current {
		t.Fatalf("Info of the current WAL file: %+v %v", info, err)
	}
	r, n, err = c.OpenLength(ctx, info.Name, info.Length)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(r)
	_ = r.Close()
	if !bytes.Equal(b, whole) || n != int64(len(whole)) {
		t.Fatalf("served %d bytes (%d announced), want the %d whole ones", len(b), n, len(whole))
	}
	if _, _, err := c.OpenLength(ctx, info.Name, 1<<20); !snapshot.IsAgentStatus(err, 409) {
		t.Errorf("a length beyond the file: %v", err)
	}
	if info, err := c.Info(ctx, files[0].Name); err != nil || info.Timestamp != 7 || info.Format != "" {
		t.Errorf("Info of a file of another format: %+v %v", info, err)
	}
	if _, err := c.Info(ctx, "wal/missing"); !snapshot.IsAgentStatus(err, 404) {
		t.Errorf("Info of a missing file: %v", err)
	}
	writeFile(t, filepath.Join(data, "snapshots", "20261205000000000003_timestamp_9"), simSnapshot(2, 9, 10)[:40])
	if _, err := c.Info(ctx, "snapshots/20261205000000000003_timestamp_9"); !snapshot.IsAgentStatus(err, 422) {
		t.Errorf("Info of a cut simulator snapshot: %v", err)
	}
	for _, name := range []string{"auth/users", "snapshots/.tmp", "snapshots/../auth/users"} {
		if _, _, err := c.Open(ctx, name); err == nil {
			t.Errorf("%s was served", name)
		}
	}
	for _, p := range []string{"/v1/files/auth/users", "/v1/files/snapshots/.tmp", "/v1/files/snapshots/%2e%2e%2fauth%2fusers"} {
		resp, err := srv.Client().Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Errorf("GET %s without a token answered 200", p)
		}
	}
}

// upload stores files and a manifest for them under dir, as the backup controller does.
func upload(t *testing.T, s interface {
	PutBytes(context.Context, string, []byte, string) error
}, dir string, files map[string][]byte, snap string) snapshot.Manifest {
	t.Helper()
	m := snapshot.Manifest{Format: snapshot.ManifestFormat, Kind: "MemgraphBackup", Instance: "demo_data_0", Role: "main",
		Snapshot: snap, SnapshotTimestamp: snapshot.SnapshotTimestamp(snap), Timestamp: snapshot.SnapshotTimestamp(snap)}
	for name, b := range files {
		sum := sha256.Sum256(b)
		if err := s.PutBytes(context.Background(), path.Join(dir, name), b, "application/octet-stream"); err != nil {
			t.Fatal(err)
		}
		m.Files = append(m.Files, snapshot.ManifestFile{Name: name, Size: int64(len(b)), SHA256: hex.EncodeToString(sum[:])})
		m.Size += int64(len(b))
	}
	body, _ := json.Marshal(m)
	if err := s.PutBytes(context.Background(), path.Join(dir, snapshot.ManifestName), body, "application/json"); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestRestoreChecksAndRefuses against a real S3 server (versitygw): a backup is
// downloaded into an empty data directory with its marker, a second run changes nothing;
// a data directory holding durability files is refused; a corrupted object fails Verify
// and Restore with ErrCorrupted and leaves the data directory without any file.
func TestRestoreChecksAndRefuses(t *testing.T) {
	srv := objectstoretest.Start(t)
	store := srv.Store(t, "backups", "team")
	ctx := context.Background()
	snap := "snapshots/20261205000000000001_timestamp_7"
	body := bytes.Repeat([]byte("graph "), 100000)
	upload(t, store, "b1", map[string][]byte{snap: body}, snap)

	if m, err := snapshot.Verify(ctx, store, "b1"); err != nil || m.SnapshotTimestamp != 7 {
		t.Fatalf("Verify: %+v %v", m, err)
	}
	data := t.TempDir()
	out, err := snapshot.Restore(ctx, store, "b1", data)
	if err != nil || out.AlreadyRestored {
		t.Fatalf("Restore: %+v %v", out, err)
	}
	if got, _ := os.ReadFile(filepath.Join(data, filepath.FromSlash(snap))); !bytes.Equal(got, body) {
		t.Fatalf("restored %d bytes, want %d", len(got), len(body))
	}
	// Memgraph writes on; a restarted init container leaves it alone.
	writeFile(t, filepath.Join(data, "wal", "new"), []byte("later"))
	if out, err := snapshot.Restore(ctx, store, "b1", data); err != nil || !out.AlreadyRestored {
		t.Fatalf("second Restore: %+v %v", out, err)
	}

	// A volume that holds data and was not restored by us is refused.
	used := t.TempDir()
	writeFile(t, filepath.Join(used, "wal", "old"), []byte("someone's graph"))
	if _, err := snapshot.Restore(ctx, store, "b1", used); !snapshot.IsNotEmpty(err) {
		t.Fatalf("Restore into a used volume: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(used, "wal", "old")); string(b) != "someone's graph" {
		t.Fatal("the used volume was changed")
	}

	// One flipped byte in the stored snapshot.
	bad := append([]byte(nil), body...)
	bad[len(bad)/3] ^= 0xff
	upload(t, store, "b2", map[string][]byte{snap: body}, snap)
	if err := store.PutBytes(ctx, path.Join("b2", snap), bad, "application/octet-stream"); err != nil {
		t.Fatal(err)
	}
	if _, err := snapshot.Verify(ctx, store, "b2"); !snapshot.IsCorrupted(err) || !strings.Contains(err.Error(), snap) {
		t.Fatalf("Verify of a corrupted object: %v", err)
	}
	empty := t.TempDir()
	if _, err := snapshot.Restore(ctx, store, "b2", empty); !snapshot.IsCorrupted(err) {
		t.Fatalf("Restore of a corrupted object: %v", err)
	}
	if files, _ := snapshot.ListFiles(empty); len(files) != 0 {
		t.Fatalf("a failed restore left %v", files)
	}
	if ents, _ := os.ReadDir(empty); len(ents) != 0 {
		t.Fatalf("a failed restore left %v in the data directory", ents)
	}
	// The stored backup is untouched by the failed restore.
	if got, err := store.GetBytes(ctx, path.Join("b2", snap), 1<<30); err != nil || !bytes.Equal(got, bad) {
		t.Fatalf("the stored object changed: %v", err)
	}
}

// uploadDescribed stores files with manifest entries that describe their content, as the
// backup controller writes them for files whose format the agent reads; edit changes the
// manifest before it is stored.
func uploadDescribed(t *testing.T, s interface {
	PutBytes(context.Context, string, []byte, string) error
}, dir string, files []snapshot.ManifestFile, bodies [][]byte, edit func(*snapshot.Manifest)) {
	t.Helper()
	m := snapshot.Manifest{Format: snapshot.ManifestFormat, Kind: "MemgraphBackup", Instance: "demo_data_1", Role: "replica",
		Snapshot: files[0].Name, SnapshotTimestamp: files[0].Timestamp, Epoch: files[0].Epoch, Timestamp: files[len(files)-1].Timestamp}
	for i, f := range files {
		sum := sha256.Sum256(bodies[i])
		f.Size, f.SHA256 = int64(len(bodies[i])), hex.EncodeToString(sum[:])
		if err := s.PutBytes(context.Background(), path.Join(dir, f.Name), bodies[i], "application/octet-stream"); err != nil {
			t.Fatal(err)
		}
		m.Files = append(m.Files, f)
		m.Size += f.Size
	}
	if edit != nil {
		edit(&m)
	}
	body, _ := json.Marshal(m)
	if err := s.PutBytes(context.Background(), path.Join(dir, snapshot.ManifestName), body, "application/json"); err != nil {
		t.Fatal(err)
	}
}

// TestRestoreWithWALChecksContent against versitygw: a backup of a snapshot and the WAL
// after it restores both into snapshots/ and wal/; a stored file whose content says other
// commits or another epoch than its manifest entry (its checksum matching), a file the
// manifest names but the store lacks, and a manifest whose WAL leaves a gap after the
// snapshot are all refused before anything is written.
func TestRestoreWithWALChecksContent(t *testing.T) {
	srv := objectstoretest.Start(t)
	store := srv.Store(t, "backups", "")
	ctx := context.Background()
	snapName, walName := "snapshots/20261205000000000001_timestamp_10", "wal/20261205000000000002_current"
	snapBody, walBody := simSnapshot(4, 10, 1000), simWAL(4, 10, 13)
	files := []snapshot.ManifestFile{
		{Name: snapName, Format: snapshot.FormatSim, Epoch: "4", Timestamp: 10},
		{Name: walName, Format: snapshot.FormatSim, Epoch: "4", Prev: 10, Timestamp: 13},
	}
	uploadDescribed(t, store, "good", files, [][]byte{snapBody, walBody}, nil)
	m, err := snapshot.Verify(ctx, store, "good")
	if err != nil || m.Timestamp != 13 || m.Epoch != "4" {
		t.Fatalf("Verify: %+v %v", m, err)
	}
	data := t.TempDir()
	if _, err := snapshot.Restore(ctx, store, "good", data); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string][]byte{snapName: snapBody, walName: walBody} {
		if got, _ := os.ReadFile(filepath.Join(data, filepath.FromSlash(name))); !bytes.Equal(got, want) {
			t.Errorf("%s restored as %d bytes, want %d", name, len(got), len(want))
		}
	}

	// The WAL file holds commits 11..13; its entry (and the manifest) say 11..14.
	lying := slices.Clone(files)
	lying[1].Timestamp = 14
	uploadDescribed(t, store, "lying", lying, [][]byte{snapBody, walBody}, nil)
	// The snapshot is of epoch 4; the manifest says 5 throughout.
	otherEpoch := slices.Clone(files)
	otherEpoch[0].Epoch, otherEpoch[1].Epoch = "5", "5"
	uploadDescribed(t, store, "epoch", otherEpoch, [][]byte{snapBody, walBody}, nil)
	for _, dir := range []string{"lying", "epoch"} {
		_, err := snapshot.Verify(ctx, store, dir)
		if !snapshot.IsCorrupted(err) || !strings.Contains(err.Error(), "manifest entry says") {
			t.Errorf("Verify of %s: %v", dir, err)
		}
		empty := t.TempDir()
		if _, err := snapshot.Restore(ctx, store, dir, empty); !snapshot.IsCorrupted(err) {
			t.Errorf("Restore of %s: %v", dir, err)
		}
		if left, _ := snapshot.ListFiles(empty); len(left) != 0 {
			t.Errorf("Restore of %s left %v", dir, left)
		}
	}

	// A file the manifest names is not in the store.
	uploadDescribed(t, store, "missing", files, [][]byte{snapBody, walBody}, nil)
	if err := store.Delete(ctx, path.Join("missing", walName)); err != nil {
		t.Fatal(err)
	}
	if _, err := snapshot.Verify(ctx, store, "missing"); !snapshot.IsCorrupted(err) || !strings.Contains(err.Error(), "not in the store") {
		t.Errorf("Verify with a missing object: %v", err)
	}

	// WAL that starts after commit 11: commit 11 is nowhere.
	gap := []snapshot.ManifestFile{files[0], {Name: walName, Format: snapshot.FormatSim, Epoch: "4", Prev: 11, Timestamp: 13}}
	uploadDescribed(t, store, "gap", gap, [][]byte{snapBody, simWAL(4, 11, 13)}, nil)
	if _, err := snapshot.Verify(ctx, store, "gap"); !snapshot.IsManifestInvalid(err) || !strings.Contains(err.Error(), "missing") {
		t.Errorf("Verify with a gap after the snapshot: %v", err)
	}
	if _, err := snapshot.Restore(ctx, store, "gap", t.TempDir()); !snapshot.IsManifestInvalid(err) {
		t.Errorf("Restore with a gap after the snapshot: %v", err)
	}
}
