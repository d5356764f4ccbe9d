package planner

import "github.com/opsuite/suite/services/valkey-operator/internal/valkey"

// replicas attaches members that serve no shard to the primaries short of replicas,
// preferring a primary on another host.
func (st *state) replicas(primaries []primary) {
	have := map[string]int{}
	isPrimary := map[string]bool{}
	for _, p := range primaries {
		isPrimary[p.id] = true
	}
	owns := map[string]bool{}
	for _, id := range st.ownersIn(st.seed) {
		owns[id] = true
	}
	var free []Member
	for _, m := range st.ownShardFirst() {
		id := st.idOf[m.Addr]
		if isPrimary[id] || owns[id] || st.reset[m.Addr] {
			continue
		}
		v, _ := st.s.View(m.Addr)
		me, _ := v.Myself()
		if me.Replica && isPrimary[me.PrimaryID] && have[me.PrimaryID] < st.d.Replicas {
			have[me.PrimaryID]++
			if st.staleLink(v, me.PrimaryID) {
				// REPLICATE again re-points the link at the address its table now holds.
				st.add(Step{Op: Replicate, On: m.Addr, NodeID: me.PrimaryID})
			}
			continue
		}
		free = append(free, m)
	}
	// One seat per replica a primary lacks. Free members are matched to seats on other
	// hosts by augmenting paths (a greedy pick can strand the last member on its own
	// primary's host); members left over take any open seat.
	var seats []string
	for _, p := range primaries {
		for n := have[p.id]; n < st.d.Replicas; n++ {
			seats = append(seats, p.id)
		}
	}
	seatOf, holder := make([]int, len(free)), make([]int, len(seats))
	for i := range seatOf {
		seatOf[i] = -1
	}
	for j := range holder {
		holder[j] = -1
	}
	// Two rounds: seats of the member's own shard first, then any seat on another host.
	sameShard := true
	var try func(i int, seen []bool) bool
	try = func(i int, seen []bool) bool {
		for j, pid := range seats {
			if seen[j] || st.hostOf[pid] == free[i].Host {
				continue
			}
			if sameShard && (free[i].Shard == "" || st.shardOf[pid] != free[i].Shard) {
				continue
			}
			seen[j] = true
			if holder[j] < 0 || try(holder[j], seen) {
				holder[j], seatOf[i] = i, j
				return true
			}
		}
		return false
	}
	for i := range free {
		try(i, make([]bool, len(seats)))
	}
	sameShard = false
	for i := range free {
		if seatOf[i] < 0 {
			try(i, make([]bool, len(seats)))
		}
	}
	for i := range free {
		for j := range seats {
			if seatOf[i] < 0 && holder[j] < 0 {
				holder[j], seatOf[i] = i, j
			}
		}
	}
	for i, m := range free {
		if seatOf[i] < 0 {
			continue
		}
		pid := seats[seatOf[i]]
		v, _ := st.s.View(m.Addr)
		if me, _ := v.Myself(); me.PrimaryID == pid {
			continue
		}
		st.add(Step{Op: Replicate, On: m.Addr, NodeID: pid})
	}
}

// forget removes nodes that are not members, own no slots and are followed by no member,
// from every member that still lists them.
func (st *state) forget() {
	owns := map[string]bool{}
	for _, id := range st.ownersIn(st.seed) {
		owns[id] = true
	}
	followed := map[string]bool{}
	for _, m := range st.members {
		v, _ := st.s.View(m.Addr)
		if me, _ := v.Myself(); me.Replica {
			followed[me.PrimaryID] = true
		}
	}
	for _, m := range st.members {
		if st.reset[m.Addr] {
			continue
		}
		v, _ := st.s.View(m.Addr)
		for _, n := range v.Nodes {
			if n.Myself || n.Handshake || st.isMem[n.ID] || owns[n.ID] || followed[n.ID] {
				continue
			}
			st.add(Step{Op: Forget, On: m.Addr, NodeID: n.ID})
		}
	}
}

// staleLink: replica view v follows primary pid in its table, at the address pid answers
// at, but its replication link is down and dials another address. A replica restarted
// from nodes.conf dials its primary's address from before the restart; when every member
// came back on a new address, Redis 7.0 learns the primary's new address through gossip
// without re-pointing the link (Valkey 8 re-points it), so the shard would stay without
// an in-sync replica for good.
func (st *state) staleLink(v valkey.View, pid string) bool {
	r := v.Repl
	if !r.Replica() || r.MasterLinkUp || r.MasterAddr == "" {
		return false
	}
	p, ok := v.Node(pid)
	return ok && p.Addr != "" && !p.NoAddr && p.Addr == st.addrOf[pid] && p.Addr != r.MasterAddr
}
