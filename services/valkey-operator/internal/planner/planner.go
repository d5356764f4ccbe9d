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
	// Reset turns a replica nobody needs into an empty primary (CLUSTER RESET SOFT); it
	// forgets every peer and is met again on the next pass.
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
	seed          valkey.View
	plan          Plan
	reset         map[string]bool                      // member addresses reset in this pass
	owners        map[string]*[valkey.SlotCount]string // per view address, computed once
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
		shardOf: map[string]string{}, preferPrimary: map[string]bool{}}
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
			if n, ok := v.Node(st.idOf[o.Addr]); !ok || n.Handshake || (o.Addr != m.Addr && n.Addr != o.Addr) {
				st.plan.Wait = fmt.Sprintf("%s does not know %s yet", m.Addr, o.Addr)
				return false
			}
		}
	}
	return true
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

// view is the view answered by node id; a view now answered by another id at the same
// address (a pod back empty) is not its.
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

func (st *state) view(id string) (valkey.View, bool) {
	v, ok := st.s.View(st.addrOf[id])
	if me, _ := v.Myself(); !ok || me.ID != id {
		return valkey.View{}, false
	}
	return v, true
}

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
// each new owner, then on everybody else. Each slot keeps the order the protocol needs.
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

type primary struct {
	id    string
	count int
	first int // lowest slot owned, SlotCount when none
}

// choosePrimaries keeps the members already owning slots (ordered by their lowest slot),
// drains owners beyond the shard count and non-members, and promotes empty primaries,
// spread over hosts, when shards are missing.
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
	for _, p := range all {
		if st.isMem[p.id] && len(primaries) < st.d.Shards {
			primaries = append(primaries, *p)
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
		// Hosts first (a primary per machine survives a machine loss), then the hints: a
		// shard without a primary yet, its preferred member.
		pick, best := 0, -1
		for i, id := range candidates {
			score := 0
			if !usedHost[st.hostOf[id]] {
				score += 4
			}
			if sh := st.shardOf[id]; sh != "" && !usedShard[sh] {
				score += 2
			}
			if st.preferPrimary[id] {
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
	if len(primaries) < st.d.Shards {
		st.resetSpareReplicas(primaries, byID, st.d.Shards-len(primaries))
	}
	if len(primaries) < st.d.Shards {
		st.plan.Wait = fmt.Sprintf("%d shards wanted, only %d members can be primaries", st.d.Shards, len(primaries))
	}
	return primaries, draining
}

// resetSpareReplicas frees up to want member replicas that follow no kept primary, or are
// beyond the replica count of theirs, so they can become primaries.
func (st *state) resetSpareReplicas(primaries []primary, owners map[string]*primary, want int) {
	kept := map[string]int{}
	for _, p := range primaries {
		kept[p.id] = 0
	}
	for _, m := range st.members {
		if want == 0 {
			return
		}
		v, _ := st.s.View(m.Addr)
		me, _ := v.Myself()
		if !me.Replica || owners[me.ID] != nil {
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
	for _, m := range st.members {
		id := st.idOf[m.Addr]
		if isPrimary[id] || owns[id] || st.reset[m.Addr] {
			continue
		}
		v, _ := st.s.View(m.Addr)
		me, _ := v.Myself()
		if me.Replica && isPrimary[me.PrimaryID] && have[me.PrimaryID] < st.d.Replicas {
			have[me.PrimaryID]++
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
