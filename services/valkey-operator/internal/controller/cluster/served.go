package cluster

import (
	"cmp"
	"context"
	"slices"

	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// +kubebuilder:rbac:groups=valkey.io,resources=valkeynodes/status,verbs=patch

// servedShards numbers the shards that run in seed's table: a primary owning slots and
// its replicas are one shard. Each takes the shard index most of its members are named
// for (named maps a node id to its ValkeyNode's spec.shardIndex); between numbers with as
// many votes, the one most of its members showed before (prev, their status.shard: a
// failover does not renumber a shard), then the primary's own index. Every number is
// given once; a shard whose candidates are all taken gets the lowest free number. Shards
// are served in the order of their lowest slot when everything else is equal. It maps
// every member id of a running shard to the shard's number.
func servedShards(seed valkey.View, named, prev map[string]int32) map[string]int32 {
	type group struct {
		primary string
		members []string
		first   int // lowest slot
	}
	var groups []group
	for _, p := range seed.Primaries() {
		if p.SlotTotal() == 0 {
			continue
		}
		g := group{primary: p.ID, members: []string{p.ID}, first: p.Slots[0].Start}
		for _, s := range p.Slots {
			g.first = min(g.first, s.Start)
		}
		for _, r := range seed.ReplicasOf(p.ID) {
			g.members = append(g.members, r.ID)
		}
		groups = append(groups, g)
	}
	slices.SortFunc(groups, func(a, b group) int { return cmp.Compare(a.first, b.first) })

	type candidate struct {
		group, votes, before int
		own                  bool // the primary is named for it
		number               int32
	}
	var cands []candidate
	for gi, g := range groups {
		votes, before := map[int32]int{}, map[int32]int{}
		for _, id := range g.members {
			if n, ok := named[id]; ok {
				votes[n]++
			}
			if n, ok := prev[id]; ok {
				before[n]++
			}
		}
		for n, v := range votes {
			own := false
			if pn, ok := named[g.primary]; ok && pn == n {
				own = true
			}
			cands = append(cands, candidate{group: gi, votes: v, before: before[n], own: own, number: n})
		}
	}
	slices.SortFunc(cands, func(a, b candidate) int {
		if c := cmp.Compare(b.votes, a.votes); c != 0 {
			return c
		}
		if c := cmp.Compare(b.before, a.before); c != 0 {
			return c
		}
		if a.own != b.own {
			if a.own {
				return -1
			}
			return 1
		}
		if c := cmp.Compare(a.group, b.group); c != 0 {
			return c
		}
		return cmp.Compare(a.number, b.number)
	})
	numberOf := make([]int32, len(groups))
	assigned := make([]bool, len(groups))
	taken := map[int32]bool{}
	for _, c := range cands {
		if assigned[c.group] || taken[c.number] {
			continue
		}
		numberOf[c.group], assigned[c.group], taken[c.number] = c.number, true, true
	}
	next := int32(0)
	for gi := range groups {
		if assigned[gi] {
			continue
		}
		for taken[next] {
			next++
		}
		numberOf[gi], taken[next] = next, true
	}
	out := map[string]int32{}
	for gi, g := range groups {
		for _, id := range g.members {
			out[id] = numberOf[gi]
		}
	}
	return out
}

// reportServedShards writes status.shard of every ValkeyNode of set from the member table
// of the seed view: the shard it serves, or none. Without a seed (no member answered)
// nothing is written: the last known numbers stay. A node's id is the one its address
// answered with in snap, else the one its status reported.
func (p *pass) reportServedShards(ctx context.Context, snap valkey.Snapshot, set nodeSet) {
	seed, found := p.seedView(snap, set)
	if !found {
		return
	}
	all := append(append([]member(nil), set.desired...), set.removed...)
	idOf := make([]string, len(all))
	named, prev := map[string]int32{}, map[string]int32{}
	for i, m := range all {
		id := m.node.Status.ValkeyNodeID
		if v, ok := snap.View(m.addr); ok && m.addr != "" {
			if me, ok := v.Myself(); ok {
				id = me.ID
			}
		}
		idOf[i] = id
		if id != "" {
			named[id] = m.node.Spec.ShardIndex
			if m.node.Status.Shard != nil {
				prev[id] = *m.node.Status.Shard
			}
		}
	}
	served := servedShards(seed, named, prev)
	for i, m := range all {
		var want *int32
		if n, ok := served[idOf[i]]; ok && idOf[i] != "" {
			want = &n
		}
		have := m.node.Status.Shard
		if (have == nil && want == nil) || (have != nil && want != nil && *have == *want) {
			continue
		}
		before := m.node.DeepCopy()
		m.node.Status.Shard = want
		// A merge patch of this one field: the node controller's own status writes never
		// carry it, so neither overwrites the other.
		if err := p.ctl.client.Status().Patch(ctx, m.node, client.MergeFrom(before)); err != nil {
			log.FromContext(ctx).Info("Writing the served shard failed; the next pass writes it", "node", m.node.Name, "error", err.Error())
		}
	}
}
