package backup

import (
	"testing"

	"github.com/opsuite/suite/services/memgraph-operator/internal/snapshot"
)

// TestNewSnapshot: the file CREATE SNAPSHOT names when the agent lists it; else the newest
// snapshot that was not there before (a Memgraph that answers without a path); never a
// WAL file or an older snapshot; an error when nothing new appeared.
func TestNewSnapshot(t *testing.T) {
	old := snapshot.File{Name: "snapshots/20261205000000000001_timestamp_5"}
	a := snapshot.File{Name: "snapshots/20261205000000000009_timestamp_9", Size: 10}
	b := snapshot.File{Name: "snapshots/20261205000000000010_timestamp_9", Size: 11}
	wal := snapshot.File{Name: "wal/20261205000000000011_current"}
	for name, tc := range map[string]struct {
		rows          []map[string]any
		before, after []snapshot.File
		want          string
	}{
		"named":                {rows: []map[string]any{{"path": "/var/lib/memgraph/snapshots/" + "20261205000000000009_timestamp_9"}}, before: []snapshot.File{old}, after: []snapshot.File{old, a, b}, want: a.Name},
		"named but not listed": {rows: []map[string]any{{"path": "/elsewhere/x_timestamp_1"}}, before: []snapshot.File{old}, after: []snapshot.File{old, a}, want: a.Name},
		"no path, newest new":  {before: []snapshot.File{old}, after: []snapshot.File{old, a, b, wal}, want: b.Name},
		"nothing new":          {before: []snapshot.File{old, a}, after: []snapshot.File{old, a, wal}},
	} {
		got, err := newSnapshot(tc.rows, tc.before, tc.after)
		if tc.want == "" {
			if err == nil {
				t.Errorf("%s: chose %s, want an error", name, got.Name)
			}
			continue
		}
		if err != nil || got.Name != tc.want {
			t.Errorf("%s: %s, %v; want %s", name, got.Name, err, tc.want)
		}
	}
}
