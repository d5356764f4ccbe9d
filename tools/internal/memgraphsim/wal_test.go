package memgraphsim

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opsuite/suite/shared/testenv"
)

// copyFile copies src to dir/sub/<base>, cut to n bytes when n >= 0.
func copyFile(t *testing.T, src, dir, sub string, n int) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if n >= 0 {
		b = b[:n]
	}
	dst := filepath.Join(dir, sub, filepath.Base(src))
	if err := os.MkdirAll(filepath.Dir(dst), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestWALWrittenAndReplayed: every commit goes to the WAL, on the MAIN and on the replica
// that applies it. CREATE SNAPSHOT on the replica is of the moment it starts, commits go
// on while it writes its file (MEMGRAPH_SIM_SNAPSHOT_DELAY) and land in the WAL file
// started with it, which stays "_current"; the snapshot plus that WAL file, copied into
// an empty data directory with a torn last line (as a copy of a file being written can
// be), recover every commit: the snapshot's, then the WAL records after it. A WAL with a
// gap after the snapshot recovers up to the gap only.
func TestWALWrittenAndReplayed(t *testing.T) {
	tc := newTestCluster(t, 1, 2)
	tc.bootstrap()
	main, replica := tc.data[0], tc.data[1]
	for i := range 3 {
		mustRun(t, main, fmt.Sprintf(`CREATE (:Person {id: %d})`, i))
	}
	testenv.EventuallyTrue(t, 5*time.Second, "the replica holds 3 commits", func() bool { return replica.srv.data.store.Committed() == 3 })

	replica.srv.data.opts.SnapshotDelay = time.Second
	done := make(chan string, 1)
	go func() {
		res, err := run(t, replica, "CREATE SNAPSHOT")
		if err != nil {
			done <- "error: " + err.Error()
			return
		}
		done <- res.Records[0][0].(string)
	}()
	testenv.EventuallyTrue(t, 5*time.Second, "the snapshot is being written", func() bool { return replica.srv.data.snapshotRunning.Load() })
	if _, err := run(t, replica, "CREATE SNAPSHOT"); err == nil || !strings.Contains(err.Error(), ErrSnapshotRunning) {
		t.Errorf("a second CREATE SNAPSHOT while one runs: %v", err)
	}
	mustRun(t, main, `CREATE (:Person {id: 3})-[:KNOWS]->(:Person {id: 4})`)
	mustRun(t, main, `CREATE (:Person {id: 5})`)
	snap := <-done
	if !strings.HasSuffix(snap, "_timestamp_3") {
		t.Fatalf("CREATE SNAPSHOT during commits answered %q, want the snapshot of timestamp 3", snap)
	}
	if c := replica.srv.data.store.Committed(); c != 5 {
		t.Fatalf("the replica holds %d commits, want 5", c)
	}
	names, err := walNames(replica.opts.DataDirectory)
	if err != nil {
		t.Fatal(err)
	}
	// The file before the snapshot was finalized with it (the replica took the first
	// commit as a whole graph, the link's first sync); the commits after it are in the
	// current one.
	if len(names) != 2 || !strings.HasSuffix(names[0], "_to_3") || !strings.HasSuffix(names[1], walCurrentSuffix) {
		t.Fatalf("the replica's WAL files: %v", names)
	}
	cur, err := ReadWALFile(filepath.Join(replica.opts.DataDirectory, walDir, names[1]))
	if err != nil || len(cur.Records) != 2 || cur.Records[0].Prev != 3 || cur.Records[1].Committed != 5 || cur.Torn {
		t.Fatalf("the current WAL file: %+v %v", cur, err)
	}
	if e := replica.srv.data.st.Epoch; cur.Records[0].Epoch != e || e == 0 {
		t.Errorf("WAL records carry epoch %d, the replica follows %d", cur.Records[0].Epoch, e)
	}
	if names, _ := walNames(main.opts.DataDirectory); len(names) != 1 || !strings.HasSuffix(names[0], walCurrentSuffix) {
		t.Errorf("the MAIN's WAL files: %v", names)
	}

	// A restore: the snapshot and the WAL after it, the current file's copy torn.
	dir := t.TempDir()
	copyFile(t, snap, dir, snapshotDir, -1)
	curPath := filepath.Join(replica.opts.DataDirectory, walDir, names[1])
	full, _ := os.ReadFile(curPath)
	copyFile(t, curPath, dir, walDir, len(full)-7)
	s, err := OpenStoreWith(dir, StoreOptions{Recover: true, WAL: true})
	if err != nil {
		t.Fatal(err)
	}
	if s.LoadedSnapshot() != filepath.Base(snap) || s.ReplayedWAL() != 1 || s.Committed() != 4 || s.Count("Person", nil) != 5 || s.CountEdges("KNOWS", nil) != 1 {
		t.Fatalf("recovered %s + %d WAL records: %d commits, %d nodes", s.LoadedSnapshot(), s.ReplayedWAL(), s.Committed(), s.Count("", nil))
	}
	// The torn current file was finalized under what it holds whole.
	if got, _ := walNames(dir); len(got) != 1 || !strings.HasSuffix(got[0], "_from_4_to_4") {
		t.Errorf("after recovery the WAL files are %v", got)
	}
	if _, _, _, err := s.CommitWrite(Write{Nodes: []NodePattern{{Labels: []string{"Person"}}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got, _ := walNames(dir); len(got) != 2 || !strings.HasSuffix(got[1], "_from_5_to_5") {
		t.Errorf("after a commit and a clean close the WAL files are %v", got)
	}

	// The whole current file recovers both commits; without the file before it, whose
	// records the snapshot holds, nothing is missing.
	whole := t.TempDir()
	copyFile(t, snap, whole, snapshotDir, -1)
	copyFile(t, curPath, whole, walDir, -1)
	if s, err := OpenStoreWith(whole, StoreOptions{Recover: true}); err != nil || s.Committed() != 5 || s.ReplayedWAL() != 2 {
		t.Fatalf("recovered %v with %d WAL records", err, s.ReplayedWAL())
	}
	// A gap: WAL records after the snapshot that do not follow on it are not applied.
	gap := t.TempDir()
	copyFile(t, snap, gap, snapshotDir, -1)
	rec, _ := EncodeWALRecord(WALRecord{Epoch: 1, Prev: 4, Committed: 5, Nodes: []StoredNode{{ID: 99, Labels: []string{"Person"}}}})
	if err := os.MkdirAll(filepath.Join(gap, walDir), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(gap, walDir, "20261205000000000000_from_5_to_5"), append([]byte(walMagic+"\n"), rec...), 0o600); err != nil {
		t.Fatal(err)
	}
	if s, err := OpenStoreWith(gap, StoreOptions{Recover: true}); err != nil || s.Committed() != 3 || s.ReplayedWAL() != 0 {
		t.Fatalf("a WAL with a gap: %v, %d commits", err, s.Committed())
	}
}

// TestReplaceKeepsOldFilesAside: a replica that takes a whole graph of another history
// from its MAIN moves its durability files into .old folders and keeps the graph as its
// one snapshot, so its snapshot and WAL never mix two histories; one that was only
// behind logs the commits it lacked as one WAL record and keeps its files. A snapshot's
// retention drops the WAL files the oldest kept snapshot covers.
func TestReplaceKeepsOldFilesAside(t *testing.T) {
	main, err := OpenStoreWith(t.TempDir(), StoreOptions{Recover: true, WAL: true})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, _, _, err := main.CommitWrite(Write{Nodes: []NodePattern{{Labels: []string{"A"}}}}); err != nil {
			t.Fatal(err)
		}
	}
	// Behind: the same first commit, then the whole graph at 3.
	behindDir := t.TempDir()
	behind, err := OpenStoreWith(behindDir, StoreOptions{Recover: true, WAL: true})
	if err != nil {
		t.Fatal(err)
	}
	first := main.Snapshot()
	if _, ok, err := behind.Append(0, first.Nodes[:1], nil); err != nil || !ok {
		t.Fatal(err)
	}
	if err := behind.Replace(main.Snapshot()); err != nil {
		t.Fatal(err)
	}
	if err := behind.Replace(main.Snapshot()); err != nil { // nothing new: nothing logged
		t.Fatal(err)
	}
	if err := behind.Close(); err != nil {
		t.Fatal(err)
	}
	names, _ := walNames(behindDir)
	snaps, _ := snapshotNames(behindDir)
	if len(names) != 1 || !strings.HasSuffix(names[0], "_from_1_to_3") || len(snaps) != 0 {
		t.Fatalf("a replica only behind: WAL %v, snapshots %v", names, snaps)
	}
	if f, err := ReadWALFile(filepath.Join(behindDir, walDir, names[0])); err != nil || len(f.Records) != 2 || f.Records[1].Prev != 1 || f.Records[1].Committed != 3 {
		t.Fatalf("its WAL: %+v %v", f, err)
	}
	if err := os.Remove(filepath.Join(behindDir, storeFile)); err != nil {
		t.Fatal(err)
	}
	if s, err := OpenStoreWith(behindDir, StoreOptions{Recover: true}); err != nil || s.Committed() != 3 || s.Count("A", nil) != 3 {
		t.Fatalf("recovered from its WAL alone: %v, %d commits", err, s.Committed())
	}
	dir := t.TempDir()
	replica, err := OpenStoreWith(dir, StoreOptions{Recover: true, WAL: true})
	if err != nil {
		t.Fatal(err)
	}
	replica.SetEpoch(7)
	if _, _, _, err := replica.CommitWrite(Write{Nodes: []NodePattern{{Labels: []string{"Diverged"}}}}); err != nil {
		t.Fatal(err)
	}
	if err := replica.Replace(main.Snapshot()); err != nil {
		t.Fatal(err)
	}
	if names, _ := walNames(dir); len(names) != 0 {
		t.Errorf("WAL files after Replace: %v", names)
	}
	if old, _ := os.ReadDir(filepath.Join(dir, walDir, ".old")); len(old) != 1 {
		t.Errorf("the WAL's .old folder holds %d files, want the one written before", len(old))
	}
	snaps, _ = snapshotNames(dir)
	if len(snaps) != 1 || !strings.HasSuffix(snaps[0], "_timestamp_3") {
		t.Fatalf("snapshots after Replace: %v", snaps)
	}
	if _, _, err := replica.Append(3, []StoredNode{{ID: 3, Labels: []string{"A"}}}, nil); err != nil {
		t.Fatal(err)
	}
	// Recovered from the files alone: the MAIN's graph and the commit after it.
	if err := os.Remove(filepath.Join(dir, storeFile)); err != nil {
		t.Fatal(err)
	}
	back, err := OpenStoreWith(dir, StoreOptions{Recover: true, WAL: true})
	if err != nil || back.Committed() != 4 || back.Count("Diverged", nil) != 0 || back.Count("A", nil) != 4 {
		t.Fatalf("recovered %v: %d commits, %d diverged", err, back.Committed(), back.Count("Diverged", nil))
	}

	// Retention: three snapshots kept, the WAL files at or before the oldest go.
	g := back.Snapshot()
	for i := range 4 {
		if _, _, _, err := back.CommitWrite(Write{Nodes: []NodePattern{{Labels: []string{"A"}}}}); err != nil {
			t.Fatal(err)
		}
		g, _, err = back.snapshotForDurability()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := writeSnapshot(dir, 7, g, time.Now().Add(time.Duration(i+1)*time.Hour), 3, false); err != nil {
			t.Fatal(err)
		}
	}
	names, _ = walNames(dir)
	var tos []uint64
	for _, n := range names {
		_, to, _ := walRange(n)
		tos = append(tos, to)
	}
	if oldest := g.Committed - 2; slices.ContainsFunc(tos, func(to uint64) bool { return to <= oldest }) {
		t.Errorf("WAL files covered by the oldest snapshot kept (timestamp %d) remain: %v", oldest, names)
	}
}

// TestShowReplicasStatus: SHOW REPLICAS on the MAIN gives each replica's data_info as
// Memgraph does ({memgraph: {ts, behind, status}}): ready and 0 behind when caught up;
// a replica that went away shows "invalid" within the check period although no write
// failed, and ready again once it is back and caught up.
func TestShowReplicasStatus(t *testing.T) {
	tc := newTestCluster(t, 1, 2)
	tc.bootstrap()
	main, replica := tc.data[0], tc.data[1]
	mustRun(t, main, `CREATE (:Person {id: 1})`)
	status := func() (string, int64, int64) {
		rows := mustRun(t, main, "SHOW REPLICAS").Records
		if len(rows) != 1 {
			t.Fatalf("SHOW REPLICAS: %v", rows)
		}
		db := rows[0][4].(map[string]any)["memgraph"].(map[string]any)
		return db["status"].(string), db["ts"].(int64), db["behind"].(int64)
	}
	testenv.EventuallyTrue(t, 5*time.Second, "the replica ready at 1", func() bool {
		s, ts, behind := status()
		return s == "ready" && ts == 1 && behind == 0
	})
	tc.stop(replica)
	testenv.EventuallyTrue(t, 5*time.Second, "the stopped replica invalid", func() bool {
		s, _, _ := status()
		return s == "invalid"
	})
	tc.start(replica)
	testenv.EventuallyTrue(t, 15*time.Second, "the replica back and ready", func() bool {
		s, ts, behind := status()
		return s == "ready" && ts == 1 && behind == 0
	})
}
