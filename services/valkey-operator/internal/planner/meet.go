package planner

import (
	"fmt"

	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
)

// meet picks the member that already knows most members as seed, has it meet the others,
// and reports whether every member now knows every other (gossip finished).
func (st *state) meet() bool {
	st.configEpochs()
	best := -1
	for _, m := range st.members {
		v, _ := st.s.View(m.Addr)
		known := 0
		for _, o := range st.members {
			if _, ok := v.Node(st.idOf[o.Addr]); ok {
				known++
			}
		}
		if known > best {
			best, st.seed = known, v
		}
	}
	seedMe, _ := st.seed.Myself()
	var seedBus int
	for _, m := range st.members {
		if m.Addr == st.seed.Addr {
			seedBus = m.BusPort
		}
	}
	for _, m := range st.members {
		// A member the seed does not know (new, or back empty with a new id), or knows at
		// another address (its pod came back with a new IP), is met at its address.
		if n, ok := st.seed.Node(st.idOf[m.Addr]); !ok || (m.Addr != st.seed.Addr && n.Addr != m.Addr) {
			if !handshaking(st.seed, m.Addr) {
				st.add(Step{Op: Meet, On: st.seed.Addr, Addr: m.Addr, BusPort: m.BusPort})
			}
			continue
		}
		// A member that was reset forgot the seed while the seed still knows it, or knows
		// the seed at an old address; only a MEET from its side brings it back (peers
		// ignore pings from strangers).
		if v, _ := st.s.View(m.Addr); m.Addr != st.seed.Addr {
			if n, ok := v.Node(seedMe.ID); (!ok || n.Addr != st.seed.Addr) && !handshaking(v, st.seed.Addr) {
				st.add(Step{Op: Meet, On: m.Addr, Addr: st.seed.Addr, BusPort: seedBus})
			}
		}
	}
	// A removed node still holding slots that the members lost track of (say the only
	// member knowing it was reset) is met again so its slots are drained, not reassigned
	// empty elsewhere.
	for _, v := range st.s.Views {
		me, _ := v.Myself()
		if st.isMem[me.ID] || me.SlotTotal() == 0 {
			continue
		}
		if _, ok := st.seed.Node(me.ID); !ok {
			st.add(Step{Op: Meet, On: st.seed.Addr, Addr: v.Addr, BusPort: me.BusPort})
		}
	}
	if len(st.plan.Steps) > 0 {
		st.plan.Wait = "waiting for new members to join by gossip"
		return false
	}
	for _, m := range st.members {
		v, _ := st.s.View(m.Addr)
		for _, o := range st.members {
			n, ok := v.Node(st.idOf[o.Addr])
			if !ok && !handshaking(v, o.Addr) && st.knows(o, m) {
				// o knows m but m does not know o: m forgot it (a removed shard's node,
				// back when the scale-in is undone), and gossip brings a forgotten node
				// back only once the forget ban ends a minute later; a MEET does now.
				st.add(Step{Op: Meet, On: m.Addr, Addr: o.Addr, BusPort: o.BusPort})
			}
			if !ok || n.Handshake || (o.Addr != m.Addr && n.Addr != o.Addr) {
				st.plan.Wait = fmt.Sprintf("%s does not know %s yet", m.Addr, o.Addr)
			}
		}
	}
	return st.plan.Wait == ""
}

// configEpochs gives every member of a cluster nobody has met yet (each member knows only
// itself and owns no slot) a config epoch of its own before the first MEET, as
// redis-cli --cluster create does; members that already have one (an earlier pass stopped
// half-way) keep it and the others get the next ones.
func (st *state) configEpochs() {
	var greatest uint64
	var fresh []Member
	for _, m := range st.members {
		v, _ := st.s.View(m.Addr)
		me, _ := v.Myself()
		if len(v.Nodes) > 1 || v.Info.KnownNodes > 1 || me.SlotTotal() > 0 {
			return
		}
		greatest = max(greatest, v.Info.MyEpoch, v.Info.CurrentEpoch)
		if v.Info.MyEpoch == 0 {
			fresh = append(fresh, m)
		}
	}
	for i, m := range fresh {
		st.add(Step{Op: SetConfigEpoch, On: m.Addr, Epoch: greatest + uint64(i) + 1})
	}
}

// handshaking reports a MEET from v's member to addr still in progress: meeting it again
// before the handshake times out changes nothing.
func handshaking(v valkey.View, addr string) bool {
	for _, n := range v.Nodes {
		if n.Handshake && n.Addr == addr {
			return true
		}
	}
	return false
}

// knows: member a's table lists member b, handshake finished.
func (st *state) knows(a, b Member) bool {
	v, _ := st.s.View(a.Addr)
	n, ok := v.Node(st.idOf[b.Addr])
	return ok && !n.Handshake
}
