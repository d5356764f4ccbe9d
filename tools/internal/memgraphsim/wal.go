package memgraphsim

import (
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

// The write-ahead log (--storage-wal-enabled, on by default as in Memgraph): every
// committed transaction, the MAIN's own and those a replica applies, is appended to the
// current file of <data-directory>/wal, named as Memgraph names its own: <UTC time to the
// microsecond>_current while it is written, renamed <time>_from_<first>_to_<last> (the
// commit timestamps it holds) when it is finalized: when it outgrows
// --storage-wal-file-size-kib, when a snapshot is taken, when the epoch changes and on a
// clean shutdown. The format is the simulator's own, not Memgraph's binary one:
//
//	MEMGRAPH-SIM-WAL 1
//	<sha256 hex of the JSON> {"epoch":3,"prev":41,"committed":42,"nodes":[...],"edges":[...]}
//	...
//
// one line per transaction, so a file cut short (copied while it was written, or torn by
// a crash) holds every whole line before the cut; a line whose checksum fails ends the
// file on recovery, as Memgraph stops at a corrupted delta of its last WAL file.
const (
	walDir   = "wal"
	walMagic = "MEMGRAPH-SIM-WAL 1"
	// DefaultWALFileSizeKiB is --storage-wal-file-size-kib's default.
	DefaultWALFileSizeKiB = 20480
	walCurrentSuffix      = "_current"
)

// WALRecord is one committed transaction of the write-ahead log.
type WALRecord struct {
	Epoch uint64 `json:"epoch"`
	// Prev is the commit timestamp the transaction follows; Committed is Prev+1, or
	// more for the record of a replica that took the commits it lacked from its MAIN's
	// graph at once.
	Prev      uint64       `json:"prev"`
	Committed uint64       `json:"committed"`
	Nodes     []StoredNode `json:"nodes,omitempty"`
	Edges     []StoredEdge `json:"edges,omitempty"`
}

// WALFile is what a WAL file holds, as recovery reads it.
type WALFile struct {
	Name string
	// Records are its whole, checked transactions in order; ValidBytes is where the last
	// of them ends (the file's size unless it was cut short or is corrupted after that).
	Records    []WALRecord
	ValidBytes int64
	// Torn says a line after ValidBytes failed its checks.
	Torn bool
}

// EncodeWALRecord is one record's line, newline included.
func EncodeWALRecord(r WALRecord) ([]byte, error) {
	body, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(body)
	line := make([]byte, 0, len(body)+66)
	line = append(line, hex.EncodeToString(sum[:])...)
	line = append(line, ' ')
	line = append(line, body...)
	return append(line, '\n'), nil
}

// DecodeWAL reads a WAL file's bytes: every whole, checked record up to the first line
// that is cut short or fails its checksum. A file without the magic line is an error.
func DecodeWAL(b []byte) (WALFile, error) {
	var out WALFile
	head, rest, ok := bytes.Cut(b, []byte("\n"))
	if !ok || string(head) != walMagic {
		return out, errors.New("not a simulator WAL file (" + walMagic + ")")
	}
	out.ValidBytes = int64(len(head) + 1)
	for len(rest) > 0 {
		line, next, whole := bytes.Cut(rest, []byte("\n"))
		if !whole {
			out.Torn = true
			break
		}
		rec, err := decodeWALLine(line)
		if err != nil {
			out.Torn = true
			break
		}
		out.Records = append(out.Records, rec)
		out.ValidBytes += int64(len(line) + 1)
		rest = next
	}
	return out, nil
}

func decodeWALLine(line []byte) (WALRecord, error) {
	var rec WALRecord
	sum, body, ok := bytes.Cut(line, []byte(" "))
	if !ok {
		return rec, errors.New("no checksum")
	}
	want := sha256.Sum256(body)
	if string(sum) != hex.EncodeToString(want[:]) {
		return rec, errors.New("checksum mismatch")
	}
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	if err := d.Decode(&rec); err != nil {
		return rec, err
	}
	if rec.Committed <= rec.Prev {
		return rec, fmt.Errorf("record %d does not follow %d", rec.Committed, rec.Prev)
	}
	(&graph{Nodes: rec.Nodes, Edges: rec.Edges}).normalize()
	return rec, nil
}

// ReadWALFile reads one WAL file.
func ReadWALFile(path string) (WALFile, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return WALFile{}, err
	}
	f, err := DecodeWAL(b)
	f.Name = filepath.Base(path)
	return f, err
}

// walNames are the regular, non-hidden files of dir's wal/, oldest first (the names
// start with the time each file was opened).
func walNames(dir string) ([]string, error) {
	ents, err := os.ReadDir(filepath.Join(dir, walDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range ents {
		if e.Type().IsRegular() && !strings.HasPrefix(e.Name(), ".") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names, nil
}

// walRange reads a finalized file's last commit timestamp from its name.
func walRange(name string) (from, to uint64, ok bool) {
	i := strings.LastIndex(name, "_from_")
	if i < 0 {
		return 0, 0, false
	}
	f, t, found := strings.Cut(name[i+len("_from_"):], "_to_")
	if !found {
		return 0, 0, false
	}
	from, err1 := strconv.ParseUint(f, 10, 64)
	to, err2 := strconv.ParseUint(t, 10, 64)
	return from, to, err1 == nil && err2 == nil
}

// replayWAL applies to g every record of dir's WAL files that follows on what g holds,
// file by file in the order they were written: a record at or before g's commit
// timestamp is skipped, one that would leave a gap ends the replay (nothing after it can
// be applied), and a file's torn tail is skipped for the next file. It returns how many
// records it applied.
func replayWAL(dir string, g *graph) (int, error) {
	names, err := walNames(dir)
	if err != nil {
		return 0, err
	}
	applied := 0
	for _, n := range names {
		f, err := ReadWALFile(filepath.Join(dir, walDir, n))
		if err != nil {
			continue // not a WAL file of ours
		}
		for _, r := range f.Records {
			switch {
			case r.Committed <= g.Committed:
				continue
			case r.Prev != g.Committed:
				return applied, nil
			}
			g.apply(r.Nodes, r.Edges)
			g.Committed = r.Committed
			applied++
		}
	}
	return applied, nil
}

// apply adds a replicated or replayed transaction's nodes and edges, which carry their ids.
func (g *graph) apply(nodes []StoredNode, edges []StoredEdge) {
	g.Nodes = append(g.Nodes, nodes...)
	g.Edges = append(g.Edges, edges...)
	for _, n := range nodes {
		if n.ID >= g.NextID {
			g.NextID = n.ID + 1
		}
	}
	for _, e := range edges {
		if e.ID >= g.NextEdgeID {
			g.NextEdgeID = e.ID + 1
		}
	}
	g.Committed++
}

// walWriter appends to the current WAL file of one data directory. Its owner (the Store)
// serialises calls.
type walWriter struct {
	dir     string
	maxSize int64
	f       *os.File
	name    string
	size    int64
	first   uint64
	last    uint64
	epoch   uint64
}

func newWALWriter(dir string, maxSize int64) (*walWriter, error) {
	w := &walWriter{dir: dir, maxSize: maxSize}
	// A file left "_current" (a crash, or a restore of one copied while it was written)
	// is finalized under the range it holds whole, so the new file is the only current one.
	names, err := walNames(dir)
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		if !strings.HasSuffix(n, walCurrentSuffix) {
			continue
		}
		p := filepath.Join(dir, walDir, n)
		f, err := ReadWALFile(p)
		if err != nil || len(f.Records) == 0 {
			continue
		}
		first, last := f.Records[0].Prev+1, f.Records[len(f.Records)-1].Committed
		if err := os.Rename(p, filepath.Join(dir, walDir, finalName(n, first, last))); err != nil {
			return nil, err
		}
	}
	return w, nil
}

func finalName(current string, first, last uint64) string {
	return fmt.Sprintf("%s_from_%d_to_%d", strings.TrimSuffix(current, walCurrentSuffix), first, last)
}

// append writes one record, opening a new file first when none is open or the epoch
// changed, and finalizes the file once it outgrew the size limit.
func (w *walWriter) append(r WALRecord) error {
	if w.f != nil && r.Epoch != w.epoch {
		if err := w.finalize(); err != nil {
			return err
		}
	}
	if w.f == nil {
		if err := w.open(r.Epoch); err != nil {
			return err
		}
	}
	line, err := EncodeWALRecord(r)
	if err != nil {
		return err
	}
	if _, err := w.f.Write(line); err != nil {
		return err
	}
	if w.first == 0 {
		w.first = r.Prev + 1
	}
	w.last = r.Committed
	w.size += int64(len(line))
	if w.maxSize > 0 && w.size >= w.maxSize {
		return w.finalize()
	}
	return nil
}

func (w *walWriter) open(epoch uint64) error {
	d := filepath.Join(w.dir, walDir)
	if err := os.MkdirAll(d, 0o750); err != nil {
		return err
	}
	t := time.Now().UTC()
	name := fmt.Sprintf("%s%06d%s", t.Format("20060102150405"), t.Nanosecond()/1000, walCurrentSuffix)
	f, err := os.OpenFile(filepath.Join(d, name), os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(walMagic + "\n"); err != nil {
		_ = f.Close()
		return err
	}
	w.f, w.name, w.size, w.first, w.last, w.epoch = f, name, int64(len(walMagic)+1), 0, 0, epoch
	return nil
}

// finalize closes the current file and renames it after the range it holds; a file
// without a record is removed.
func (w *walWriter) finalize() error {
	if w.f == nil {
		return nil
	}
	f, name := w.f, w.name
	w.f = nil
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	p := filepath.Join(w.dir, walDir, name)
	if w.first == 0 {
		return os.Remove(p)
	}
	return os.Rename(p, filepath.Join(w.dir, walDir, finalName(name, w.first, w.last)))
}

// moveToOld moves every durability file of dir (snapshots and WAL) into a hidden .old
// folder of its directory, emptied first: a replica that takes a whole graph from its
// MAIN keeps its previous files there, as Memgraph does, and recovers only from what it
// writes from now on.
func moveToOld(dir string) error {
	for _, sub := range []string{snapshotDir, walDir} {
		d := filepath.Join(dir, sub)
		ents, err := os.ReadDir(d)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		old := filepath.Join(d, ".old")
		if err := os.RemoveAll(old); err != nil {
			return err
		}
		if err := os.MkdirAll(old, 0o750); err != nil {
			return err
		}
		for _, e := range ents {
			if !e.Type().IsRegular() || strings.HasPrefix(e.Name(), ".") {
				continue
			}
			if err := os.Rename(filepath.Join(d, e.Name()), filepath.Join(old, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// pruneWAL removes the finalized WAL files that hold nothing after timestamp upTo (the
// oldest snapshot kept), as Memgraph's retention does.
func pruneWAL(dir string, upTo uint64) {
	names, err := walNames(dir)
	if err != nil {
		return
	}
	for _, n := range names {
		if _, to, ok := walRange(n); ok && to <= upTo {
			_ = os.Remove(filepath.Join(dir, walDir, n))
		}
	}
}
