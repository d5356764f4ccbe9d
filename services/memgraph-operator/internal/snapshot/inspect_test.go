package snapshot_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/opsuite/suite/services/memgraph-operator/internal/snapshot"
)

// simSnapshot is a snapshot file in memgraph-sim's format (tools/internal/memgraphsim):
// magic line, JSON line, checksum line; filler makes the JSON line long.
func simSnapshot(epoch, committed uint64, filler int) []byte {
	body := fmt.Sprintf(`{"epoch":%d,"committed":%d,"created_at":"2026-12-05T08:00:00Z","graph":{"nodes":[{"id":0,"labels":["P"],"props":{"s":%q}}],"next_id":1,"committed":%d}}`,
		epoch, committed, strings.Repeat("x", filler), committed)
	sum := sha256.Sum256([]byte(body))
	return []byte("MEMGRAPH-SIM-SNAPSHOT 1\n" + body + "\nsha256 " + hex.EncodeToString(sum[:]) + "\n")
}

// simWAL is a WAL file in memgraph-sim's format: magic line, one "<sha256> <JSON>" line
// per transaction, the transactions prev+1..to of epoch.
func simWAL(epoch, prev, to uint64) []byte {
	var b bytes.Buffer
	b.WriteString("MEMGRAPH-SIM-WAL 1\n")
	for c := prev + 1; c <= to; c++ {
		b.Write(simWALLine(epoch, c-1, c))
	}
	return b.Bytes()
}

func simWALLine(epoch, prev, committed uint64) []byte {
	body := fmt.Sprintf(`{"epoch":%d,"prev":%d,"committed":%d,"nodes":[{"id":%d,"labels":["P"]}]}`, epoch, prev, committed, committed)
	sum := sha256.Sum256([]byte(body))
	return []byte(hex.EncodeToString(sum[:]) + " " + body + "\n")
}

func inspect(t *testing.T, name string, b []byte) (snapshot.Info, error) {
	t.Helper()
	return snapshot.Inspect(bytes.NewReader(b), name, int64(len(b)))
}

// TestInspect: what a durability file says of itself. The simulator's snapshot: its epoch
// and commit timestamp, from a JSON line longer than any buffer, its checksum checked (a
// flipped byte or a cut refused); its WAL: the commits (prev, last] it holds whole, a torn
// or corrupted last line not counted in the length a backup stores; a line that breaks
// the run ends it. Memgraph's binary files are described by their names only.
func TestInspect(t *testing.T) {
	snap := simSnapshot(3, 42, 300000)
	info, err := inspect(t, "snapshots/20261205080000000001_timestamp_42", snap)
	if err != nil || info.Format != snapshot.FormatSim || info.Epoch != "3" || info.Timestamp != 42 || info.Length != int64(len(snap)) || !info.Known {
		t.Fatalf("snapshot: %+v %v", info, err)
	}
	bad := bytes.Clone(snap)
	bad[len(bad)/2] ^= 1
	if _, err := inspect(t, "snapshots/x_timestamp_42", bad); err == nil || !strings.Contains(err.Error(), "checksum") {
		t.Errorf("a corrupted snapshot: %v", err)
	}
	if _, err := inspect(t, "snapshots/x_timestamp_42", snap[:len(snap)-20]); err == nil {
		t.Error("a snapshot cut short was read")
	}

	wal := simWAL(3, 42, 45)
	info, err = inspect(t, "wal/20261205080000000002_current", wal)
	if err != nil || info.Format != snapshot.FormatSim || info.Prev != 42 || info.Timestamp != 45 || info.Epoch != "3" ||
		info.Length != int64(len(wal)) || !info.Current || !info.IsWAL() {
		t.Fatalf("WAL: %+v %v", info, err)
	}
	// Being written: the last line is not whole yet.
	torn := append(bytes.Clone(wal), simWALLine(3, 45, 46)[:30]...)
	if info, err := inspect(t, "wal/x_current", torn); err != nil || info.Timestamp != 45 || info.Length != int64(len(wal)) {
		t.Fatalf("a WAL file being written: %+v %v", info, err)
	}
	// A corrupted line ends the file; so does one that does not follow on the last.
	corrupt := append(bytes.Clone(wal), simWALLine(3, 45, 46)...)
	corrupt[len(corrupt)-10] ^= 1
	if info, _ := inspect(t, "wal/x_current", corrupt); info.Timestamp != 45 || info.Length != int64(len(wal)) {
		t.Errorf("a corrupted last line: %+v", info)
	}
	if info, _ := inspect(t, "wal/x_current", append(bytes.Clone(wal), simWALLine(3, 50, 51)...)); info.Timestamp != 45 {
		t.Errorf("a line after a gap: %+v", info)
	}
	if info, _ := inspect(t, "wal/x_current", []byte("MEMGRAPH-SIM-WAL 1\n")); info.Known || info.Format != snapshot.FormatSim {
		t.Errorf("an empty WAL file: %+v", info)
	}

	// Memgraph's own files: the names say what they hold, nothing is read.
	mg := []byte("MGsn\x25\x00\x00\x00\x00\x00\x00\x00")
	if info, err := inspect(t, "snapshots/20261205080000000001_timestamp_77", mg); err != nil || info.Format != "" || info.Timestamp != 77 || info.Epoch != "" {
		t.Errorf("a Memgraph snapshot: %+v %v", info, err)
	}
	if info, _ := inspect(t, "wal/20261205080000000001_from_78_to_90", []byte("MGwl")); info.Prev != 77 || info.Timestamp != 90 || !info.Known || info.Length != 4 {
		t.Errorf("a finalized Memgraph WAL file: %+v", info)
	}
	if info, _ := inspect(t, "wal/20261205080000000002_current", []byte("MGwl")); info.Known || !info.Current {
		t.Errorf("Memgraph's current WAL file: %+v", info)
	}
	if _, err := inspect(t, "auth/users", []byte("x")); err == nil {
		t.Error("a file outside snapshots/ and wal/ was described")
	}
}

// TestManifestCheck: a manifest's files, timestamps and epoch must agree; format 1
// (a snapshot only) is still read.
func TestManifestCheck(t *testing.T) {
	sha := strings.Repeat("a", 64)
	snap := snapshot.ManifestFile{Name: "snapshots/s_timestamp_10", Size: 100, SHA256: sha, Format: snapshot.FormatSim, Epoch: "2", Timestamp: 10}
	wal := func(name string, prev, to uint64) snapshot.ManifestFile {
		return snapshot.ManifestFile{Name: "wal/" + name, Size: 10, SHA256: sha, Format: snapshot.FormatSim, Epoch: "2", Prev: prev, Timestamp: to}
	}
	good := func() snapshot.Manifest {
		return snapshot.Manifest{Format: snapshot.ManifestFormat, Snapshot: snap.Name, SnapshotTimestamp: 10, Epoch: "2", Timestamp: 15, Size: 120,
			Files: []snapshot.ManifestFile{snap, wal("a_from_9_to_12", 8, 12), wal("b_current", 12, 15)}}
	}
	for name, tc := range map[string]struct {
		edit func(*snapshot.Manifest)
		want string
	}{
		"whole":         {edit: func(*snapshot.Manifest) {}},
		"snapshot only": {edit: func(m *snapshot.Manifest) { m.Files, m.Size, m.Timestamp = m.Files[:1], 100, 10 }},
		"format 1": {edit: func(m *snapshot.Manifest) {
			m.Format, m.Files, m.Timestamp, m.Epoch = 1, []snapshot.ManifestFile{{Name: snap.Name, Size: 1, SHA256: sha}}, 0, ""
		}},
		"names only":        {edit: func(m *snapshot.Manifest) { m.Files[1].Format, m.Files[2].Format, m.Timestamp = "", "", 10 }},
		"unknown format":    {edit: func(m *snapshot.Manifest) { m.Format = 3 }, want: "format 3"},
		"size":              {edit: func(m *snapshot.Manifest) { m.Size = 121 }, want: "add up"},
		"twice":             {edit: func(m *snapshot.Manifest) { m.Files[2].Name = m.Files[1].Name }, want: "twice"},
		"two snapshots":     {edit: func(m *snapshot.Manifest) { m.Files[1].Name = "snapshots/other" }, want: "two snapshots"},
		"not durability":    {edit: func(m *snapshot.Manifest) { m.Files[1].Name = "auth/users" }, want: "not a file"},
		"snapshot missing":  {edit: func(m *snapshot.Manifest) { m.Snapshot = "snapshots/gone" }, want: "not among"},
		"epoch disagrees":   {edit: func(m *snapshot.Manifest) { m.Epoch = "3" }, want: "epoch"},
		"snapshot ts":       {edit: func(m *snapshot.Manifest) { m.SnapshotTimestamp = 9 }, want: "timestamp"},
		"gap after snap":    {edit: func(m *snapshot.Manifest) { m.Files[1].Prev = 11 }, want: "missing"},
		"gap between":       {edit: func(m *snapshot.Manifest) { m.Files[2].Prev = 13 }, want: "follows commit 13"},
		"nothing new":       {edit: func(m *snapshot.Manifest) { m.Files[1].Timestamp = 10 }, want: "hold already"},
		"point":             {edit: func(m *snapshot.Manifest) { m.Timestamp = 14 }, want: "timestamp 14"},
		"format 1 with WAL": {edit: func(m *snapshot.Manifest) { m.Format = 1 }, want: "format 1"},
		"no checksum":       {edit: func(m *snapshot.Manifest) { m.Files[2].SHA256 = "" }, want: "SHA-256"},
	} {
		m := good()
		tc.edit(&m)
		err := m.Check()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", name, err)
		case tc.want != "" && (!snapshot.IsManifestInvalid(err) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want an invalid manifest saying %q", name, err, tc.want)
		}
	}
	if _, err := snapshot.ParseManifest([]byte("{")); !snapshot.IsManifestInvalid(err) {
		t.Errorf("a manifest that is not JSON: %v", err)
	}
}
