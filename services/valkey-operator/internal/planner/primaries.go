package planner

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
)

type primary struct {
	id    string
	count int
	first int // lowest slot owned, SlotCount when none
}

// choosePrimaries keeps the members already owning slots (ordered by their lowest slot),
// drains owners beyond the shard count and non-members, and promotes empty primaries when
// shards are missing: by the members' shard hints first, then spread over hosts.
func (st *state) choosePrimaries() (primaries, draining []primary) {
	owners := st.ownersIn(st.seed)
	byID := map[string]*primary{}
	var all []*primary
	for s, id := range owners {
		if id == "" {
			continue
		}
		p, ok := byID[id]
		if !ok {
			p = &primary{id: id, first: s}
			byID[id] = p
			all = append(all, p)
		}
		p.count++
	}
	// Two owners sharing a shard id (a node reset soft keeps the one of the primary it
	// followed) are one shard to CLUSTER SHARDS, and clients mapping slots from it see only
	// one of them: the second is drained, and reset for a shard id of its own (below)
	// before it serves again.
	kept := map[string]bool{}
	for _, p := range all {
		sid := st.shardID[p.id]
		if st.isMem[p.id] && len(primaries) < st.d.Shards && (sid == "" || !kept[sid]) {
			primaries = append(primaries, *p)
			kept[sid] = true
		} else {
			draining = append(draining, *p)
		}
	}
	usedHost := map[string]bool{}
	for _, p := range primaries {
		usedHost[st.hostOf[p.id]] = true
	}
	var candidates []string
	for _, m := range st.members {
		id := st.idOf[m.Addr]
		v, _ := st.s.View(m.Addr)
		me, _ := v.Myself()
		if _, owns := byID[id]; owns || !me.Primary {
			continue
		}
		if sid := st.shardID[id]; sid != "" && kept[sid] {
			st.add(Step{Op: Reset, On: m.Addr})
			st.reset[m.Addr] = true
			continue
		}
		candidates = append(candidates, id)
	}
	// A shard (by hint) that has a primary needs no other.
	usedShard := map[string]bool{}
	for _, p := range primaries {
		if sh := st.shardOf[p.id]; sh != "" {
			usedShard[sh] = true
		}
	}
	for len(primaries) < st.d.Shards && len(candidates) > 0 {
		// The hints first: a shard without a primary yet, then its preferred member (index
		// 0), so a fresh cluster serves each shard from the member named for it and the
		// names say what runs. Hosts only break ties (a primary per machine survives a
		// machine loss): the scheduler already spread the pods, and a primary picked for
		// its host out of a shard that has one leaves another shard with none.
		pick, best := 0, -1
		for i, id := range candidates {
			score := 0
			if sh := st.shardOf[id]; sh != "" && !usedShard[sh] {
				score += 4
			}
			if st.preferPrimary[id] {
				score += 2
			}
			if !usedHost[st.hostOf[id]] {
				score++
			}
			if score > best {
				pick, best = i, score
			}
		}
		id := candidates[pick]
		candidates = append(candidates[:pick], candidates[pick+1:]...)
		usedHost[st.hostOf[id]] = true
		if sh := st.shardOf[id]; sh != "" {
			usedShard[sh] = true
		}
		primaries = append(primaries, primary{id: id, first: valkey.SlotCount})
	}
	if len(byID) == 0 {
		// A fresh cluster: the slots go out in the primaries' order, so shard 0 serves the
		// first range, shard 1 the next, as the names read.
		slices.SortStableFunc(primaries, func(a, b primary) int { return compareShards(st.shardOf[a.id], st.shardOf[b.id]) })
	}
	if len(primaries) < st.d.Shards {
		st.resetSpareReplicas(primaries, byID, st.d.Shards-len(primaries))
	}
	if len(primaries) < st.d.Shards {
		st.plan.Wait = fmt.Sprintf("%d shards wanted, only %d members can be primaries", st.d.Shards, len(primaries))
	}
	return primaries, draining
}

// compareShards orders shard hints by number ("2" before "10"), hints that are not
// numbers after them by text, and no hint last.
func compareShards(a, b string) int {
	if (a == "") != (b == "") {
		if a == "" {
			return 1
		}
		return -1
	}
	x, errA := strconv.Atoi(a)
	y, errB := strconv.Atoi(b)
	switch {
	case errA == nil && errB == nil:
		return cmp.Compare(x, y)
	case errA == nil:
		return -1
	case errB == nil:
		return 1
	}
	return strings.Compare(a, b)
}

// resetSpareReplicas frees up to want member replicas that follow no kept primary, or are
// beyond the replica count of theirs, so they can become primaries.
func (st *state) resetSpareReplicas(primaries []primary, owners map[string]*primary, want int) {
	kept := map[string]int{}
	for _, p := range primaries {
		kept[p.id] = 0
	}
	for _, m := range st.ownShardFirst() {
		if want == 0 {
			return
		}
		v, _ := st.s.View(m.Addr)
		me, _ := v.Myself()
		if !me.Replica || owners[me.ID] != nil || st.reset[m.Addr] {
			continue
		}
		if n, ok := kept[me.PrimaryID]; ok && n < st.d.Replicas {
			kept[me.PrimaryID]++
			continue
		}
		st.add(Step{Op: Reset, On: m.Addr})
		st.reset[m.Addr] = true
		want--
	}
}

// ownShardFirst is the members with those following a primary of their own shard (by
// hint) first: a shard keeps its own replicas, and the ones freed or moved are those
// serving another shard (say a removed shard's members that followed the primary taking
// its last slots, back when the scale-in is undone).
func (st *state) ownShardFirst() []Member {
	own := func(m Member) bool {
		v, _ := st.s.View(m.Addr)
		me, _ := v.Myself()
		return me.Replica && m.Shard != "" && st.shardOf[me.PrimaryID] == m.Shard
	}
	out := slices.Clone(st.members)
	slices.SortStableFunc(out, func(a, b Member) int {
		switch oa, ob := own(a), own(b); {
		case oa == ob:
			return 0
		case oa:
			return -1
		}
		return 1
	})
	return out
}

func quota(i, n int) int {
	q := valkey.SlotCount / n
	if i < valkey.SlotCount%n {
		q++
	}
	return q
}

// assignUnowned gives every unassigned slot, in contiguous runs, to the primaries furthest
// below their even share; it reports whether there were any.
func (st *state) assignUnowned(primaries []primary) bool {
	if len(primaries) == 0 {
		return false
	}
	owners := st.ownersIn(st.seed)
	counts := make([]int, len(primaries))
	for i, p := range primaries {
		counts[i] = p.count
	}
	got := make([][]int, len(primaries))
	cur := -1
	for s, id := range owners {
		if id != "" {
			cur = -1
			continue
		}
		if cur < 0 || counts[cur] >= quota(cur, len(primaries)) {
			cur = 0
			for i := range primaries {
				if quota(i, len(primaries))-counts[i] > quota(cur, len(primaries))-counts[cur] {
					cur = i
				}
			}
		}
		got[cur] = append(got[cur], s)
		counts[cur]++
	}
	any := false
	for i, slots := range got {
		if len(slots) > 0 {
			any = true
			st.add(Step{Op: AddSlots, On: st.addrOf[primaries[i].id], NodeID: primaries[i].id, Ranges: valkey.Ranges(slots)})
		}
	}
	return any
}

// rebalance moves one batch of slots: from a draining owner first, else from the fullest
// primary to the emptiest, until every primary holds floor or ceil of 16384/shards.
func (st *state) rebalance(primaries, draining []primary) {
	n := len(primaries)
	if n == 0 {
		return
	}
	floor, ceil := valkey.SlotCount/n, (valkey.SlotCount+n-1)/n
	lo, hi := 0, 0
	for i, p := range primaries {
		if p.count < primaries[lo].count {
			lo = i
		}
		if p.count > primaries[hi].count {
			hi = i
		}
	}
	var donor primary
	var count int
	switch {
	case len(draining) > 0:
		donor = draining[0]
		count = min(donor.count, max(ceil-primaries[lo].count, 1))
	case primaries[hi].count > ceil || primaries[lo].count < floor:
		donor = primaries[hi]
		excess := donor.count - ceil
		if primaries[lo].count < floor {
			excess = donor.count - floor
		}
		deficit := floor - primaries[lo].count
		if donor.count > ceil {
			deficit = ceil - primaries[lo].count
		}
		count = min(excess, deficit)
	default:
		return
	}
	count = min(count, st.d.MoveBatch)
	if count <= 0 || donor.id == primaries[lo].id {
		return
	}
	to := primaries[lo].id
	fromV, ok := st.view(donor.id)
	if !ok {
		st.plan.Wait = fmt.Sprintf("node %s owns slots but was not observed", donor.id)
		return
	}
	toV, _ := st.view(to)
	owners := st.ownersIn(st.seed)
	var head, tail []Step
	// The donor's highest slots go, so both sides keep contiguous ranges.
	for s := valkey.SlotCount - 1; s >= 0 && count > 0; s-- {
		if owners[s] != donor.id {
			continue
		}
		count--
		h, t := st.moveSteps(s, donor.id, to, fromV, toV)
		head, tail = append(head, h...), append(tail, t...)
	}
	if why := clusterDown(fromV, toV, tail); why != "" {
		st.plan.Wait = why
		return
	}
	for _, s := range st.ordered(append(head, tail...)) {
		s.Drain = len(draining) > 0
		st.add(s)
	}
}
