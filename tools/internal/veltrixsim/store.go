package veltrixsim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
)

// Files in each data dir. Keys are spread over the dirs by hash; the membership and the
// move bookkeeping live in the first one.
const (
	walFile        = "veltrix-wal.log"
	checkpointFile = "veltrix-checkpoint.jsonl"
	lockFile       = "veltrix.lock"
	membershipFile = "veltrix-membership.json"
	syncFile       = "veltrix-sync.json"
	crashMarker    = "veltrix-crashed-mid-move"
)

// Entry is one stored version of a key; a delete is kept as a tombstone so an older copy
// arriving from a member that is still moving data cannot bring the key back.
type Entry struct {
	Val string
	Ver int64
	Del bool
}

type record struct {
	K   string `json:"k"`
	V   string `json:"v,omitempty"`
	Ver int64  `json:"ver,omitempty"`
	D   bool   `json:"d,omitempty"`
	// X drops the key from this node (its partition was handed to its new owners).
	X bool `json:"x,omitempty"`
}

// Store keeps every key in memory and in the data dirs: an append-only log per dir,
// compacted into a checkpoint file periodically and on clean shutdown.
type Store struct {
	mu       sync.Mutex
	dirs     []*dataDir
	m        map[string]Entry
	live     int
	reopened bool
}

type dataDir struct {
	path    string
	wal     *os.File
	lock    *os.File
	pending int // log records since the last checkpoint
}

// OpenStore locks the dirs, loads their checkpoints and replays their logs.
func OpenStore(dirs []string) (*Store, error) {
	s := &Store{m: map[string]Entry{}}
	for _, p := range dirs {
		d, err := openDir(p)
		if err != nil {
			_ = s.Close()
			return nil, err
		}
		s.dirs = append(s.dirs, d)
		n, err := s.load(d)
		if err != nil {
			_ = s.Close()
			return nil, err
		}
		if n > 0 {
			s.reopened = true
		}
	}
	return s, nil
}

func openDir(p string) (*dataDir, error) {
	lock, err := os.OpenFile(filepath.Join(p, lockFile), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("data dir %s: %w", p, err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		return nil, fmt.Errorf("data dir %s is in use by another process: %w", p, err)
	}
	wal, err := os.OpenFile(filepath.Join(p, walFile), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		lock.Close()
		return nil, fmt.Errorf("data dir %s: %w", p, err)
	}
	return &dataDir{path: p, wal: wal, lock: lock}, nil
}

// load applies the dir's checkpoint then its log; it returns how many records it read and
// cuts a torn last log record (a crash mid-write).
func (s *Store) load(d *dataDir) (int, error) {
	n := 0
	if b, err := os.ReadFile(filepath.Join(d.path, checkpointFile)); err == nil {
		k, _ := s.replay(b)
		n += k
	} else if !errors.Is(err, os.ErrNotExist) {
		return 0, err
	}
	b, err := os.ReadFile(filepath.Join(d.path, walFile))
	if err != nil {
		return 0, err
	}
	k, valid := s.replay(b)
	n += k
	d.pending = k
	if valid < len(b) {
		if err := d.wal.Truncate(int64(valid)); err != nil {
			return 0, err
		}
	}
	if _, err := d.wal.Seek(int64(valid), 0); err != nil {
		return 0, err
	}
	return n, nil
}

// replay applies complete JSON lines; it returns the records applied and the length of
// the valid prefix.
func (s *Store) replay(b []byte) (int, int) {
	n, off := 0, 0
	for off < len(b) {
		i := bytes.IndexByte(b[off:], '\n')
		if i < 0 {
			break
		}
		var r record
		if err := json.Unmarshal(b[off:off+i], &r); err != nil {
			break
		}
		s.applyMem(r)
		n++
		off += i + 1
	}
	return n, off
}

func (s *Store) applyMem(r record) {
	old, had := s.m[r.K]
	if had && !old.Del {
		s.live--
	}
	if r.X {
		delete(s.m, r.K)
		return
	}
	s.m[r.K] = Entry{Val: r.V, Ver: r.Ver, Del: r.D}
	if !r.D {
		s.live++
	}
}

func (s *Store) dirOf(key string) *dataDir { return s.dirs[Partition(key, len(s.dirs))] }

func (s *Store) append(r record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	d := s.dirOf(r.K)
	// One write per record, unbuffered: a crash loses at most the record being written.
	if _, err := d.wal.Write(append(b, '\n')); err != nil {
		return err
	}
	d.pending++
	s.applyMem(r)
	return nil
}

// Apply stores e unless a newer (or the same) version is already there; it reports
// whether it stored it.
func (s *Store) Apply(key string, e Entry) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.m[key]; ok && old.Ver >= e.Ver {
		return false, nil
	}
	return true, s.append(record{K: key, V: e.Val, Ver: e.Ver, D: e.Del})
}

// Get returns the stored entry (a tombstone included).
func (s *Store) Get(key string) (Entry, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[key]
	return e, ok
}

// Drop removes key if it still has version ver: the key was handed to its new owners.
func (s *Store) Drop(key string, ver int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.m[key]; !ok || e.Ver != ver {
		return nil
	}
	return s.append(record{K: key, X: true})
}

// KeyEntry is a key with its entry.
type KeyEntry struct {
	Key string
	Entry
}

// Entries returns a sorted copy of every entry, tombstones included.
func (s *Store) Entries() []KeyEntry {
	s.mu.Lock()
	out := make([]KeyEntry, 0, len(s.m))
	for k, e := range s.m {
		out = append(out, KeyEntry{k, e})
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// Len returns the live keys (tombstones excluded) and all entries.
func (s *Store) Len() (live, all int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.live, len(s.m)
}

// Reopened reports whether the store found data from an earlier run.
func (s *Store) Reopened() bool { return s.reopened }

// Pending returns the log records written since the last checkpoint.
func (s *Store) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, d := range s.dirs {
		n += d.pending
	}
	return n
}

// Checkpoint writes each dir's keys to a new checkpoint file (synced, then renamed over
// the old one) and empties its log. A crash between the rename and the truncation is
// harmless: replaying the log over the checkpoint yields the same keys.
func (s *Store) Checkpoint() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	byDir := make([][]record, len(s.dirs))
	for k, e := range s.m {
		i := Partition(k, len(s.dirs))
		byDir[i] = append(byDir[i], record{K: k, V: e.Val, Ver: e.Ver, D: e.Del})
	}
	for i, d := range s.dirs {
		sort.Slice(byDir[i], func(a, b int) bool { return byDir[i][a].K < byDir[i][b].K })
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		for _, r := range byDir[i] {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		if err := writeFileSynced(filepath.Join(d.path, checkpointFile), buf.Bytes()); err != nil {
			return err
		}
		if err := d.wal.Truncate(0); err != nil {
			return err
		}
		if _, err := d.wal.Seek(0, 0); err != nil {
			return err
		}
		if err := d.wal.Sync(); err != nil {
			return err
		}
		d.pending = 0
	}
	return nil
}

// Close releases the dirs without a checkpoint (a crash keeps what the logs hold).
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for _, d := range s.dirs {
		errs = append(errs, d.wal.Close(), d.lock.Close())
	}
	s.dirs = nil
	return errors.Join(errs...)
}

// WriteMeta stores v as JSON in the first data dir, atomically.
func (s *Store) WriteMeta(name string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.dirs) == 0 {
		return errors.New("store is closed")
	}
	return writeFileSynced(filepath.Join(s.dirs[0].path, name), append(b, '\n'))
}

// ReadMeta loads name from the first data dir into v; it reports false when it is absent.
func (s *Store) ReadMeta(name string, v any) (bool, error) {
	s.mu.Lock()
	p := filepath.Join(s.dirs[0].path, name)
	s.mu.Unlock()
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return false, fmt.Errorf("%s: %w", p, err)
	}
	return true, nil
}

// MetaPath returns the path of name in the first data dir.
func (s *Store) MetaPath(name string) string { return filepath.Join(s.dirs[0].path, name) }

func writeFileSynced(path string, b []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	dir, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer dir.Close()
	return dir.Sync()
}
