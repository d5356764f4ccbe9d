package memgraphsim

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opsuite/suite/shared/testenv"
)

// TestSnapshotWrittenAndLoaded: CREATE SNAPSHOT on the MAIN writes a file of the
// simulator's format under snapshots/ (named as Memgraph names its own), SHOW SNAPSHOTS
// lists it, and an instance started on a data directory holding only that file (as a
// restore leaves it) recovers every node and edge from it; a corrupted newer file is
// skipped for the older good one. Edges replicate to the replica with their nodes.
func TestSnapshotWrittenAndLoaded(t *testing.T) {
	tc := newTestCluster(t, 1, 2)
	tc.bootstrap()
	main, replica := tc.data[0], tc.data[1]
	mustRun(t, main, `CREATE (a:Person {id: 1, name: "Ada"})-[:KNOWS {since: 1843}]->(b:Person {id: 2})-[:WROTE]->(:Note {id: 3})`)
	mustRun(t, main, `CREATE (x:Person {id: 4}), (y:Person {id: 5}), (x)-[:KNOWS]->(y)`)
	testenv.EventuallyTrue(t, 5*time.Second, "the replica has the edges", func() bool {
		return mustRun(t, replica, "MATCH ()-[r]->() RETURN count(r)").Records[0][0].(int64) == 3
	})
	if n := mustRun(t, replica, "MATCH ()-[r:KNOWS]->() RETURN count(r) AS c").Records[0][0].(int64); n != 2 {
		t.Fatalf("KNOWS edges on the replica: %d, want 2", n)
	}

	mustRun(t, main, "LOCK DATA DIRECTORY")
	if s := mustRun(t, main, "DATA DIRECTORY LOCK STATUS").Records[0][0]; s != "locked" {
		t.Errorf("lock status %v", s)
	}
	res := mustRun(t, main, "CREATE SNAPSHOT")
	path, _ := res.Records[0][0].(string)
	mustRun(t, main, "UNLOCK DATA DIRECTORY")
	if filepath.Dir(path) != filepath.Join(main.opts.DataDirectory, snapshotDir) || !strings.HasSuffix(path, "_timestamp_2") {
		t.Fatalf("CREATE SNAPSHOT answered %q, want a file in the snapshots directory at timestamp 2", path)
	}
	rows := mustRun(t, main, "SHOW SNAPSHOTS").Records
	if len(rows) != 1 || rows[0][0] != path || rows[0][1] != int64(2) {
		t.Fatalf("SHOW SNAPSHOTS: %v", rows)
	}
	if v := mustRun(t, main, "SHOW VERSION").Records[0][0]; v != Version {
		t.Errorf("SHOW VERSION: %v", v)
	}

	// A fresh data directory holding only the snapshot, as a restore writes it.
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, snapshotDir), 0o750); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, snapshotDir, filepath.Base(path))
	if err := os.WriteFile(good, b, 0o600); err != nil {
		t.Fatal(err)
	}
	// A newer file with one byte changed is not loaded.
	bad := append([]byte(nil), b...)
	bad[len(bad)/2] ^= 1
	if err := os.WriteFile(filepath.Join(dir, snapshotDir, SnapshotName(time.Now().Add(time.Hour), 9)), bad, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := OpenStore(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	if s.LoadedSnapshot() != filepath.Base(path) {
		t.Fatalf("recovered from %q, want %q", s.LoadedSnapshot(), filepath.Base(path))
	}
	nodes, edges, committed := s.Stats()
	if nodes != 5 || edges != 3 || committed != 2 {
		t.Fatalf("recovered %d nodes, %d edges at %d, want 5, 3, 2", nodes, edges, committed)
	}
	for _, n := range s.Match("Person") {
		if n.Props["id"] == int64(1) && n.Props["name"] != "Ada" {
			t.Errorf("node 1 recovered as %+v", n)
		}
	}
	if _, err := DecodeSnapshot(bad); err == nil || !strings.Contains(err.Error(), "checksum") {
		t.Errorf("a corrupted snapshot decoded: %v", err)
	}
	// Retention keeps the newest three when the directory is unlocked.
	for i := 0; i < 4; i++ {
		if _, err := writeSnapshot(dir, 1, s.Snapshot(), time.Now().Add(time.Duration(2+i)*time.Hour), 3, false); err != nil {
			t.Fatal(err)
		}
	}
	if names, _ := snapshotNames(dir); len(names) != 3 {
		t.Errorf("after retention: %v", names)
	}
}
