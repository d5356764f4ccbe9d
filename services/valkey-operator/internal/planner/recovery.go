package planner

import (
	"fmt"
	"sort"

	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
)

// failingPrimaries finds primaries that own slots, do not answer as themselves and are
// marked fail or fail? by every member view listing them. While one exists nothing else is
// planned (a replica re-pointed now would be the one the cluster promotes); once it has
// failed for Desired.TakeoverAfter with its replicas still replicas, the cluster cannot
// elect one (quorum lost) and the replica with the highest replication offset takes over.
// It reports whether planning stops here.
func (st *state) failingPrimaries() bool {
	observed := map[string]bool{}
	for _, v := range st.s.Views {
		if me, ok := v.Myself(); ok {
			observed[me.ID] = true
		}
	}
	type suspect struct {
		addr    string
		slots   int
		failing bool
	}
	suspects := map[string]*suspect{}
	var ids []string
	for _, m := range st.members {
		v, ok := st.s.View(m.Addr)
		if !ok {
			continue
		}
		for _, n := range v.Nodes {
			if n.Myself || n.Handshake || observed[n.ID] {
				continue
			}
			sp := suspects[n.ID]
			if sp == nil {
				sp = &suspect{addr: n.Addr, failing: true}
				suspects[n.ID] = sp
				ids = append(ids, n.ID)
			}
			sp.slots = max(sp.slots, n.SlotTotal())
			// Nobody answers as this id: failing once a member flags it, or lost its link
			// to it, or marked it noaddr (a new node took its address; a noaddr node is
			// never pinged, so it would never be flagged and its replica never promoted).
			sp.failing = sp.failing && (n.Fail || n.PFail || n.NoAddr || !n.Connected)
		}
	}
	sort.Strings(ids)
	after := st.d.TakeoverAfter
	if after == 0 {
		after = DefaultTakeoverAfter
	}
	wait := func(format string, a ...any) {
		if st.plan.Wait == "" {
			st.plan.Wait = fmt.Sprintf(format, a...)
		}
	}
	stop := false
	for _, id := range ids {
		sp := suspects[id]
		if sp.slots == 0 || !sp.failing {
			continue
		}
		stop = true
		if claimant, ok := st.claimant(id); ok {
			st.settleClaim(id, claimant, wait)
			continue
		}
		var best valkey.View
		for _, v := range st.s.Views {
			me, _ := v.Myself()
			if !me.Replica || me.PrimaryID != id {
				continue
			}
			if best.Addr == "" || v.Repl.Offset > best.Repl.Offset {
				best = v
			}
		}
		since, seen := st.s.FailSince[id]
		switch {
		case best.Addr == "":
			wait("primary %s (%s, %d slots) is failing and no reachable replica can take over", id, sp.addr, sp.slots)
		case after < 0 || !seen || st.s.At.Sub(since) < after:
			wait("primary %s (%s) is failing; waiting for the cluster to fail over to a replica", id, sp.addr)
		default:
			st.add(Step{Op: Takeover, On: best.Addr, NodeID: id})
		}
	}
	if stop {
		wait("waiting for the members to agree on the replicas that took over")
	}
	return stop
}

// claimant is the answering primary that owns, in its own view, slots another view still
// gives to the failing node id: a replica of id that took over.
func (st *state) claimant(id string) (valkey.View, bool) {
	for _, v := range st.s.Views {
		stale := st.ownersIn(v)
		for _, p := range st.s.Views {
			me, ok := p.Myself()
			if !ok || me.Replica || me.ID == id || me.SlotTotal() == 0 {
				continue
			}
			own := st.ownersIn(p)
			for slot := range stale {
				if stale[slot] == id && own[slot] == me.ID {
					return p, true
				}
			}
		}
	}
	return valkey.View{}, false
}

// settleClaim waits for the members to accept the slots claimant took over from the
// failing node id, or, when some member knows id with a config epoch at least claimant's
// (a member keeps the owner with the greater epoch, so it never will), plans the bump
// that gives claimant the greatest epoch.
func (st *state) settleClaim(id string, claimant valkey.View, wait func(string, ...any)) {
	me, _ := claimant.Myself()
	stale := false
	for _, v := range st.s.Views {
		if n, ok := v.Node(id); ok && n.ConfigEpoch >= me.ConfigEpoch && n.SlotTotal() > 0 {
			stale = true
		}
	}
	if !stale {
		wait("waiting for the members to agree on the replicas that took over")
		return
	}
	if claimant.Info.CurrentEpoch > me.ConfigEpoch {
		st.add(Step{Op: BumpEpoch, On: claimant.Addr, NodeID: id})
		return
	}
	for _, v := range st.s.Views {
		if v.Info.CurrentEpoch > me.ConfigEpoch {
			wait("%s took over the slots of %s with config epoch %d, which the other members do not accept: waiting for gossip to bring it the raised current epoch", claimant.Addr, id, me.ConfigEpoch)
			return
		}
	}
	// claimant holds the greatest epoch it knows of: another member bumps its own first,
	// and gossip raises the current epoch claimant sees by the next pass. A primary whose
	// epoch is below its current epoch is sure to bump; a replica's own epoch is not
	// shown, so one is asked only when no primary qualifies.
	var other string
	for _, v := range st.s.Views {
		o, ok := v.Myself()
		if !ok || v.Addr == claimant.Addr || o.ID == id {
			continue
		}
		if !o.Replica && o.ConfigEpoch < v.Info.CurrentEpoch {
			other = v.Addr
			break
		}
		if o.Replica && other == "" {
			other = v.Addr
		}
	}
	if other == "" {
		wait("%s took over the slots of %s with config epoch %d, which the other members do not accept, and no other member can raise the current epoch", claimant.Addr, id, me.ConfigEpoch)
		return
	}
	st.add(Step{Op: BumpEpoch, On: other, NodeID: id})
	wait("%s took over the slots of %s with config epoch %d, which the other members do not accept: raising the current epoch first", claimant.Addr, id, me.ConfigEpoch)
}
