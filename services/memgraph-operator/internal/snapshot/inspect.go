package snapshot

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strconv"
	"strings"
)

// FormatSim is the durability file format of memgraph-sim, the simulator the local
// cluster and the tests run for memgraph/memgraph images: a snapshot is a magic line, one
// JSON line (epoch, commit timestamp, the graph) and a checksum line; a WAL file a magic
// line and one "<sha256> <JSON>" line per transaction. Memgraph's own binary files
// ("MGsn", "MGwl") are not read: for them Info holds what their names say.
const FormatSim = "memgraph-sim"

const (
	simSnapshotMagic = "MEMGRAPH-SIM-SNAPSHOT 1"
	simWALMagic      = "MEMGRAPH-SIM-WAL 1"
	walCurrentSuffix = "_current"
)

// Info is what a durability file says about itself, read on the pod by the agent, where
// the file is: the operator decides from it which WAL files a backup needs and records
// the epoch and the timestamps in the manifest, and a restore checks the downloaded
// files against the manifest with it.
type Info struct {
	// Name is the file's path in the data directory ("wal/<file>").
	Name string `json:"name"`
	// Size is the file's size when it was read.
	Size int64 `json:"size"`
	// Format is FormatSim when the content was read, "" when only the name was.
	Format string `json:"format,omitempty"`
	// Epoch is the epoch the file records (Memgraph's epoch id; the simulator's epoch
	// number): a snapshot's, or a WAL file's last record's. "" when not read.
	Epoch string `json:"epoch,omitempty"`
	// Timestamp is a snapshot's commit timestamp (its name's <ts> of
	// <time>_timestamp_<ts>), and a WAL file's last commit timestamp.
	Timestamp uint64 `json:"timestamp"`
	// Prev is, for a WAL file, the commit timestamp its first transaction follows; with
	// Timestamp it says which commits the file holds (Prev, Timestamp]. Unknown (and
	// Known false) for a WAL file whose content was not read and whose name carries no
	// range (Memgraph's "_current" file).
	Prev  uint64 `json:"prev"`
	Known bool   `json:"known"`
	// Length is how many bytes of the file hold whole records: all of a snapshot, and of
	// a WAL file up to its last whole, checked transaction (one being written may end in
	// a part of the next). A backup stores exactly that many bytes.
	Length int64 `json:"length"`
	// Current says a WAL file is still being written ("<time>_current").
	Current bool `json:"current,omitempty"`
}

// IsWAL says whether the file is in wal/.
func (i Info) IsWAL() bool { return strings.HasPrefix(i.Name, WALDir+"/") }

// InspectFile reads what the file at p (name is its path in the data directory) says
// about itself; a file of a format it does not read is described by its name.
func InspectFile(p, name string) (Info, error) {
	f, err := os.Open(p)
	if err != nil {
		return Info{}, err
	}
	defer func() { _ = f.Close() }()
	st, err := f.Stat()
	if err != nil {
		return Info{}, err
	}
	if !st.Mode().IsRegular() {
		return Info{}, fmt.Errorf("%s is not a regular file", name)
	}
	return Inspect(f, name, st.Size())
}

// Inspect reads the first size bytes of r, a durability file named name.
func Inspect(r io.Reader, name string, size int64) (Info, error) {
	info := Info{Name: name, Size: size, Length: size}
	base := path.Base(name)
	switch path.Dir(name) {
	case SnapshotsDir:
		info.Timestamp, info.Known = SnapshotTimestamp(name), true
	case WALDir:
		info.Current = strings.HasSuffix(base, walCurrentSuffix)
		info.Prev, info.Timestamp, info.Known = walNameRange(base)
	default:
		return info, fmt.Errorf("%q is not a file of %s/ or %s/", name, SnapshotsDir, WALDir)
	}
	br := bufio.NewReaderSize(io.LimitReader(r, size), 64<<10)
	head, err := br.Peek(min(int(size), len(simSnapshotMagic)+1))
	if err != nil && !errors.Is(err, io.EOF) {
		return info, err
	}
	switch {
	case bytes.Equal(head, []byte(simSnapshotMagic+"\n")):
		return inspectSimSnapshot(br, info)
	case bytes.HasPrefix(head, []byte(simWALMagic+"\n")):
		return inspectSimWAL(br, info)
	}
	return info, nil
}

// walNameRange reads Memgraph's finalized WAL name <time>_from_<first>_to_<last>: the
// file holds commits first..last, so it follows first-1.
func walNameRange(base string) (prev, to uint64, ok bool) {
	i := strings.LastIndex(base, "_from_")
	if i < 0 {
		return 0, 0, false
	}
	f, t, found := strings.Cut(base[i+len("_from_"):], "_to_")
	from, err1 := strconv.ParseUint(f, 10, 64)
	to, err2 := strconv.ParseUint(t, 10, 64)
	if !found || err1 != nil || err2 != nil || from == 0 || to < from {
		return 0, 0, false
	}
	return from - 1, to, true
}

// inspectSimSnapshot reads the epoch and commit timestamp at the start of the JSON line
// (the simulator writes them before the graph), and checks the checksum line.
func inspectSimSnapshot(br *bufio.Reader, info Info) (Info, error) {
	if _, err := br.ReadString('\n'); err != nil {
		return info, fmt.Errorf("%s: %w", info.Name, err)
	}
	h := sha256.New()
	var head struct {
		Epoch     json.Number `json:"epoch"`
		Committed json.Number `json:"committed"`
	}
	// The body is one line, possibly large: hashed as it streams, its first fields read.
	body := io.TeeReader(&lineReader{r: br}, h)
	dec := json.NewDecoder(body)
	dec.UseNumber()
	if err := readLeadingFields(dec, map[string]*json.Number{"epoch": &head.Epoch, "committed": &head.Committed}); err != nil {
		return info, fmt.Errorf("%s: not a whole simulator snapshot: %w", info.Name, err)
	}
	if _, err := io.Copy(io.Discard, body); err != nil {
		return info, fmt.Errorf("%s: %w", info.Name, err)
	}
	sum, err := br.ReadString('\n')
	if err != nil || strings.TrimSpace(sum) != "sha256 "+hex.EncodeToString(h.Sum(nil)) {
		return info, fmt.Errorf("%s: the simulator snapshot's checksum does not hold: the file is corrupted or cut short", info.Name)
	}
	ts, err := strconv.ParseUint(head.Committed.String(), 10, 64)
	if err != nil {
		return info, fmt.Errorf("%s: commit timestamp %q", info.Name, head.Committed)
	}
	info.Format, info.Epoch, info.Timestamp, info.Known = FormatSim, head.Epoch.String(), ts, true
	return info, nil
}

// lineReader reads up to (not including) the next newline, which it consumes, however
// long the line.
type lineReader struct {
	r       *bufio.Reader
	pending []byte
	done    bool
}

func (l *lineReader) Read(p []byte) (int, error) {
	for len(l.pending) == 0 {
		if l.done {
			return 0, io.EOF
		}
		b, err := l.r.ReadSlice('\n')
		switch {
		case err == nil:
			l.pending, l.done = append(l.pending[:0], b[:len(b)-1]...), true
		case errors.Is(err, bufio.ErrBufferFull):
			l.pending = append(l.pending[:0], b...)
		case len(b) == 0:
			return 0, io.ErrUnexpectedEOF
		default:
			l.pending, l.done = append(l.pending[:0], b...), true
		}
	}
	n := copy(p, l.pending)
	l.pending = l.pending[n:]
	return n, nil
}

// readLeadingFields reads a JSON object's fields from its start until every wanted one
// was seen, and stops there without reading the rest.
func readLeadingFields(dec *json.Decoder, want map[string]*json.Number) error {
	t, err := dec.Token()
	if err != nil {
		return err
	}
	if t != json.Delim('{') {
		return errors.New("no JSON object")
	}
	left := len(want)
	for left > 0 && dec.More() {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := t.(string)
		dst, ok := want[key]
		if !ok {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return err
			}
			continue
		}
		if err := dec.Decode(dst); err != nil {
			return fmt.Errorf("field %s: %w", key, err)
		}
		left--
	}
	if left > 0 {
		return errors.New("fields missing")
	}
	return nil
}

// inspectSimWAL reads every whole, checked transaction line.
func inspectSimWAL(br *bufio.Reader, info Info) (Info, error) {
	magic, err := br.ReadString('\n')
	if err != nil {
		return info, fmt.Errorf("%s: %w", info.Name, err)
	}
	info.Format, info.Length, info.Known = FormatSim, int64(len(magic)), false
	info.Prev, info.Timestamp = 0, 0
	first := true
	for {
		line, err := br.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			// A last line without its newline is a transaction being written: not whole.
			break
		}
		if err != nil {
			return info, fmt.Errorf("%s: %w", info.Name, err)
		}
		rec, ok := simWALRecord(line)
		if !ok {
			break
		}
		if first {
			info.Prev, first = rec.Prev, false
		} else if rec.Prev != info.Timestamp {
			break
		}
		info.Timestamp, info.Epoch, info.Known = rec.Committed, rec.Epoch.String(), true
		info.Length += int64(len(line))
	}
	return info, nil
}

// simWALRecord is what a backup needs of one WAL line: ok is false when the line is not
// whole, fails its checksum or adds no commit (a record adds one transaction, or several
// that a replica took at once from its MAIN's graph).
func simWALRecord(line []byte) (rec struct {
	Epoch     json.Number `json:"epoch"`
	Prev      uint64      `json:"prev"`
	Committed uint64      `json:"committed"`
}, ok bool) {
	sum, body, found := bytes.Cut(bytes.TrimSuffix(line, []byte("\n")), []byte(" "))
	want := sha256.Sum256(body)
	if !found || string(sum) != hex.EncodeToString(want[:]) {
		return rec, false
	}
	return rec, json.Unmarshal(body, &rec) == nil && rec.Committed > rec.Prev
}
