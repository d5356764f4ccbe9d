package cluster

import (
	"fmt"
	"strings"
	"testing"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// rollFixture is a 3x1 cluster: member <shard>-<index> at address a<shard><index>, with
// the roles given as "primary" or the name of the primary followed.
func rollFixture(roles map[string]string) (nodeSet, valkey.Snapshot) {
	var set nodeSet
	var snap valkey.Snapshot
	for shard := range 3 {
		for index := range 2 {
			name := fmt.Sprintf("%d-%d", shard, index)
			n := &valkeyv1.ValkeyNode{ObjectMeta: metav1.ObjectMeta{Name: "demo-" + name},
				Spec: valkeyv1.ValkeyNodeSpec{ShardIndex: int32(shard), NodeIndex: int32(index)}}
			set.desired = append(set.desired, member{node: n, addr: "a" + name})
			me := valkey.Node{ID: "id" + name, Myself: true, Connected: true}
			v := valkey.View{Addr: "a" + name}
			if roles[name] == "primary" {
				me.Primary = true
				me.Slots = []valkey.SlotRange{{Start: shard * 5000, End: shard*5000 + 99}}
				v.Repl = valkey.ReplicationState{Role: "master"}
			} else {
				me.Replica, me.PrimaryID = true, "id"+roles[name]
				v.Repl = valkey.ReplicationState{Role: "slave", MasterLinkUp: true}
			}
			v.Nodes = []valkey.Node{me}
			snap.Views = append(snap.Views, v)
		}
	}
	return set, snap
}

func roleIn(snap valkey.Snapshot) func(member) (valkey.Node, bool) {
	return func(m member) (valkey.Node, bool) {
		v, ok := snap.View(m.addr)
		if !ok {
			return valkey.Node{}, false
		}
		return v.Myself()
	}
}

func names(ms []member) string {
	var out []string
	for _, m := range ms {
		out = append(out, strings.TrimPrefix(m.node.Name, "demo-"))
	}
	return strings.Join(out, " ")
}

// TestRollOrderShardByShard: every shard is finished (its replicas, then its primary)
// before the next starts, by the shard each member serves, not its name's index.
func TestRollOrderShardByShard(t *testing.T) {
	cases := []struct {
		name  string
		roles map[string]string
		want  string
	}{
		{
			name:  "fresh formation",
			roles: map[string]string{"0-0": "primary", "0-1": "0-0", "1-0": "primary", "1-1": "1-0", "2-0": "primary", "2-1": "2-0"},
			want:  "0-1 0-0 1-1 1-0 2-1 2-0",
		},
		{
			name:  "after failovers the live roles order each shard",
			roles: map[string]string{"0-0": "0-1", "0-1": "primary", "1-0": "primary", "1-1": "1-0", "2-0": "2-1", "2-1": "primary"},
			want:  "0-0 0-1 1-1 1-0 2-0 2-1",
		},
		{
			// 2-1 follows shard 1's primary: it is rolled with shard 1, before shard 2's
			// primary 2-0.
			name:  "a replica serving another shard goes with that shard",
			roles: map[string]string{"0-0": "primary", "0-1": "0-0", "1-0": "primary", "1-1": "1-0", "2-0": "primary", "2-1": "1-0"},
			want:  "0-1 0-0 1-1 2-1 1-0 2-0",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			set, snap := rollFixture(tc.roles)
			// Outdated in reverse name order, so the order is the function's, not the input's.
			var outdated []member
			for i := len(set.desired) - 1; i >= 0; i-- {
				outdated = append(outdated, set.desired[i])
			}
			if got := names(rollOrder(outdated, roleIn(snap), set)); got != tc.want {
				t.Errorf("roll order %q, want %q", got, tc.want)
			}
		})
	}
}

// TestSyncingReplicaHoldsTheRoll: a replica whose link is down or whose full sync runs is
// named, so the roll waits for it; replicas in sync and primaries are not.
func TestSyncingReplicaHoldsTheRoll(t *testing.T) {
	roles := map[string]string{"0-0": "primary", "0-1": "0-0", "1-0": "primary", "1-1": "1-0", "2-0": "primary", "2-1": "2-0"}
	p := &pass{}
	set, snap := rollFixture(roles)
	if got := p.syncing(snap, set); got != "" {
		t.Errorf("every replica in sync: syncing = %q, want none", got)
	}
	for _, tc := range []struct {
		name string
		repl valkey.ReplicationState
	}{
		{"link down", valkey.ReplicationState{Role: "slave"}},
		{"full sync running", valkey.ReplicationState{Role: "slave", MasterLinkUp: true, SyncInProgress: true}},
	} {
		set, snap := rollFixture(roles)
		snap.Views[3].Repl = tc.repl // 1-1
		if got := p.syncing(snap, set); got != "demo-1-1" {
			t.Errorf("%s: syncing = %q, want demo-1-1", tc.name, got)
		}
		// Nor is it a failover target for its primary.
		primary, _ := snap.Views[2].Myself()
		if m, ok := p.failoverTarget(snap, set, primary); ok {
			t.Errorf("%s: failoverTarget = %s, want none", tc.name, m.node.Name)
		}
	}
}
