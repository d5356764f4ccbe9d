package memgraphsim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"time"
)

// StoredNode is one node of the graph.
type StoredNode struct {
	ID     int64          `json:"id"`
	Labels []string       `json:"labels"`
	Props  map[string]any `json:"props,omitempty"`
}

// StoredEdge is one relationship of the graph, between two stored nodes.
type StoredEdge struct {
	ID    int64          `json:"id"`
	Type  string         `json:"type"`
	From  int64          `json:"from"`
	To    int64          `json:"to"`
	Props map[string]any `json:"props,omitempty"`
}

// graph is the persisted content of a data instance: its nodes and edges and the number of
// transactions committed into it (Memgraph's commit timestamp stand-in, which replication
// lag and failover candidate choice compare).
type graph struct {
	Nodes      []StoredNode `json:"nodes"`
	Edges      []StoredEdge `json:"edges,omitempty"`
	NextID     int64        `json:"next_id"`
	NextEdgeID int64        `json:"next_edge_id,omitempty"`
	Committed  uint64       `json:"committed"`
}

// Write is one write transaction: new nodes, and edges between them (From and To index
// Nodes).
type Write struct {
	Nodes []NodePattern
	Edges []EdgePattern
}

// EdgePattern is one "-[:TYPE {k: v}]->" of CREATE between two nodes of the same write.
type EdgePattern struct {
	Type     string
	Props    map[string]any
	From, To int
}

// Store is a data instance's graph, written through to one file in the data directory on
// every commit, so a restarted instance recovers it (--data-recovery-on-startup).
type Store struct {
	mu       sync.RWMutex
	dir      string
	path     string
	g        graph
	loaded   string
	replayed int
	// wal appends every commit to the write-ahead log (nil: --storage-wal-enabled=false);
	// epoch is what its records carry.
	wal   *walWriter
	epoch uint64
}

const storeFile = "sim-graph.json"

// StoreOptions say how a data instance's store starts.
type StoreOptions struct {
	// Recover loads the graph from the data directory (--data-recovery-on-startup).
	Recover bool
	// WAL writes the write-ahead log (--storage-wal-enabled); WALFileSize is the size in
	// bytes past which a WAL file is finalized (--storage-wal-file-size-kib).
	WAL         bool
	WALFileSize int64
}

// OpenStore opens the graph in dir without a write-ahead log; recover=false starts empty.
func OpenStore(dir string, recover bool) (*Store, error) {
	return OpenStoreWith(dir, StoreOptions{Recover: recover})
}

// OpenStoreWith opens the graph in dir. With Recover the current graph file wins; without
// one (a restore fills an empty data directory with durability files) the newest snapshot
// that reads whole is loaded and the WAL records after it replayed, as Memgraph recovers.
// Without Recover the graph starts empty, as Memgraph does when told not to recover, and
// the old durability files are moved aside into .old folders.
func OpenStoreWith(dir string, o StoreOptions) (*Store, error) {
	s := &Store{dir: dir, path: filepath.Join(dir, storeFile), g: graph{NextID: 0}}
	if o.Recover {
		switch err := readJSON(s.path, &s.g); {
		case errors.Is(err, fs.ErrNotExist):
			snap, ok, err := newestSnapshot(dir)
			if err != nil {
				return nil, err
			}
			if ok {
				s.g = snap.Graph
				s.loaded = snap.Name
			}
			if s.replayed, err = replayWAL(dir, &s.g); err != nil {
				return nil, err
			}
		case err != nil:
			return nil, err
		}
		s.g.normalize()
	} else if o.WAL {
		if err := moveToOld(dir); err != nil {
			return nil, err
		}
	}
	if o.WAL {
		w, err := newWALWriter(dir, o.WALFileSize)
		if err != nil {
			return nil, err
		}
		s.wal = w
	}
	return s, nil
}

// SetEpoch sets the epoch the next WAL records carry (a new one starts a new WAL file).
func (s *Store) SetEpoch(epoch uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.epoch = epoch
}

// Close finalizes the current WAL file.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.wal == nil {
		return nil
	}
	return s.wal.finalize()
}

// ReplayedWAL is how many WAL records the store replayed at open, after its snapshot.
func (s *Store) ReplayedWAL() int { return s.replayed }

// logLocked appends a transaction to the WAL, when there is one.
func (s *Store) logLocked(nodes []StoredNode, edges []StoredEdge) error {
	if s.wal == nil {
		return nil
	}
	return s.wal.append(WALRecord{Epoch: s.epoch, Prev: s.g.Committed, Committed: s.g.Committed + 1, Nodes: nodes, Edges: edges})
}

// normalize turns the JSON numbers of properties back into Go values.
func (g *graph) normalize() {
	for i := range g.Nodes {
		for k, v := range g.Nodes[i].Props {
			g.Nodes[i].Props[k] = fromJSONValue(v)
		}
	}
	for i := range g.Edges {
		for k, v := range g.Edges[i].Props {
			g.Edges[i].Props[k] = fromJSONValue(v)
		}
	}
}

// LoadedSnapshot is the snapshot file the store was recovered from at open ("" when it
// was the current state file or nothing).
func (s *Store) LoadedSnapshot() string { return s.loaded }

// Committed is the number of committed write transactions.
func (s *Store) Committed() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.g.Committed
}

// Count counts nodes carrying label ("" = all), plus the pending nodes of an open
// transaction.
func (s *Store) Count(label string, pending []NodePattern) int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var n int64
	for _, node := range s.g.Nodes {
		if hasLabel(node.Labels, label) {
			n++
		}
	}
	for _, p := range pending {
		if hasLabel(p.Labels, label) {
			n++
		}
	}
	return n
}

// CountEdges counts edges of type typ ("" = all), plus those of an open transaction.
func (s *Store) CountEdges(typ string, pending []EdgePattern) int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var n int64
	for _, e := range s.g.Edges {
		if typ == "" || e.Type == typ {
			n++
		}
	}
	for _, e := range pending {
		if typ == "" || e.Type == typ {
			n++
		}
	}
	return n
}

// Match returns the nodes carrying label ("" = all).
func (s *Store) Match(label string) []StoredNode {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []StoredNode
	for _, node := range s.g.Nodes {
		if hasLabel(node.Labels, label) {
			out = append(out, node)
		}
	}
	return out
}

func hasLabel(labels []string, label string) bool {
	if label == "" {
		return true
	}
	for _, l := range labels {
		if l == label {
			return true
		}
	}
	return false
}

// Commit applies one write transaction of nodes only; see CommitWrite.
func (s *Store) Commit(patterns []NodePattern) ([]StoredNode, uint64, error) {
	nodes, _, committed, err := s.CommitWrite(Write{Nodes: patterns})
	return nodes, committed, err
}

// CommitWrite applies one write transaction locally and returns the nodes and edges it
// created and the new commit count.
func (s *Store) CommitWrite(w Write) ([]StoredNode, []StoredEdge, uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	created := make([]StoredNode, 0, len(w.Nodes))
	for _, p := range w.Nodes {
		created = append(created, StoredNode{ID: s.g.NextID + int64(len(created)), Labels: p.Labels, Props: p.Props})
	}
	edges := make([]StoredEdge, 0, len(w.Edges))
	for _, e := range w.Edges {
		if e.From < 0 || e.From >= len(created) || e.To < 0 || e.To >= len(created) {
			return nil, nil, 0, fmt.Errorf("edge %q joins a node outside its transaction", e.Type)
		}
		edges = append(edges, StoredEdge{ID: s.g.NextEdgeID + int64(len(edges)), Type: e.Type,
			From: created[e.From].ID, To: created[e.To].ID, Props: e.Props})
	}
	next := s.g
	next.Nodes = append(append([]StoredNode(nil), s.g.Nodes...), created...)
	next.Edges = append(append([]StoredEdge(nil), s.g.Edges...), edges...)
	next.NextID += int64(len(created))
	next.NextEdgeID += int64(len(edges))
	next.Committed++
	if err := s.logLocked(created, edges); err != nil {
		return nil, nil, 0, err
	}
	if err := writeJSON(s.path, next); err != nil {
		return nil, nil, 0, err
	}
	s.g = next
	return created, edges, next.Committed, nil
}

// Append applies a transaction replicated from the MAIN when it follows directly on what
// this store holds (prev == Committed); ok=false asks the MAIN for a snapshot instead.
func (s *Store) Append(prev uint64, nodes []StoredNode, edges []StoredEdge) (committed uint64, ok bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if prev != s.g.Committed {
		return s.g.Committed, false, nil
	}
	next := s.g
	next.Nodes = append([]StoredNode(nil), s.g.Nodes...)
	next.Edges = append([]StoredEdge(nil), s.g.Edges...)
	next.apply(nodes, edges)
	if err := s.logLocked(nodes, edges); err != nil {
		return s.g.Committed, false, err
	}
	if err := writeJSON(s.path, next); err != nil {
		return s.g.Committed, false, err
	}
	s.g = next
	return next.Committed, true, nil
}

// Snapshot returns a copy of the whole graph.
func (s *Store) Snapshot() graph {
	s.mu.RLock()
	defer s.mu.RUnlock()
	g := s.g
	g.Nodes = append([]StoredNode(nil), s.g.Nodes...)
	g.Edges = append([]StoredEdge(nil), s.g.Edges...)
	return g
}

// Replace installs a snapshot sent by the MAIN (a replica that diverged or fell behind).
// With a WAL: a graph that extends what the store holds (the replica was only behind) is
// logged as one record of the commits it adds; one of another history (the replica
// diverged) makes the previous durability files go into .old folders and is written as
// the one snapshot, as Memgraph's replica does with the snapshot it receives, so a
// recovery from the files (snapshot, then WAL) never mixes two histories.
func (s *Store) Replace(g graph) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	g.normalize()
	if s.wal != nil {
		switch {
		case g.Committed == s.g.Committed && extends(s.g, g) && len(g.Nodes) == len(s.g.Nodes) && len(g.Edges) == len(s.g.Edges):
			return nil // nothing new
		case g.Committed > s.g.Committed && extends(s.g, g):
			if err := s.wal.append(WALRecord{Epoch: s.epoch, Prev: s.g.Committed, Committed: g.Committed,
				Nodes: g.Nodes[len(s.g.Nodes):], Edges: g.Edges[len(s.g.Edges):]}); err != nil {
				return err
			}
		default:
			if err := s.wal.finalize(); err != nil {
				return err
			}
			if err := moveToOld(s.dir); err != nil {
				return err
			}
			if _, err := writeSnapshot(s.dir, s.epoch, g, time.Now(), 0, true); err != nil {
				return err
			}
		}
	}
	if err := writeJSON(s.path, g); err != nil {
		return err
	}
	s.g = g
	return nil
}

// extends says whether next holds every node and edge of prev, the same, first: the same
// history, further on.
func extends(prev, next graph) bool {
	if next.Committed < prev.Committed || len(next.Nodes) < len(prev.Nodes) || len(next.Edges) < len(prev.Edges) {
		return false
	}
	return reflect.DeepEqual(prev.Nodes, next.Nodes[:len(prev.Nodes)]) && reflect.DeepEqual(prev.Edges, next.Edges[:len(prev.Edges)])
}

// snapshotForDurability is the graph as of now for CREATE SNAPSHOT, with the epoch it
// belongs to; the current WAL file is finalized with it, so the records after the
// snapshot start a file of their own.
func (s *Store) snapshotForDurability() (graph, uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.g
	g.Nodes = append([]StoredNode(nil), s.g.Nodes...)
	g.Edges = append([]StoredEdge(nil), s.g.Edges...)
	if s.wal != nil {
		if err := s.wal.finalize(); err != nil {
			return g, s.epoch, err
		}
	}
	return g, s.epoch, nil
}

// Stats are the figures SHOW STORAGE INFO reports.
func (s *Store) Stats() (vertices, edges int64, committed uint64) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return int64(len(s.g.Nodes)), int64(len(s.g.Edges)), s.g.Committed
}

// writeJSON replaces path atomically (temp file, fsync, rename) so a crash leaves either
// the old or the new content.
func writeJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// fromJSONValue turns json.Number back into int64 or float64, so property types survive a
// round trip through the file or the replication stream.
func fromJSONValue(v any) any {
	switch x := v.(type) {
	case json.Number:
		if !strings.ContainsAny(x.String(), ".eE") {
			if i, err := x.Int64(); err == nil {
				return i
			}
		}
		f, _ := x.Float64()
		return f
	case []any:
		for i := range x {
			x[i] = fromJSONValue(x[i])
		}
		return x
	case map[string]any:
		for k := range x {
			x[k] = fromJSONValue(x[k])
		}
		return x
	}
	return v
}
