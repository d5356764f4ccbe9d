package memgraphsim

import (
	"reflect"
	"testing"
)

func TestStorePersistsAndReplicates(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenStore(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	created, committed, err := s.Commit([]NodePattern{
		{Labels: []string{"Person"}, Props: map[string]any{"name": "ann", "age": int64(42), "score": 1.5, "tags": []any{"a", int64(1)}}},
		{Labels: []string{"City"}},
	})
	if err != nil || committed != 1 || len(created) != 2 || created[1].ID != 1 {
		t.Fatalf("commit: %v %d %v", err, committed, created)
	}

	again, err := OpenStore(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	if again.Committed() != 1 || again.Count("Person", nil) != 1 || again.Count("", nil) != 2 {
		t.Fatalf("reopened store: committed %d, %d Person, %d nodes", again.Committed(), again.Count("Person", nil), again.Count("", nil))
	}
	// Property types survive the file.
	if got := again.Match("Person")[0].Props; !reflect.DeepEqual(got, created[0].Props) {
		t.Fatalf("props after reopening %#v, want %#v", got, created[0].Props)
	}
	if fresh, _ := OpenStore(dir, false); fresh.Committed() != 0 || fresh.Count("", nil) != 0 {
		t.Fatal("--data-recovery-on-startup=false recovered the graph")
	}

	// A replica appends what follows on its own history and asks for a snapshot otherwise.
	replica, _ := OpenStore(t.TempDir(), true)
	if _, ok, _ := replica.Append(1, created, nil); ok {
		t.Fatal("a replica at 0 appended a transaction that follows 1")
	}
	if err := replica.Replace(s.Snapshot()); err != nil {
		t.Fatal(err)
	}
	next := []StoredNode{{ID: 2, Labels: []string{"Person"}}}
	if c, ok, err := replica.Append(1, next, nil); err != nil || !ok || c != 2 {
		t.Fatalf("append after the snapshot: %d %v %v", c, ok, err)
	}
	if replica.Count("Person", []NodePattern{{Labels: []string{"Person"}}}) != 3 {
		t.Fatal("count with a pending node in an open transaction")
	}
}
