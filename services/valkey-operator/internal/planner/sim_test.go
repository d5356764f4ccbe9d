package planner

import (
	"errors"
	"fmt"
	"math/rand"
	"sort"
	"testing"
	"time"

	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
)

// simNode models what the planner relies on of a cluster member: who it knows, what it
// believes about slot owners, its own slot states and keys, and the refusals a real server
// gives (busy slot, keys left behind, forgetting its primary, ...).
type simNode struct {
	id, addr, host       string
	replicaOf            string
	knows, banned        map[string]bool
	view                 [valkey.SlotCount]string
	migrating, importing map[int]string
	keys                 map[int]int
	offset               int64 // replication offset reported in INFO replication
	// epoch is the node's config epoch: set once before its first MEET, the greatest
	// there is plus one after a takeover or a BUMPEPOCH.
	epoch uint64
	// shard is its shard id (Valkey 8): its own at start, its primary's once it
	// replicates, kept when it is promoted; a hard reset makes a new one.
	shard string
}

type sim struct {
	nodes  map[string]*simNode // by addr
	claim  [valkey.SlotCount]string
	nextID int
	ids    map[string]*simNode
	keys   map[int]int // keys written per slot, to check none is lost
	// okCache memoizes stateOK per node.
	okCache map[*simNode]bool
	// now is the snapshot time; failedAt is when each killed node died.
	now      time.Time
	failedAt map[string]time.Time
}

func newSim() *sim {
	return &sim{nodes: map[string]*simNode{}, keys: map[int]int{}, ids: map[string]*simNode{},
		now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), failedAt: map[string]time.Time{}}
}

func (c *sim) ensure(m Member) {
	if _, ok := c.nodes[m.Addr]; ok {
		return
	}
	c.fresh(m.Addr, m.Host)
}

// fresh starts an empty node with new node and shard ids at addr.
func (c *sim) fresh(addr, host string) *simNode {
	c.nextID++
	n := &simNode{id: fmt.Sprintf("%040d", c.nextID), addr: addr, host: host,
		knows: map[string]bool{}, banned: map[string]bool{}, migrating: map[int]string{},
		importing: map[int]string{}, keys: map[int]int{}, shard: fmt.Sprintf("s%039d", c.nextID)}
	c.nodes[addr], c.ids[n.id] = n, n
	return n
}

func (c *sim) byID(id string) *simNode {
	n := c.ids[id]
	if n == nil || c.nodes[n.addr] != n {
		return nil
	}
	return n
}

func (n *simNode) owned() int {
	t := 0
	for _, o := range n.view {
		if o == n.id {
			t++
		}
	}
	return t
}

// ownsAny reports whether n still owns a slot, looking outwards from slot: a move gives
// slots away in order, so a neighbour is usually still n's (owned() scans them all, which
// the fuzz targets cannot afford per moved slot).
func (n *simNode) ownsAny(slot int) bool {
	for i := range valkey.SlotCount/2 + 1 {
		if n.view[(slot+i)%valkey.SlotCount] == n.id || n.view[(slot-i+valkey.SlotCount)%valkey.SlotCount] == n.id {
			return true
		}
	}
	return false
}

var errRefused = errors.New("refused")

func refuse(format string, a ...any) error {
	return fmt.Errorf("%w: %s", errRefused, fmt.Sprintf(format, a...))
}

func (c *sim) apply(s Step) error {
	if s.Op != MigrateKeys {
		c.okCache = nil
	}
	on := c.nodes[s.On]
	if on == nil {
		return refuse("no node at %s", s.On)
	}
	switch s.Op {
	case Meet:
		t := c.nodes[s.Addr]
		if t == nil || t == on {
			return refuse("meet %s", s.Addr)
		}
		on.knows[t.id], t.knows[on.id] = true, true
		delete(on.banned, t.id)
		delete(t.banned, on.id)
	case AddSlots:
		if on.replicaOf != "" {
			return refuse("addslots on a replica")
		}
		for _, r := range s.Ranges {
			for x := r.Start; x <= r.End; x++ {
				if on.view[x] != "" {
					return refuse("slot %d is busy", x)
				}
			}
		}
		for _, r := range s.Ranges {
			for x := r.Start; x <= r.End; x++ {
				on.view[x], c.claim[x] = on.id, on.id
			}
		}
	case Replicate:
		p := c.byID(s.NodeID)
		if p == nil || !on.knows[p.id] || p.replicaOf != "" || on.owned() > 0 || p == on {
			return refuse("replicate %s", s.NodeID)
		}
		on.replicaOf, on.shard = p.id, p.shard
	case SetSlotImporting:
		if on.view[s.Slot] == on.id || !on.knows[s.NodeID] || on.replicaOf != "" {
			return refuse("importing %d", s.Slot)
		}
		on.importing[s.Slot] = s.NodeID
	case SetSlotMigrating:
		if on.view[s.Slot] != on.id || !on.knows[s.NodeID] {
			return refuse("migrating %d: not the owner", s.Slot)
		}
		on.migrating[s.Slot] = s.NodeID
	case MigrateKeys:
		t := c.nodes[s.Addr]
		if t == nil || (t.importing[s.Slot] != on.id && t.view[s.Slot] != t.id) {
			return refuse("MIGRATE %d: target not importing", s.Slot)
		}
		if !c.stateOK(t) || !c.stateOK(on) {
			return refuse("MIGRATE %d: CLUSTERDOWN", s.Slot)
		}
		t.keys[s.Slot] += on.keys[s.Slot]
		delete(on.keys, s.Slot)
	case SetSlotNode:
		if on.view[s.Slot] == on.id && s.NodeID != on.id && on.keys[s.Slot] > 0 {
			return refuse("slot %d: I still hold keys", s.Slot)
		}
		if s.NodeID != on.id && !on.knows[s.NodeID] {
			return refuse("unknown node %s", s.NodeID)
		}
		wasMine := on.view[s.Slot] == on.id && s.NodeID != on.id
		on.view[s.Slot] = s.NodeID
		delete(on.migrating, s.Slot)
		if t := c.byID(s.NodeID); wasMine && !on.ownsAny(s.Slot) && t != nil && t.replicaOf == "" {
			// A primary giving away its last slot follows the node taking it, and so do
			// its replicas (cluster-allow-replica-migration, on by default).
			for _, x := range c.nodes {
				if x.replicaOf == on.id {
					x.replicaOf, x.shard = t.id, t.shard
				}
			}
			on.replicaOf, on.shard = t.id, t.shard
		}
		delete(on.importing, s.Slot)
		if s.NodeID == on.id {
			c.claim[s.Slot] = on.id
		}
	case SetSlotStable:
		if on.replicaOf != "" {
			return refuse("SETSLOT on a replica")
		}
		// Valkey 8.0+ replicates it: the primary's replicas clear the slot too.
		for _, x := range c.nodes {
			if x == on || x.replicaOf == on.id {
				delete(x.migrating, s.Slot)
				delete(x.importing, s.Slot)
			}
		}
	case Forget:
		if s.NodeID == on.id || s.NodeID == on.replicaOf {
			return refuse("cannot forget %s", s.NodeID)
		}
		if !on.knows[s.NodeID] {
			return refuse("unknown node %s", s.NodeID)
		}
		delete(on.knows, s.NodeID)
		on.banned[s.NodeID] = true
	case Takeover:
		if on.replicaOf == "" || c.byID(on.replicaOf) != nil {
			return refuse("takeover on %s: its primary %q is not dead", on.addr, on.replicaOf)
		}
		c.promote(on)
	case SetConfigEpoch:
		if len(on.knows) > 0 || on.epoch != 0 {
			return refuse("SET-CONFIG-EPOCH on %s: it knows other nodes or has an epoch", on.addr)
		}
		on.epoch = s.Epoch
	case BumpEpoch:
		if e := c.maxEpoch(); on.epoch != e {
			on.epoch = e + 1
		}
	case Reset:
		if on.owned() > 0 {
			return refuse("reset a node owning slots")
		}
		// A hard reset: a new node at the same address, with new node and shard ids; the
		// old id stays listed, failed, by every node that knew it.
		c.fresh(on.addr, on.host)
	default:
		return refuse("unknown op %s", s.Op)
	}
	return nil
}

// gossip lets every node learn its peers' peers (except banned ones) and the newest slot
// claims, as cluster-bus gossip and epochs would.
func (c *sim) gossip() {
	c.okCache = nil
	for changed := true; changed; {
		changed = false
		for _, x := range c.nodes {
			for yid := range x.knows {
				y := c.byID(yid)
				if y == nil {
					continue
				}
				for zid := range y.knows {
					if zid != x.id && !x.knows[zid] && !x.banned[zid] && c.byID(zid) != nil {
						x.knows[zid], changed = true, true
					}
				}
			}
		}
	}
	for _, x := range c.nodes {
		for s, o := range c.claim {
			if o != "" && (o == x.id || x.knows[o]) && x.replicaOf != o || o != "" && x.replicaOf == o {
				x.view[s] = o
			}
		}
	}
}

// prune deletes non-member nodes no member knows any more (the controller deletes their pods).
func (c *sim) prune(members []Member) {
	c.okCache = nil
	isMember := map[string]bool{}
	for _, m := range members {
		isMember[m.Addr] = true
	}
	for addr, n := range c.nodes {
		if isMember[addr] {
			continue
		}
		known := false
		for _, m := range members {
			if mn := c.nodes[m.Addr]; mn != nil && mn.knows[n.id] {
				known = true
			}
		}
		// Its own view may be stale; the members' views are what clients follow.
		if !known && n.owned() == 0 && len(n.keys) == 0 {
			delete(c.nodes, addr)
		}
	}
}

// stateOK is cluster_state:ok as n reports it: every slot has an owner it believes alive.
// It is cached until a step other than MigrateKeys (which changes no view) or gossip.
func (c *sim) stateOK(n *simNode) bool {
	if ok, hit := c.okCache[n]; hit {
		return ok
	}
	ok, prev := true, ""
	for _, o := range n.view {
		if o == prev {
			continue // owners come in runs; look each run up once
		}
		if o == "" || (o != n.id && c.byID(o) == nil) {
			ok = false
			break
		}
		prev = o
	}
	if c.okCache == nil {
		c.okCache = map[*simNode]bool{}
	}
	c.okCache[n] = ok
	return ok
}

func (c *sim) snapshot() valkey.Snapshot {
	addrs := make([]string, 0, len(c.nodes))
	for a := range c.nodes {
		addrs = append(addrs, a)
	}
	sort.Strings(addrs)
	snap := valkey.Snapshot{At: c.now, FailSince: map[string]time.Time{}}
	for _, a := range addrs {
		x := c.nodes[a]
		v := valkey.View{Addr: a}
		slotsOf := map[string][]int{}
		for s, o := range x.view {
			if o != "" {
				slotsOf[o] = append(slotsOf[o], s)
			}
		}
		line := func(n *simNode) valkey.Node {
			out := valkey.Node{ID: n.id, Addr: n.addr, Myself: n == x, Primary: n.replicaOf == "",
				Replica: n.replicaOf != "", PrimaryID: n.replicaOf, Connected: true}
			out.Slots = valkey.Ranges(slotsOf[n.id])
			// A replica's line shows its primary's epoch, as CLUSTER NODES does.
			out.ConfigEpoch = n.epoch
			if p := c.ids[n.replicaOf]; p != nil {
				out.ConfigEpoch = p.epoch
			}
			if n == x {
				out.Migrating, out.Importing = copyMap(n.migrating), copyMap(n.importing)
			}
			return out
		}
		v.Info.MyEpoch, v.Info.CurrentEpoch, v.Info.KnownNodes = x.epoch, c.maxEpoch(), 1+len(x.knows)
		if p := c.ids[x.replicaOf]; p != nil {
			v.Info.MyEpoch = p.epoch
		}
		v.Info.State = "fail"
		if c.stateOK(x) {
			v.Info.State = "ok"
		}
		v.Nodes = append(v.Nodes, line(x))
		for id := range x.knows {
			if n := c.byID(id); n != nil {
				v.Nodes = append(v.Nodes, line(n))
			} else if n := c.ids[id]; n != nil {
				// A dead node stays listed, failed, until it is forgotten.
				dead := line(n)
				dead.Fail, dead.Connected = true, false
				v.Nodes = append(v.Nodes, dead)
				if at, ok := c.failedAt[id]; ok {
					snap.FailSince[id] = at
				}
			}
		}
		v.Repl.Role, v.Repl.Offset = "master", x.offset
		if x.replicaOf != "" {
			v.Repl.Role, v.Repl.MasterLinkUp = "slave", c.byID(x.replicaOf) != nil
		}
		v.ShardID = x.shard
		snap.Views = append(snap.Views, v)
	}
	return snap
}

// kill stops the node at addr for good: it is gone from the cluster but stays listed,
// failed, by every node that knew it.
func (c *sim) kill(addr string) *simNode {
	n := c.nodes[addr]
	delete(c.nodes, addr)
	c.failedAt[n.id] = c.now
	c.okCache = nil
	return n
}

// maxEpoch is the greatest config epoch of any node, dead ones included (gossip spreads
// the current epoch to every node at once here).
func (c *sim) maxEpoch() uint64 {
	var e uint64
	for _, n := range c.ids {
		e = max(e, n.epoch)
	}
	return e
}

// promote makes replica r the primary of its dead primary's slots, holding the keys it
// replicated; the dead primary's other replicas follow r, as a real cluster's would.
func (c *sim) promote(r *simNode) {
	dead := c.ids[r.replicaOf]
	r.replicaOf = ""
	if e := c.maxEpoch(); r.epoch != e {
		r.epoch = e + 1
	}
	for s, o := range c.claim {
		if o == dead.id {
			c.claim[s], r.view[s] = r.id, r.id
		}
	}
	r.keys = map[int]int{}
	for s, k := range dead.keys {
		r.keys[s] = k
	}
	for _, n := range c.nodes {
		if n.replicaOf == dead.id {
			n.replicaOf = r.id
		}
	}
	c.okCache = nil
}

func copyMap(m map[int]string) map[int]string {
	if len(m) == 0 {
		return nil
	}
	out := map[int]string{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

// pool is an endless list of members spread over three hosts.
func pool(n int) []Member {
	out := make([]Member, n)
	for i := range out {
		out[i] = Member{Addr: fmt.Sprintf("10.0.%d.%d:6379", i/100, i%100), Host: fmt.Sprintf("host-%d", i%3)}
	}
	return out
}

type runOpts struct {
	rng       *rand.Rand
	interrupt bool // apply only a random prefix of some plans and skip some gossip rounds
}

// converge plans, applies and re-observes until the plan is converged; it fails the test
// on a step the model refuses or when it takes too many passes.
func converge(t *testing.T, c *sim, d Desired, o runOpts) int {
	t.Helper()
	for _, m := range d.Members {
		c.ensure(m)
	}
	for pass := 1; pass <= 3000; pass++ {
		p := Compute(d, c.snapshot())
		if p.Converged() {
			return pass
		}
		steps := p.Steps
		if o.interrupt && len(steps) > 0 && o.rng.Intn(3) == 0 {
			steps = steps[:o.rng.Intn(len(steps))]
		}
		for _, s := range steps {
			before := 0
			if s.Op == Reset {
				before = c.keyTotal()
			}
			err := c.apply(s)
			if s.Op == Reset && c.keyTotal() != before {
				t.Fatalf("pass %d: %s lost keys", pass, s)
			}
			if err != nil {
				t.Fatalf("pass %d: %s: %v\nplan starts: %v", pass, s, err, p.Steps[:min(len(p.Steps), 12)])
			}
		}
		if !o.interrupt || o.rng.Intn(4) != 0 {
			c.gossip()
		}
		before := c.keyTotal()
		c.prune(d.Members)
		if after := c.keyTotal(); after != before {
			t.Fatalf("pass %d: pruning lost keys: %d -> %d", pass, before, after)
		}
	}
	snap := c.snapshot()
	first := snap.Views[0].Owners()
	for _, v := range snap.Views[1:] {
		o := v.Owners()
		for s := range o {
			if o[s] != first[s] {
				n := c.nodes[v.Addr]
				t.Logf("slot %d: %s says %q, %s says %q (claim %q, knows claim %v, replicaOf %q)", s, snap.Views[0].Addr, first[s], v.Addr, o[s], c.claim[s], n.knows[c.claim[s]], n.replicaOf)
				break
			}
		}
	}
	t.Fatalf("not converged after 3000 passes: %+v", Compute(d, snap))
	return 0
}

// checkConverged asserts the model has the desired shape with every slot owned once, every
// key where its slot lives, and no slot half-moved.
func checkConverged(t *testing.T, c *sim, d Desired) {
	t.Helper()
	if len(c.nodes) != len(d.Members) {
		t.Fatalf("%d nodes left, want the %d members", len(c.nodes), len(d.Members))
	}
	counts := map[string]int{}
	for s, o := range c.claim {
		for _, n := range c.nodes {
			if n.view[s] != o {
				t.Fatalf("slot %d: %s believes %q, claim %q", s, n.addr, n.view[s], o)
			}
		}
		owner := c.byID(o)
		if owner == nil || owner.replicaOf != "" {
			t.Fatalf("slot %d owned by %q, not a live primary", s, o)
		}
		counts[o]++
		for _, n := range c.nodes {
			if n != owner && n.keys[s] > 0 {
				t.Fatalf("slot %d: %d keys left on %s", s, n.keys[s], n.addr)
			}
		}
		if owner.keys[s] != c.keys[s] {
			t.Fatalf("slot %d: owner holds %d keys, %d written", s, owner.keys[s], c.keys[s])
		}
	}
	if len(counts) != d.Shards {
		t.Fatalf("%d primaries own slots, want %d", len(counts), d.Shards)
	}
	lo, hi := valkey.SlotCount, 0
	for id, n := range counts {
		lo, hi = min(lo, n), max(hi, n)
		reps := 0
		for _, x := range c.nodes {
			if x.replicaOf == id {
				reps++
			}
		}
		if reps != d.Replicas {
			t.Fatalf("primary %s has %d replicas, want %d", id, reps, d.Replicas)
		}
	}
	if hi-lo > 1 {
		t.Fatalf("unbalanced: %d..%d slots per primary", lo, hi)
	}
	// One primary per shard id, as CLUSTER SHARDS lists them to clients.
	shardOwner := map[string]string{}
	for id := range counts {
		sh := c.byID(id).shard
		if other, dup := shardOwner[sh]; dup {
			t.Fatalf("primaries %s and %s share shard id %s", id, other, sh)
		}
		shardOwner[sh] = id
	}
	for _, n := range c.nodes {
		if len(n.migrating)+len(n.importing) > 0 {
			t.Fatalf("%s has slots migrating %v importing %v", n.addr, n.migrating, n.importing)
		}
		for id := range n.knows {
			if c.byID(id) == nil {
				t.Fatalf("%s still knows the dead node %s", n.addr, id)
			}
		}
	}
}

func (c *sim) keyTotal() int {
	t := 0
	for _, n := range c.nodes {
		for _, k := range n.keys {
			t += k
		}
	}
	return t
}

// writeKeys puts keys into every slot on its owner, as clients would.
func (c *sim) writeKeys(perSlot int) {
	for s, o := range c.claim {
		c.byID(o).keys[s] += perSlot
		c.keys[s] += perSlot
	}
}

func TestSimulationFormsAndScales(t *testing.T) {
	shapes := []struct{ shards, replicas int }{{3, 1}, {4, 1}, {5, 2}, {3, 1}, {3, 0}, {6, 1}, {1, 0}, {3, 2}}
	c := newSim()
	all := pool(40)
	for i, sh := range shapes {
		d := Desired{Shards: sh.shards, Replicas: sh.replicas, Members: all[:sh.shards*(1+sh.replicas)]}
		passes := converge(t, c, d, runOpts{})
		checkConverged(t, c, d)
		c.writeKeys(i + 1)
		t.Logf("%dx%d converged in %d passes", sh.shards, sh.replicas, passes)
	}
}

func TestSimulationRandomScalesWithInterruptions(t *testing.T) {
	all := pool(40)
	for seed := int64(1); seed <= 3; seed++ {
		rng := rand.New(rand.NewSource(seed))
		c := newSim()
		prev, prevOff := 0, 0
		for step := 0; step < 6; step++ {
			shards, replicas := 1+rng.Intn(6), rng.Intn(3)
			off := 0
			members := all[:shards*(1+replicas)]
			if prev > 1 && rng.Intn(2) == 0 {
				// Some members leave and new ones join; at least one stays, as a resized
				// cluster always keeps some of its pods.
				off = prevOff + rng.Intn(prev)
				members = all[off : off+shards*(1+replicas)]
			}
			prev, prevOff = len(members), off
			d := Desired{Shards: shards, Replicas: replicas, Members: members, MoveBatch: 16 + rng.Intn(700)}
			converge(t, c, d, runOpts{rng: rng, interrupt: true})
			checkConverged(t, c, d)
			c.writeKeys(1 + rng.Intn(3))
		}
	}
}
