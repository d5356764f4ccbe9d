package backup

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
)

// member is one member as it answered: its own CLUSTER NODES and INFO replication.
type member struct {
	Addr string
	View valkey.View
	Err  error
}

func (m member) self() (valkey.Node, bool) {
	if m.Err != nil {
		return valkey.Node{}, false
	}
	return m.View.Myself()
}

// shardPlan is where one shard's snapshot is read from.
type shardPlan struct {
	Index     int
	Slots     []valkey.SlotRange
	PrimaryID string
	// Source is the member's address; FromPrimary when no in-sync replica could serve.
	Source      string
	FromPrimary bool
}

// notReady says why no backup can start now: a condition reason and a stable message.
type notReady struct {
	Reason, Message string
}

// planShards picks, per shard (in slot order), the member to read: the in-sync replica
// furthest along, else the primary. It refuses while slots migrate (an RDB taken mid-move
// holds the slot's keys split over two shards), while slots are unowned, and when a
// shard has no reachable member.
func planShards(members []member) ([]shardPlan, *notReady) {
	var reachable []member
	for _, m := range members {
		if _, ok := m.self(); ok {
			reachable = append(reachable, m)
		}
	}
	if len(reachable) == 0 {
		return nil, &notReady{valkeyv1.BackupReasonClusterNotReady, "no member of the cluster answered; the backup starts once they do"}
	}
	for _, m := range reachable {
		me, _ := m.self()
		if len(me.Migrating) > 0 || len(me.Importing) > 0 {
			return nil, &notReady{valkeyv1.BackupReasonReshardInProgress, "slots are moving between shards; the backup starts once the reshard has finished"}
		}
	}
	// The slot map as a primary sees it (a replica's may lag behind a failover).
	slices.SortStableFunc(reachable, func(a, b member) int {
		ma, _ := a.self()
		mb, _ := b.self()
		if ma.Primary != mb.Primary {
			if ma.Primary {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Addr, b.Addr)
	})
	view := reachable[0].View
	byID := map[string]member{}
	for _, m := range reachable {
		me, _ := m.self()
		byID[me.ID] = m
	}
	var primaries []valkey.Node
	total := 0
	for _, n := range view.Primaries() {
		if len(n.Slots) > 0 {
			primaries = append(primaries, n)
			total += n.SlotTotal()
		}
	}
	if total != valkey.SlotCount {
		return nil, &notReady{valkeyv1.BackupReasonClusterNotReady, "not every slot is served by a primary; the backup starts once all are"}
	}
	slices.SortFunc(primaries, func(a, b valkey.Node) int { return cmp.Compare(a.Slots[0].Start, b.Slots[0].Start) })
	out := make([]shardPlan, 0, len(primaries))
	for i, p := range primaries {
		plan := shardPlan{Index: i, Slots: p.Slots, PrimaryID: p.ID}
		var best *member
		for _, m := range reachable {
			me, _ := m.self()
			r := m.View.Repl
			if !me.Replica || me.PrimaryID != p.ID || !r.Replica() || !r.MasterLinkUp || r.SyncInProgress {
				continue
			}
			if best == nil || r.Offset > best.View.Repl.Offset {
				best = &m
			}
		}
		switch {
		case best != nil:
			plan.Source = best.Addr
		default:
			pm, ok := byID[p.ID]
			if !ok {
				return nil, &notReady{valkeyv1.BackupReasonClusterNotReady, fmt.Sprintf("shard %d has no reachable member; the backup starts once one answers", i)}
			}
			plan.Source, plan.FromPrimary = pm.Addr, true
		}
		out = append(out, plan)
	}
	return out, nil
}

// observe reads every member's CLUSTER NODES and INFO replication.
func observe(ctx context.Context, dial func(string, valkey.Options) (valkey.Conn, error), addrs []string, o valkey.Options) []member {
	out := make([]member, 0, len(addrs))
	for _, a := range addrs {
		m := member{Addr: a}
		c, err := dial(a, o)
		if err != nil {
			m.Err = err
			out = append(out, m)
			continue
		}
		m.View, m.Err = c.ClusterNodes(ctx)
		if m.Err == nil {
			m.View.Repl, m.Err = c.ReplicationState(ctx)
		}
		c.Close()
		out = append(out, m)
	}
	return out
}

func slotsString(r []valkey.SlotRange) string {
	s := make([]string, len(r))
	for i, x := range r {
		s[i] = x.String()
	}
	return strings.Join(s, ",")
}
