package memgraphsim

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestInvariantLogReader(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	// Written out of order, as several processes appending to one file may.
	events := []Event{
		{TS: at(0), Instance: "coordinator_1", Role: RoleLeader, Term: 2},
		{TS: at(20), Instance: "i0", Role: RoleMain, Epoch: 1, Writable: true},
		{TS: at(10), Instance: "i1", Role: RoleReplica},
		{TS: at(100), Instance: "i0", Role: RoleDown, ObservedBy: "coordinator_1"},
		{TS: at(130), Instance: "i1", Role: RoleMain, Epoch: 2, Writable: true},
		{TS: at(200), Instance: "i0", Role: RoleMain, Epoch: 1}, // restored, not writable
		{TS: at(210), Instance: "i0", Role: RoleReplica, Epoch: 2},
		{TS: at(300), Instance: "i1", Role: RoleReplica, Epoch: 2}, // DEMOTE
	}
	path := filepath.Join(t.TempDir(), "log.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		b, _ := json.Marshal(e)
		_, _ = f.Write(append(b, '\n'))
	}
	_ = f.Close()

	read, err := ReadInvariantLog(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(read) != len(events) || !read[1].TS.Equal(at(10)) {
		t.Fatalf("read %v, want %d events sorted by time", read, len(events))
	}
	if m := MaxMains(read); m != 1 {
		t.Fatalf("MaxMains = %d, want 1 (a restored MAIN that is not writable does not count)", m)
	}
	windows := MainlessWindows(read, at(400))
	want := []Window{{From: at(100), To: at(130)}, {From: at(300), To: at(400)}}
	if len(windows) != len(want) || windows[0] != want[0] || windows[1] != want[1] {
		t.Fatalf("MAIN-less windows %v, want %v", windows, want)
	}
	if windows[0].Duration() != 30*time.Millisecond {
		t.Fatalf("first window lasts %s", windows[0].Duration())
	}
	// Two writable MAINs at once are counted.
	two := append(read, Event{TS: at(500), Instance: "i0", Role: RoleMain, Epoch: 3, Writable: true},
		Event{TS: at(501), Instance: "i1", Role: RoleMain, Epoch: 3, Writable: true})
	if m := MaxMains(two); m != 2 {
		t.Fatalf("MaxMains = %d, want 2", m)
	}
	if l := Timeline(read)[0].Leaders; len(l) != 1 || l[0] != "coordinator_1" {
		t.Fatalf("leaders %v", l)
	}
}
