package cluster

import (
	"maps"
	"testing"

	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
)

// TestServedShards numbers running shards by the names of their members.
func TestServedShards(t *testing.T) {
	primary := func(id string, lo, hi int) valkey.Node {
		return valkey.Node{ID: id, Primary: true, Slots: []valkey.SlotRange{{Start: lo, End: hi}}}
	}
	replica := func(id, of string) valkey.Node { return valkey.Node{ID: id, Replica: true, PrimaryID: of} }
	cases := []struct {
		name  string
		nodes []valkey.Node
		named map[string]int32
		prev  map[string]int32
		want  map[string]int32
	}{
		{
			name: "fresh: every shard from its own names",
			nodes: []valkey.Node{primary("a0", 0, 5461), replica("a1", "a0"), primary("b0", 5462, 10922), replica("b1", "b0"),
				primary("c0", 10923, 16383), replica("c1", "c0")},
			named: map[string]int32{"a0": 0, "a1": 0, "b0": 1, "b1": 1, "c0": 2, "c1": 2},
			want:  map[string]int32{"a0": 0, "a1": 0, "b0": 1, "b1": 1, "c0": 2, "c1": 2},
		},
		{
			name: "after a failover the replica serves its shard as primary",
			nodes: []valkey.Node{replica("a0", "a1"), primary("a1", 0, 5461), primary("b0", 5462, 10922), replica("b1", "b0"),
				primary("c0", 10923, 16383), replica("c1", "c0")},
			named: map[string]int32{"a0": 0, "a1": 0, "b0": 1, "b1": 1, "c0": 2, "c1": 2},
			want:  map[string]int32{"a0": 0, "a1": 0, "b0": 1, "b1": 1, "c0": 2, "c1": 2},
		},
		{
			// The demo's formation: <c>-0-0 and <c>-0-1 both primaries, <c>-2-0 and <c>-2-1
			// replicas of them. One shard keeps 0; the one served by <c>-0-1 with <c>-2-0 as
			// replica is shard 2 (its replica's name), not a second shard 0.
			name: "two primaries named for one shard",
			nodes: []valkey.Node{primary("00", 0, 5461), replica("21", "00"), primary("01", 10923, 16383), replica("20", "01"),
				primary("10", 5462, 10922), replica("11", "10")},
			named: map[string]int32{"00": 0, "01": 0, "10": 1, "11": 1, "20": 2, "21": 2},
			want:  map[string]int32{"00": 0, "21": 0, "10": 1, "11": 1, "01": 2, "20": 2},
		},
		{
			// <c>-2-1 replicated <c>-0-0 and then took over: each shard has one member named
			// 0 and one named 2, and each keeps the number it showed.
			name:  "a cross-shard failover renumbers nothing",
			nodes: []valkey.Node{replica("00", "21"), primary("21", 0, 5461), primary("20", 10923, 16383), replica("01", "20"), primary("10", 5462, 10922), replica("11", "10")},
			named: map[string]int32{"00": 0, "01": 0, "10": 1, "11": 1, "20": 2, "21": 2},
			prev:  map[string]int32{"00": 0, "21": 0, "10": 1, "11": 1, "20": 2, "01": 2},
			want:  map[string]int32{"00": 0, "21": 0, "10": 1, "11": 1, "20": 2, "01": 2},
		},
		{
			name:  "empty primaries and unknown nodes serve nothing; a shard without names gets a free number",
			nodes: []valkey.Node{primary("x", 0, 16383), replica("y", "x"), {ID: "new", Primary: true}, replica("z", "new")},
			named: map[string]int32{"new": 0, "z": 0},
			want:  map[string]int32{"x": 0, "y": 0},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := servedShards(valkey.View{Nodes: tc.nodes}, tc.named, tc.prev)
			if !maps.Equal(got, tc.want) {
				t.Errorf("servedShards = %v, want %v", got, tc.want)
			}
		})
	}
}
