package backup

import (
	"errors"
	"testing"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
)

// fixture: shard A (slots 0-8191, primary pa, replicas ra1 ra2), shard B (8192-16383,
// primary pb, no replica). Each member's view lists every node; myself is its own line.
func fixture(mutate func(map[string]*member)) []member {
	nodes := []valkey.Node{
		{ID: "pa", Addr: "a:1", Primary: true, Connected: true, Slots: []valkey.SlotRange{{Start: 0, End: 8191}}},
		{ID: "ra1", Addr: "a:2", Replica: true, PrimaryID: "pa", Connected: true},
		{ID: "ra2", Addr: "a:3", Replica: true, PrimaryID: "pa", Connected: true},
		{ID: "pb", Addr: "b:1", Primary: true, Connected: true, Slots: []valkey.SlotRange{{Start: 8192, End: 16383}}},
	}
	repl := map[string]valkey.ReplicationState{
		"pa":  {Role: "master", Offset: 100},
		"ra1": {Role: "slave", MasterLinkUp: true, Offset: 90},
		"ra2": {Role: "slave", MasterLinkUp: true, Offset: 99},
		"pb":  {Role: "master", Offset: 50},
	}
	byID := map[string]*member{}
	var order []string
	for _, n := range nodes {
		v := valkey.View{Addr: n.Addr, Repl: repl[n.ID]}
		for _, o := range nodes {
			o.Myself = o.ID == n.ID
			if !o.Myself {
				o.Migrating, o.Importing = nil, nil
			}
			v.Nodes = append(v.Nodes, o)
		}
		byID[n.ID] = &member{Addr: n.Addr, View: v}
		order = append(order, n.ID)
	}
	if mutate != nil {
		mutate(byID)
	}
	out := make([]member, 0, len(order))
	for _, id := range order {
		out = append(out, *byID[id])
	}
	return out
}

func self(m *member) *valkey.Node {
	for i := range m.View.Nodes {
		if m.View.Nodes[i].Myself {
			return &m.View.Nodes[i]
		}
	}
	return nil
}

func TestPlanShards(t *testing.T) {
	for name, tc := range map[string]struct {
		mutate  func(map[string]*member)
		sources []string // per shard; "" with reason set
		primary []bool
		reason  string
	}{
		"the replica furthest along; the primary of a shard without": {
			sources: []string{"a:3", "b:1"}, primary: []bool{false, true},
		},
		"a replica whose link is down or still syncing is passed over": {
			mutate: func(m map[string]*member) {
				m["ra2"].View.Repl.MasterLinkUp = false
				m["ra1"].View.Repl.SyncInProgress = true
			},
			sources: []string{"a:1", "b:1"}, primary: []bool{true, true},
		},
		"an unreachable replica is passed over": {
			mutate:  func(m map[string]*member) { m["ra2"].Err = errors.New("refused") },
			sources: []string{"a:2", "b:1"}, primary: []bool{false, true},
		},
		"a slot migrating on any member waits": {
			mutate: func(m map[string]*member) { self(m["pb"]).Importing = map[int]string{3: "pa"} },
			reason: valkeyv1.BackupReasonReshardInProgress,
		},
		"a shard with no reachable member waits": {
			mutate: func(m map[string]*member) { m["pb"].Err = errors.New("refused") },
			reason: valkeyv1.BackupReasonClusterNotReady,
		},
		"unowned slots wait": {
			mutate: func(m map[string]*member) {
				for _, mm := range m {
					for i := range mm.View.Nodes {
						if mm.View.Nodes[i].ID == "pb" {
							mm.View.Nodes[i].Slots = []valkey.SlotRange{{Start: 8192, End: 16000}}
						}
					}
				}
			},
			reason: valkeyv1.BackupReasonClusterNotReady,
		},
		"nobody answers": {
			mutate: func(m map[string]*member) {
				for _, mm := range m {
					mm.Err = errors.New("refused")
				}
			},
			reason: valkeyv1.BackupReasonClusterNotReady,
		},
	} {
		t.Run(name, func(t *testing.T) {
			plans, why := planShards(fixture(tc.mutate))
			if tc.reason != "" {
				if why == nil || why.Reason != tc.reason {
					t.Fatalf("plans %+v, why %+v; want %s", plans, why, tc.reason)
				}
				return
			}
			if why != nil || len(plans) != len(tc.sources) {
				t.Fatalf("plans %+v, why %+v", plans, why)
			}
			for i, p := range plans {
				if p.Index != i || p.Source != tc.sources[i] || p.FromPrimary != tc.primary[i] {
					t.Errorf("shard %d: %+v, want source %s fromPrimary %v", i, p, tc.sources[i], tc.primary[i])
				}
			}
			if slotsString(plans[0].Slots) != "0-8191" || slotsString(plans[1].Slots) != "8192-16383" {
				t.Errorf("slots %v %v", plans[0].Slots, plans[1].Slots)
			}
		})
	}
}
