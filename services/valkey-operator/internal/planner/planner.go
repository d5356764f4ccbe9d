// Package planner turns a desired cluster shape and an observed snapshot into the ordered
// data-plane commands that move the cluster one step closer to it. It does no I/O: the
// caller executes the steps, stops at the first error, observes again and plans again, so
// every multi-step operation resumes from whatever state an interruption left.
package planner

import (
	"fmt"
	"sort"
	"time"

	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
)

// Member is one node that should be part of the cluster.
type Member struct {
	Addr    string // host:port clients and the operator use
	BusPort int    // 0: the server default (port + 10000)
	Host    string // the machine it runs on; replicas go to primaries on other hosts
	// Shard groups the members meant to form one shard ("" for none): replicas go to the
	// primary of their own shard when the hosts allow, so the shard a member is named
	// after is the one it serves. A hint only: running topology is never churned for it.
	Shard string
	// PreferPrimary marks the member to make primary when its shard needs one.
	PreferPrimary bool
}

// Desired is the shape the cluster should have.
type Desired struct {
	Shards   int
	Replicas int // per shard
	Members  []Member
	// MoveBatch caps how many slots one pass moves between two primaries (default 256).
	MoveBatch int
	// TakeoverAfter is how long a primary owning slots must have been failing (per
	// Snapshot.FailSince and Snapshot.At) with its replicas still replicas before one of
	// them is promoted by CLUSTER FAILOVER TAKEOVER: the cluster's own failover should have
	// happened by then, so it cannot (quorum lost). 0 means DefaultTakeoverAfter; negative
	// disables takeovers.
	TakeoverAfter time.Duration
}

// DefaultTakeoverAfter is Desired.TakeoverAfter's default: well past what an election
// takes with the default cluster-node-timeout (15 s).
const DefaultTakeoverAfter = 60 * time.Second

// Op names a data-plane command.
type Op string

// The operations a plan is made of; each maps to one command on the member named by On
// (MigrateKeys to repeated GETKEYSINSLOT+MIGRATE until the slot is empty there).
const (
	Meet             Op = "Meet"             // CLUSTER MEET Addr BusPort
	AddSlots         Op = "AddSlots"         // CLUSTER ADDSLOTSRANGE Ranges
	Replicate        Op = "Replicate"        // CLUSTER REPLICATE NodeID
	SetSlotImporting Op = "SetSlotImporting" // CLUSTER SETSLOT Slot IMPORTING NodeID
	SetSlotMigrating Op = "SetSlotMigrating" // CLUSTER SETSLOT Slot MIGRATING NodeID
	MigrateKeys      Op = "MigrateKeys"      // MIGRATE every key of Slot to Addr
	SetSlotNode      Op = "SetSlotNode"      // CLUSTER SETSLOT Slot NODE NodeID
	SetSlotStable    Op = "SetSlotStable"    // CLUSTER SETSLOT Slot STABLE
	Forget           Op = "Forget"           // CLUSTER FORGET NodeID
	// Reset turns a replica nobody needs into an empty primary (CLUSTER RESET HARD): it
	// forgets every peer, takes a new node id and shard id, and is met again on the next
	// pass as a new node.
	Reset Op = "Reset"
	// Takeover promotes the replica On of the failed primary NodeID without the cluster's
	// agreement (CLUSTER FAILOVER TAKEOVER), for when a majority of primaries is gone.
	Takeover Op = "Takeover"
	// SetConfigEpoch gives a member of a cluster nobody has met yet its own config epoch
	// (CLUSTER SET-CONFIG-EPOCH Epoch) before the first MEET. Left to gossip, equal epochs
	// are told apart only between primaries: a replica attached before that keeps its
	// primary's epoch, and its TAKEOVER would then claim the slots with an epoch the other
	// members do not prefer to its dead primary's, leaving the cluster down.
	SetConfigEpoch Op = "SetConfigEpoch"
	// BumpEpoch is CLUSTER BUMPEPOCH on On: a primary that took over NodeID's slots with an
	// epoch no greater than NodeID's gets a new greatest one, so every member accepts its
	// claim; when On already holds the greatest epoch it knows of, another member bumps
	// first (BUMPEPOCH changes nothing on the node holding the greatest).
	BumpEpoch Op = "BumpEpoch"
)

// Step is one command for one member.
type Step struct {
	Op      Op
	On      string // address of the member that runs it
	Addr    string
	BusPort int
	// NodeID is the command's node argument; on AddSlots it is On's own id (for events).
	NodeID string
	Slot   int
	// Epoch is SetConfigEpoch's epoch.
	Epoch  uint64
	Ranges []valkey.SlotRange
	// Drain marks the steps of a move out of a node leaving the cluster (scale-in) rather
	// than a rebalance between kept primaries.
	Drain bool
	// Wave, when not 0, lets the executor run this step at the same time as the steps next
	// to it with the same Wave on other members (each member's own steps keep their
	// order): the slot moves' IMPORTING, MIGRATING, key migrations and SETSLOT NODE on
	// the new owners, then on every other primary, are one wave each.
	Wave int
}

func (s Step) String() string {
	switch s.Op {
	case Meet:
		return fmt.Sprintf("%s: MEET %s", s.On, s.Addr)
	case AddSlots:
		return fmt.Sprintf("%s: ADDSLOTSRANGE %v", s.On, s.Ranges)
	case MigrateKeys:
		return fmt.Sprintf("%s: MIGRATE slot %d to %s", s.On, s.Slot, s.Addr)
	case Replicate, Forget, Takeover:
		return fmt.Sprintf("%s: %s %s", s.On, s.Op, s.NodeID)
	case Reset:
		return fmt.Sprintf("%s: Reset", s.On)
	case SetConfigEpoch:
		return fmt.Sprintf("%s: SET-CONFIG-EPOCH %d", s.On, s.Epoch)
	case BumpEpoch:
		return fmt.Sprintf("%s: BUMPEPOCH (for the slots of %s)", s.On, s.NodeID)
	default:
		return fmt.Sprintf("%s: %s %d %s", s.On, s.Op, s.Slot, s.NodeID)
	}
}

// Plan is one pass's ordered steps. Wait, when set, says why the cluster cannot go
// further until something outside the plan happens (gossip, a member coming back).
type Plan struct {
	Steps []Step
	Wait  string
}

// Converged is a cluster with the desired shape: nothing to do, nothing to wait for.
func (p Plan) Converged() bool { return len(p.Steps) == 0 && p.Wait == "" }

type state struct {
	d       Desired
	s       valkey.Snapshot
	members []Member
	isMem   map[string]bool   // member id
	idOf    map[string]string // member addr -> id
	addrOf  map[string]string // any id -> addr
	hostOf  map[string]string // member id -> host
	// shardOf and preferPrimary are the members' hints, by id.
	shardOf       map[string]string
	preferPrimary map[string]bool
	// shardID is each member's CLUSTER MYSHARDID, by id ("" without shard ids).
	shardID map[string]string
	seed    valkey.View
	plan    Plan
	reset   map[string]bool                      // member addresses reset in this pass
	owners  map[string]*[valkey.SlotCount]string // per view address, computed once
}

// Compute plans the next pass. The snapshot must hold a view from every desired member and
// from every non-member node that still owns slots (it is drained before it is forgotten);
// the one exception is a primary that owns slots and is failing: then only its takeover is
// planned (see failingPrimaries), or nothing while the cluster may still fail over itself.
func Compute(d Desired, s valkey.Snapshot) Plan {
	if d.MoveBatch <= 0 {
		d.MoveBatch = 256
	}
	st := &state{d: d, s: s, isMem: map[string]bool{}, idOf: map[string]string{},
		addrOf: map[string]string{}, hostOf: map[string]string{}, reset: map[string]bool{}, owners: map[string]*[valkey.SlotCount]string{},
		shardOf: map[string]string{}, preferPrimary: map[string]bool{}, shardID: map[string]string{}}
	st.members = append([]Member(nil), d.Members...)
	sort.Slice(st.members, func(i, j int) bool { return st.members[i].Addr < st.members[j].Addr })
	for _, v := range s.Views {
		for _, n := range v.Nodes {
			if !n.Handshake {
				st.addrOf[n.ID] = n.Addr
			}
		}
	}
	for _, v := range s.Views {
		if me, ok := v.Myself(); ok {
			st.addrOf[me.ID] = v.Addr
		}
	}
	if len(st.members) > 0 && st.failingPrimaries() {
		return st.plan
	}
	for _, m := range st.members {
		v, ok := s.View(m.Addr)
		if !ok {
			return Plan{Wait: fmt.Sprintf("member %s was not observed", m.Addr)}
		}
		me, _ := v.Myself()
		st.idOf[m.Addr], st.isMem[me.ID], st.hostOf[me.ID] = me.ID, true, m.Host
		st.shardOf[me.ID], st.preferPrimary[me.ID] = m.Shard, m.PreferPrimary
		st.shardID[me.ID] = v.ShardID
	}
	if len(st.members) == 0 {
		return Plan{Wait: "no members"}
	}
	if !st.meet() {
		return st.plan
	}
	if moves := s.Moves(); len(moves) > 0 {
		st.finishMoves(moves)
		return st.plan
	}
	if st.clearStaleReplicaStates() {
		return st.plan
	}
	if !st.agree() {
		return Plan{Wait: "members do not agree on slot owners yet"}
	}
	primaries, draining := st.choosePrimaries()
	if !st.assignUnowned(primaries) {
		st.rebalance(primaries, draining)
	}
	st.replicas(primaries)
	st.forget()
	return st.plan
}

// agree reports whether every member names the same owner for every slot: moving slots
// or failing over before that gets refused for a stale epoch. Non-members are left out, a
// removed node that was reset knows nothing and must not block its own forgetting.
func (st *state) agree() bool {
	var first *[valkey.SlotCount]string
	for _, m := range st.members {
		v, _ := st.s.View(m.Addr)
		o := st.ownersIn(v)
		if first == nil {
			first = o
		} else if *o != *first {
			return false
		}
	}
	return true
}

// ownersIn is the slot owner table of one view, computed once per pass (moves ask for it
// per slot).
func (st *state) ownersIn(v valkey.View) *[valkey.SlotCount]string {
	if o, ok := st.owners[v.Addr]; ok {
		return o
	}
	o := v.Owners()
	st.owners[v.Addr] = &o
	return &o
}

func (st *state) add(s Step) { st.plan.Steps = append(st.plan.Steps, s) }

// view is the view answered by node id; a view now answered by another id at the same
// address (a pod back empty) is not its.
func (st *state) view(id string) (valkey.View, bool) {
	v, ok := st.s.View(st.addrOf[id])
	if me, _ := v.Myself(); !ok || me.ID != id {
		return valkey.View{}, false
	}
	return v, true
}
