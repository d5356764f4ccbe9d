package memgraphsim

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Snapshots are the simulator's durability files of CREATE SNAPSHOT: one file per
// snapshot in <data-directory>/snapshots, named as Memgraph names its own
// (<UTC time to the microsecond>_timestamp_<commit timestamp>), in a format of the
// simulator's own, which is not Memgraph's binary one:
//
//	MEMGRAPH-SIM-SNAPSHOT 1
//	{"epoch":3,"committed":42,"created_at":"...","graph":{...}}
//	sha256 <hex of the line above, without its newline>
//
// A file whose checksum line is missing or wrong (cut short, corrupted) is skipped on
// recovery, as Memgraph skips a snapshot it cannot read and takes an older one.
const (
	snapshotDir   = "snapshots"
	snapshotMagic = "MEMGRAPH-SIM-SNAPSHOT 1"
	// DefaultSnapshotRetention is --storage-snapshot-retention-count's default.
	DefaultSnapshotRetention = 3
)

// snapshotBody is a snapshot file's second line.
type snapshotBody struct {
	Epoch     uint64    `json:"epoch"`
	Committed uint64    `json:"committed"`
	CreatedAt time.Time `json:"created_at"`
	Graph     graph     `json:"graph"`
}

// SnapshotFile is one snapshot read back.
type SnapshotFile struct {
	// Name is the file's name in the snapshots directory.
	Name string
	// Path is its full path.
	Path string
	snapshotBody
}

// SnapshotName is the file name of a snapshot taken at t of a store at commit timestamp
// committed.
func SnapshotName(t time.Time, committed uint64) string {
	t = t.UTC()
	return fmt.Sprintf("%s%06d_timestamp_%d", t.Format("20060102150405"), t.Nanosecond()/1000, committed)
}

// EncodeSnapshot is a snapshot file's bytes.
func EncodeSnapshot(epoch uint64, g graph, at time.Time) ([]byte, error) {
	body, err := json.Marshal(snapshotBody{Epoch: epoch, Committed: g.Committed, CreatedAt: at.UTC(), Graph: g})
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(body)
	var b bytes.Buffer
	b.WriteString(snapshotMagic + "\n")
	b.Write(body)
	b.WriteString("\nsha256 " + hex.EncodeToString(sum[:]) + "\n")
	return b.Bytes(), nil
}

// DecodeSnapshot reads a snapshot file's bytes and checks them.
func DecodeSnapshot(b []byte) (snapshotBody, error) {
	var out snapshotBody
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 1<<20), len(b)+1)
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		return out, err
	}
	if len(lines) != 3 || lines[0] != snapshotMagic {
		return out, errors.New("not a simulator snapshot (" + snapshotMagic + ", body, checksum)")
	}
	sum := sha256.Sum256([]byte(lines[1]))
	if lines[2] != "sha256 "+hex.EncodeToString(sum[:]) {
		return out, errors.New("snapshot checksum mismatch: the file is corrupted or cut short")
	}
	d := json.NewDecoder(strings.NewReader(lines[1]))
	d.UseNumber()
	if err := d.Decode(&out); err != nil {
		return out, err
	}
	out.Graph.normalize()
	return out, nil
}

// writeSnapshot stores g as a new snapshot (temporary file, fsync, rename) and removes
// the oldest beyond retention, and the WAL files the oldest kept covers, unless the data
// directory is locked.
func writeSnapshot(dir string, epoch uint64, g graph, at time.Time, retention int, locked bool) (SnapshotFile, error) {
	sdir := filepath.Join(dir, snapshotDir)
	if err := os.MkdirAll(sdir, 0o750); err != nil {
		return SnapshotFile{}, err
	}
	b, err := EncodeSnapshot(epoch, g, at)
	if err != nil {
		return SnapshotFile{}, err
	}
	name := SnapshotName(at, g.Committed)
	p := filepath.Join(sdir, name)
	tmp := filepath.Join(sdir, "."+name+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return SnapshotFile{}, err
	}
	f, err := os.Open(tmp)
	if err == nil {
		err = f.Sync()
		_ = f.Close()
	}
	if err != nil {
		return SnapshotFile{}, err
	}
	if err := os.Rename(tmp, p); err != nil {
		return SnapshotFile{}, err
	}
	if !locked && retention > 0 {
		names, err := snapshotNames(dir)
		if err != nil {
			return SnapshotFile{}, err
		}
		for i := retention; i < len(names); i++ {
			_ = os.Remove(filepath.Join(sdir, names[i]))
		}
		// The WAL files the oldest snapshot kept already covers go too.
		oldest := names[min(retention, len(names))-1]
		if ts, err := strconv.ParseUint(oldest[strings.LastIndex(oldest, "_")+1:], 10, 64); err == nil {
			pruneWAL(dir, ts)
		}
	}
	return SnapshotFile{Name: name, Path: p, snapshotBody: snapshotBody{Epoch: epoch, Committed: g.Committed, CreatedAt: at.UTC()}}, nil
}

// snapshotNames are the snapshot files in dir, newest first.
func snapshotNames(dir string) ([]string, error) {
	ents, err := os.ReadDir(filepath.Join(dir, snapshotDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range ents {
		if e.Type().IsRegular() && !strings.HasPrefix(e.Name(), ".") && strings.Contains(e.Name(), "_timestamp_") {
			names = append(names, e.Name())
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(names)))
	return names, nil
}

// newestSnapshot reads the newest snapshot in dir that passes its checks.
func newestSnapshot(dir string) (SnapshotFile, bool, error) {
	names, err := snapshotNames(dir)
	if err != nil {
		return SnapshotFile{}, false, err
	}
	for _, n := range names {
		p := filepath.Join(dir, snapshotDir, n)
		b, err := os.ReadFile(p)
		if err != nil {
			return SnapshotFile{}, false, err
		}
		body, err := DecodeSnapshot(b)
		if err != nil {
			continue
		}
		return SnapshotFile{Name: n, Path: p, snapshotBody: body}, true, nil
	}
	return SnapshotFile{}, false, nil
}

// snapshotRows are SHOW SNAPSHOTS' rows, newest first: path, timestamp, creation_time,
// size.
func snapshotRows(dir string) ([][]any, error) {
	names, err := snapshotNames(dir)
	if err != nil {
		return nil, err
	}
	rows := make([][]any, 0, len(names))
	for _, n := range names {
		p := filepath.Join(dir, snapshotDir, n)
		st, err := os.Stat(p)
		if err != nil {
			continue
		}
		ts, _ := strconv.ParseInt(n[strings.LastIndex(n, "_")+1:], 10, 64)
		rows = append(rows, []any{p, ts, st.ModTime().UTC().Format("2006-01-02 15:04:05.000000+00:00"), humanSize(st.Size())})
	}
	return rows, nil
}

func humanSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2fGiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.2fMiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.2fKiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%dB", n)
}
