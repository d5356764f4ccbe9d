package memgraphsim

import (
	"bytes"
	"encoding/json"
	"io"
	"reflect"
	"testing"

	"github.com/hashicorp/raft"
)

// memSink is a raft.SnapshotSink over a buffer.
type memSink struct{ bytes.Buffer }

func (*memSink) ID() string              { return "test" }
func (*memSink) Cancel() error           { return nil }
func (*memSink) Close() error            { return nil }
func (s *memSink) Reader() io.ReadCloser { return io.NopCloser(bytes.NewReader(s.Bytes())) }

func TestFSMTransitionsAndSnapshot(t *testing.T) {
	f := newFSM()
	apply := func(c fsmCommand) {
		b, _ := json.Marshal(c)
		if r := f.Apply(&raft.Log{Data: b}); r != nil {
			t.Fatalf("apply %+v: %v", c, r)
		}
	}
	apply(fsmCommand{Op: "coord_meta", ID: 1, Coord: coordMeta{BoltServer: "c1:7687", CoordinatorServer: "c1:12000", ManagementServer: "c1:10000"}})
	apply(fsmCommand{Op: "coord_meta", ID: 2, Coord: coordMeta{BoltServer: "c2:7687"}})
	apply(fsmCommand{Op: "coord_remove", ID: 2})
	for _, n := range []string{"a", "b", "c"} {
		apply(fsmCommand{Op: "register", Instance: dataMeta{Name: n, Mode: "sync"}})
	}
	apply(fsmCommand{Op: "register", Instance: dataMeta{Name: "a", Mode: "async"}}) // duplicate: ignored
	apply(fsmCommand{Op: "set_main", Name: "a", Epoch: 1})
	apply(fsmCommand{Op: "demote", Name: "b"}) // not the MAIN: no change
	apply(fsmCommand{Op: "set_main", Name: "b", Epoch: 2})
	apply(fsmCommand{Op: "unregister", Name: "b"}) // the MAIN goes with it
	st := f.state()
	want := clusterState{
		Coordinators: map[string]coordMeta{"1": {BoltServer: "c1:7687", CoordinatorServer: "c1:12000", ManagementServer: "c1:10000"}},
		Instances:    []dataMeta{{Name: "a", Mode: "sync"}, {Name: "c", Mode: "sync"}},
		Main:         "", Epoch: 2,
	}
	if !reflect.DeepEqual(st, want) {
		t.Fatalf("state %+v\nwant  %+v", st, want)
	}

	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	restored := newFSM()
	if err := restored.Restore(sink.Reader()); err != nil {
		t.Fatal(err)
	}
	if got := restored.state(); !reflect.DeepEqual(got, want) {
		t.Fatalf("restored %+v\nwant     %+v", got, want)
	}
}
