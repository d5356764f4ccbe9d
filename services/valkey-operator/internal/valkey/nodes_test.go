package valkey

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

const (
	id1 = "9146236debb555c97c0ea47b41294ad3b84c215f"
	id2 = "bf2a7dcd3d46bfabd2e63c54fac63b916b8ffc32"
	id3 = "c57d880068a0a84d8a6b270cd542d77d1aa3253e"
	id4 = "b7cc410b6285bd6b9d1097c0163eca37d07d0d16"
)

// The testdata files are CLUSTER NODES captured from Debian's redis-server 7.0.15: four
// members, slot 100 half-moved from 17101 to 17102, 17104 replicating 17101, and (in
// nodes-fail.txt) 17103 killed.
func load(t *testing.T, file, addr string, verbatim bool) View {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	if verbatim {
		text = "txt:" + text
	}
	v, err := ParseNodes(addr, text)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestParseNodesCapturedOutput(t *testing.T) {
	v := load(t, "nodes-17101.txt", "127.0.0.1:17101", true)
	if len(v.Nodes) != 4 {
		t.Fatalf("nodes = %d, want 4", len(v.Nodes))
	}
	me, ok := v.Myself()
	if !ok || me.ID != id1 || me.Addr != "127.0.0.1:17101" || me.BusPort != 27101 || !me.Primary || me.ConfigEpoch != 1 {
		t.Fatalf("myself = %+v", me)
	}
	if !reflect.DeepEqual(me.Slots, []SlotRange{{0, 8000}}) || me.Migrating[100] != id2 {
		t.Fatalf("myself slots %v migrating %v", me.Slots, me.Migrating)
	}
	n2, _ := v.Node(id2)
	if !reflect.DeepEqual(n2.Slots, []SlotRange{{8001, 16000}, {16002, 16383}}) || n2.SlotTotal() != 8382 {
		t.Fatalf("node 2 slots %v", n2.Slots)
	}
	if got := v.ReplicasOf(id1); len(got) != 1 || got[0].ID != id4 || got[0].PrimaryID != id1 || !got[0].Replica {
		t.Fatalf("replicas of 1 = %+v", got)
	}
	if p := v.Primaries(); len(p) != 3 {
		t.Fatalf("primaries = %d, want 3", len(p))
	}
	owners := v.Owners()
	if owners[0] != id1 || owners[8001] != id2 || owners[16001] != "" || owners[16383] != id2 {
		t.Fatal("owners wrong")
	}
	if len(v.Failed()) != 0 {
		t.Fatal("no node should be failed")
	}
	if n, ok := v.ByAddr("127.0.0.1:17103"); !ok || n.ID != id3 || n.SlotTotal() != 0 {
		t.Fatalf("by addr = %+v", n)
	}
}

func TestParseNodesFailedAndImporting(t *testing.T) {
	f := load(t, "nodes-fail.txt", "127.0.0.1:17101", false)
	failed := f.Failed()
	if len(failed) != 1 || failed[0].ID != id3 || !failed[0].Fail || failed[0].Connected || failed[0].Healthy() {
		t.Fatalf("failed = %+v", failed)
	}
	if !failed[0].PongRecv.Equal(time.UnixMilli(1796089477264)) {
		t.Fatalf("pong_recv = %v", failed[0].PongRecv)
	}
	if n, _ := f.Node(id2); !n.PongRecv.Equal(time.UnixMilli(1796089498360)) {
		t.Fatalf("node 2 pong_recv = %v", n.PongRecv)
	}
	v2 := load(t, "nodes-17102.txt", "127.0.0.1:17102", true)
	me, _ := v2.Myself()
	if me.ID != id2 || me.Importing[100] != id1 {
		t.Fatalf("importing = %v", me.Importing)
	}
	s := Snapshot{Views: []View{load(t, "nodes-17101.txt", "127.0.0.1:17101", true), v2,
		load(t, "nodes-17104.txt", "127.0.0.1:17104", false)}}
	if got := s.Moves(); !reflect.DeepEqual(got, []SlotMove{{Slot: 100, From: id1, To: id2}}) {
		t.Fatalf("moves = %+v", got)
	}
	if !s.Agree() {
		t.Fatal("all three views name the same owners")
	}
	// Valkey 8.0 replicates CLUSTER SETSLOT to replicas, so a replica lists its primary's
	// slot states on its own line (nodes-17104-valkey8.txt, the shape valkey-server 8.0.1
	// prints): the move is still the primary's, not one from the replica.
	r8 := load(t, "nodes-17104-valkey8.txt", "127.0.0.1:17104", false)
	if me, _ := r8.Myself(); me.Migrating[100] != id2 || me.Primary {
		t.Fatalf("replica's mirrored slot state = %+v", me)
	}
	s8 := Snapshot{Views: []View{s.Views[0], s.Views[1], r8}}
	if got := s8.Moves(); !reflect.DeepEqual(got, []SlotMove{{Slot: 100, From: id1, To: id2}}) {
		t.Fatalf("moves with a Valkey 8 replica = %+v", got)
	}
	// One member that already took slot 100 disagrees with the rest.
	me.Slots = append(me.Slots, SlotRange{100, 100})
	v2.Nodes[0] = me
	for i, n := range v2.Nodes {
		if n.ID == id1 {
			v2.Nodes[i].Slots = []SlotRange{{0, 99}, {101, 8000}}
		}
	}
	s.Views[1] = v2
	if s.Agree() {
		t.Fatal("a member claiming slot 100 must break agreement")
	}
}

func TestParseNodesRejectsGarbage(t *testing.T) {
	for name, text := range map[string]string{
		"no myself":   id2 + " 127.0.0.1:1@2 master - 0 0 1 connected 0-5\n",
		"short line":  id1 + " 127.0.0.1:1@2 myself,master -\n",
		"bad slot":    id1 + " 127.0.0.1:1@2 myself,master - 0 0 1 connected 0-99999\n",
		"bad epoch":   id1 + " 127.0.0.1:1@2 myself,master - 0 0 x connected\n",
		"bad pong":    id1 + " 127.0.0.1:1@2 myself,master - 0 y 1 connected\n",
		"bad state":   id1 + " 127.0.0.1:1@2 myself,master - 0 0 1 connected [5-?-x]\n",
		"reversed":    id1 + " 127.0.0.1:1@2 myself,master - 0 0 1 connected 9-3\n",
		"bad busport": id1 + " 127.0.0.1:1@x myself,master - 0 0 1 connected\n",
	} {
		if _, err := ParseNodes("a", text); err == nil {
			t.Errorf("%s: parsed without error", name)
		}
	}
}

func TestParseInfoVerbatim(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "info.txt"))
	if err != nil {
		t.Fatal(err)
	}
	info := ParseInfo("txt:" + string(b))
	if info["cluster_state"] != "fail" || info["cluster_slots_assigned"] != "16383" || info["cluster_known_nodes"] != "4" {
		t.Fatalf("info = %v", info)
	}
	if StripVerbatim("txt:# Server") != "# Server" || StripVerbatim("plain") != "plain" {
		t.Fatal("StripVerbatim")
	}
}

func TestRangesAndHostname(t *testing.T) {
	if got := Ranges([]int{1, 2, 3, 7, 9, 10}); !reflect.DeepEqual(got, []SlotRange{{1, 3}, {7, 7}, {9, 10}}) {
		t.Fatalf("ranges = %v", got)
	}
	v, err := ParseNodes("a", id1+" 10.0.0.1:6379@16379,pod-0.svc myself,master - 0 0 3 connected 5\n")
	if err != nil {
		t.Fatal(err)
	}
	if me, _ := v.Myself(); me.Addr != "10.0.0.1:6379" || me.BusPort != 16379 || me.Hostname != "pod-0.svc" || me.Slots[0] != (SlotRange{5, 5}) {
		t.Fatalf("myself = %+v", me)
	}
	// An announced IP in the hostname slot (spec.networking.external), and a later aux field.
	v, err = ParseNodes("a", id1+" 10.0.0.1:6379@16379,127.4.0.1,x=y myself,master - 0 0 3 connected\n")
	if err != nil {
		t.Fatal(err)
	}
	if me, _ := v.Myself(); me.Addr != "10.0.0.1:6379" || me.Hostname != "127.4.0.1" {
		t.Fatalf("myself = %+v", me)
	}
}

// replication-*.txt are INFO replication captured from Debian's redis-server 7.0.15, a
// replica in sync with its primary after one write.
func TestParseReplicationAndClusterInfo(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	r := ParseReplication("txt:" + read("replication-replica.txt"))
	if !r.Replica() || !r.MasterLinkUp || r.SyncInProgress || r.Offset != 50 || r.MasterAddr != "127.0.0.1:17951" {
		t.Fatalf("replica = %+v", r)
	}
	p := ParseReplication(read("replication-primary.txt"))
	if p.Replica() || p.Role != "master" || p.MasterLinkUp || p.Offset != 50 || p.MasterAddr != "" {
		t.Fatalf("primary = %+v", p)
	}
	i := ClusterInfoFrom(ParseInfo(read("info.txt")))
	if i.OK() || i.State != "fail" || i.SlotsAssigned != 16383 || i.KnownNodes != 4 || i.CurrentEpoch == 0 {
		t.Fatalf("cluster info = %+v", i)
	}
	if (ClusterInfo{State: "ok"}).OK() != true || (ClusterInfo{}).OK() {
		t.Fatal("OK")
	}
}
