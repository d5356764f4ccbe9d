package planner

import (
	"fmt"
	"sort"

	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
)

// finishMoves completes every half-done slot move towards its destination: nothing is
// rolled back, so a killed rebalance never leaves keys split over two owners.
func (st *state) finishMoves(moves []valkey.SlotMove) {
	var heads, tail []Step
	for _, m := range moves {
		toV, toOK := st.view(m.To)
		fromV, fromOK := st.view(m.From)
		if !toOK || !fromOK {
			// One side is gone: the move cannot finish, clear the state on the side we have.
			side := fromV
			if toOK {
				side = toV
			}
			if side.Addr != "" {
				st.add(Step{Op: SetSlotStable, On: side.Addr, Slot: m.Slot})
			}
			continue
		}
		head, rest := st.moveSteps(m.Slot, m.From, m.To, fromV, toV)
		if why := clusterDown(fromV, toV, rest); why != "" {
			st.plan.Wait = why
			continue
		}
		drain := !st.isMem[m.From]
		for _, s := range head {
			s.Drain = drain
			heads = append(heads, s)
		}
		for _, s := range rest {
			s.Drain = drain
			tail = append(tail, s)
		}
	}
	for _, s := range st.ordered(append(heads, tail...)) {
		st.add(s)
	}
}

// ordered groups the steps of several slot moves by command and member so the executor
// can pipeline them: every IMPORTING, every MIGRATING, every key migration, SETSLOT NODE on
// each new owner, then on everybody else. Each slot keeps the order the protocol needs;
// each group is a Wave, whose members' shares the executor runs at once.
func (st *state) ordered(steps []Step) []Step {
	rank := func(s Step) int {
		switch s.Op {
		case SetSlotImporting:
			return 0
		case SetSlotMigrating:
			return 1
		case MigrateKeys:
			return 2
		case SetSlotNode:
			if st.addrOf[s.NodeID] == s.On {
				return 3
			}
			return 4
		}
		return 5
	}
	out := append([]Step(nil), steps...)
	sort.SliceStable(out, func(i, j int) bool {
		if ri, rj := rank(out[i]), rank(out[j]); ri != rj {
			return ri < rj
		}
		return out[i].On < out[j].On
	})
	for i := range out {
		out[i].Wave = rank(out[i]) + 1
	}
	return out
}

// moveSteps are the steps still missing to move slot from -> to, given both sides' views:
// head marks the slot on both sides, tail moves the keys and settles the owner everywhere.
func (st *state) moveSteps(slot int, from, to string, fromV, toV valkey.View) (head, tail []Step) {
	toMe, _ := toV.Myself()
	fromMe, _ := fromV.Myself()
	toOwns := st.ownersIn(toV)[slot] == to
	fromOwns := st.ownersIn(fromV)[slot] == from
	if !toOwns {
		if toMe.Importing[slot] != from {
			head = append(head, Step{Op: SetSlotImporting, On: toV.Addr, Slot: slot, NodeID: from})
		}
		if fromOwns && fromMe.Migrating[slot] != to {
			head = append(head, Step{Op: SetSlotMigrating, On: fromV.Addr, Slot: slot, NodeID: to})
		}
		if fromOwns {
			tail = append(tail, Step{Op: MigrateKeys, On: fromV.Addr, Slot: slot, Addr: toV.Addr})
		}
		tail = append(tail, Step{Op: SetSlotNode, On: toV.Addr, Slot: slot, NodeID: to})
	}
	// Only a primary takes SETSLOT ("Please use SETSLOT only with masters"); a side that
	// turned replica learns the owner from its primary.
	if fromMe.Primary && (st.ownersIn(fromV)[slot] != to || fromMe.Migrating[slot] != "") {
		tail = append(tail, Step{Op: SetSlotNode, On: fromV.Addr, Slot: slot, NodeID: to})
	}
	// Every other primary learns the owner now rather than by gossip, so clients that
	// land there are redirected at once.
	for _, v := range st.s.Views {
		me, _ := v.Myself()
		if me.ID == from || me.ID == to || !me.Primary {
			continue
		}
		if st.ownersIn(v)[slot] != to {
			tail = append(tail, Step{Op: SetSlotNode, On: v.Addr, Slot: slot, NodeID: to})
		}
	}
	return head, tail
}

// clusterDown says why keys cannot be migrated yet when steps migrate keys and the source
// or the target does not report cluster_state:ok: a target in fail answers the MIGRATE
// with CLUSTERDOWN, and a move started then would leave the slot half-moved, redirecting
// clients to a member that refuses them.
func clusterDown(fromV, toV valkey.View, steps []Step) string {
	migrates := false
	for _, s := range steps {
		migrates = migrates || s.Op == MigrateKeys
	}
	if !migrates {
		return ""
	}
	for _, v := range []valkey.View{fromV, toV} {
		if !v.Info.OK() {
			return fmt.Sprintf("waiting for cluster_state ok on %s (now %q) before migrating keys", v.Addr, v.Info.State)
		}
	}
	return ""
}

// clearStaleReplicaStates sends CLUSTER SETSLOT STABLE, on the primary, for every slot one
// of its replicas still shows importing or migrating, and reports whether it planned any;
// it runs once no primary has a move open, so every such state is stale. Valkey 8.0+
// replicates SETSLOT only to the replicas online when the primary runs it, and a full
// sync's snapshot carries the states open when it began: a replica whose first sync was
// under way while a move finished keeps that move's states for good (a failover would
// promote them). STABLE run by the primary reaches its replicas and clears them there;
// replicas refuse SETSLOT themselves.
func (st *state) clearStaleReplicaStates() bool {
	stale := map[string]map[int]bool{} // primary address -> slots
	var primaries []string
	for _, m := range st.members {
		v, _ := st.s.View(m.Addr)
		me, ok := v.Myself()
		if !ok || !me.Replica || len(me.Importing)+len(me.Migrating) == 0 {
			continue
		}
		pv, ok := st.view(me.PrimaryID)
		if !ok {
			continue
		}
		if stale[pv.Addr] == nil {
			stale[pv.Addr] = map[int]bool{}
			primaries = append(primaries, pv.Addr)
		}
		for slot := range me.Importing {
			stale[pv.Addr][slot] = true
		}
		for slot := range me.Migrating {
			stale[pv.Addr][slot] = true
		}
	}
	sort.Strings(primaries)
	for _, addr := range primaries {
		slots := make([]int, 0, len(stale[addr]))
		for slot := range stale[addr] {
			slots = append(slots, slot)
		}
		sort.Ints(slots)
		for _, slot := range slots {
			st.add(Step{Op: SetSlotStable, On: addr, Slot: slot})
		}
	}
	return len(primaries) > 0
}
