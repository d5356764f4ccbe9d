package planner

import (
	"fmt"
	"math/rand"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
	"github.com/opsuite/suite/shared/fuzzinput"
)

// script reads the fuzz input: a byte per decision, 0 past its end.
type script = fuzzinput.Bytes

// fuzzWorld is the cluster model of sim_test.go plus the scenario's state: the members
// the controller declares and whether the last desired shape was reached.
type fuzzWorld struct {
	t         *testing.T
	c         *sim
	rng       *rand.Rand
	hinted    bool
	d         Desired
	off, size int // pool window of the unhinted members
	spare     int // next unused address for replacements
	converged bool
	log       []string
	total     int // passes planned
}

// FuzzSimulation drives the planner over the cluster model with a script of shape changes
// (shard and replica counts, members joining and leaving, move batches), plans stopped
// part-way and gossip rounds skipped, members killed (a primary failed over by the cluster
// or, its quorum lost, taken over by the planner) and lost members replaced at new
// addresses. On every pass: the plan is deterministic, no slot is claimed by two live
// primaries, no AddSlots takes a slot somebody owns, the model refuses no step and no key
// is lost; after every change the cluster converges to the shape with every slot owned
// once, every key where its slot lives, balanced, one primary per shard id.
func FuzzSimulation(f *testing.F) {
	for _, seed := range [][]byte{
		{},                                 // 1x0 formed
		{2, 1, 0, 7, 0, 3, 2, 0, 10, 1, 1}, // 3x1, then 4x2 with plans cut short
		{2, 1, 1, 3, 2, 0, 0, 0, 0, 0},     // 3x1 by shard hints, a primary dies, the cluster fails over
		{2, 1, 0, 5, 2, 1, 0, 2, 1, 1, 0},  // 3x1, two members die, takeovers
		{2, 1, 0, 9, 3, 1, 0, 0},           // 3x1, a member replaced at a new address
		{3, 1, 0, 1, 0, 0, 1, 0, 0, 1, 4, 1, 3, 1, 1, 5, 1, 1, 2, 0, 0, 1, 0}, // 4x1 to 1x1 left half-way, back to 4x1, a death
		{1, 1, 0, 2, 0, 2, 1, 3, 0, 0, 2, 3, 4, 1, 1},                         // 2x1 to 3x1 with members sliding along, then one replaced
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		s := fuzzinput.New(in)
		w := &fuzzWorld{t: t, c: newSim(), spare: 200}
		shards, replicas := 1+s.Next()%4, s.Next()%3
		w.hinted = s.Next()%2 == 1
		w.rng = rand.New(rand.NewSource(int64(s.Next())))
		w.reshape(shards, replicas, 0, 256)
		w.settle(false)
		w.c.writeKeys(1)
		for ev := 0; ev < 4 && s.More() && w.total < 120; ev++ { // bounded: the fuzzing engine kills an input running 10 s
			switch s.Next() % 5 {
			case 0, 1: // a new shape, reached or left half-way
				shards, replicas := 1+s.Next()%4, s.Next()%3
				churn, batch, interrupt, partial := s.Next(), 256+16*s.Next(), s.Next()%2 == 1, s.Next()
				w.reshape(shards, replicas, churn, batch)
				if partial%4 == 0 {
					w.passes(1+partial%40, interrupt)
					continue
				}
				w.settle(interrupt)
			case 2: // members die and come back empty at their addresses
				w.settle(false)
				w.kill(s, 1+s.Next()%2, false)
				w.settle(s.Next()%2 == 1)
			case 3: // a member is lost for good and replaced at a new address
				w.settle(false)
				w.kill(s, 1, true)
				w.settle(s.Next()%2 == 1)
			case 4:
				w.settle(false)
				w.c.writeKeys(1 + s.Next()%3)
			}
		}
		w.settle(false)
		t.Logf("%d passes", w.total)
	})
}

// reshape declares a new shape; unhinted members slide along the pool by churn, always
// keeping one of the current members (a resized cluster keeps some of its pods).
func (w *fuzzWorld) reshape(shards, replicas, churn, batch int) {
	n := shards * (1 + replicas)
	d := Desired{Shards: shards, Replicas: replicas, MoveBatch: batch}
	if w.hinted {
		d.Members = hinted(shards, replicas)
		// Replacements keep their place: a replaced member's successor stays declared.
		for _, m := range w.d.Members {
			if strings.HasPrefix(m.Addr, "10.2.") && keepsHint(d.Members, m) {
				d.Members = replaceHint(d.Members, m)
			}
		}
	} else {
		off := w.off
		if w.size > 1 && churn%2 == 1 {
			off += (churn / 2) % w.size
		}
		w.off, w.size = off, n
		d.Members = pool(off + n)[off:]
	}
	w.d, w.converged = d, false
	w.log = append(w.log, fmt.Sprintf("shape %dx%d batch %d members %d", shards, replicas, batch, len(d.Members)))
}

// addrsOf lists the live nodes' addresses in order (sortedAddrs without a snapshot).
func addrsOf(c *sim) []string {
	out := make([]string, 0, len(c.nodes))
	for a := range c.nodes {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}

func keepsHint(ms []Member, r Member) bool {
	for _, m := range ms {
		if m.Shard == r.Shard && m.PreferPrimary == r.PreferPrimary && m.Host == r.Host {
			return true
		}
	}
	return false
}

// replaceHint swaps the declared member r replaced (same shard, index and host) for r.
func replaceHint(ms []Member, r Member) []Member {
	out := append([]Member(nil), ms...)
	for i, m := range out {
		if m.Shard == r.Shard && m.PreferPrimary == r.PreferPrimary && m.Host == r.Host && !strings.HasPrefix(m.Addr, "10.2.") {
			out[i] = r
			return out
		}
	}
	return out
}

// kill stops n members at once, never every copy of a shard (that loses its keys, which
// no planner can undo). A dead primary is failed over by the cluster when a majority of
// primaries survives and the script says so, else the planner takes over once
// TakeoverAfter passed. With replace, the dead member's pod comes back elsewhere: a new
// address replaces it among the members.
func (w *fuzzWorld) kill(s *script, n int, replace bool) {
	c := w.c
	if w.d.Replicas == 0 {
		return
	}
	primaries := 0
	for _, x := range c.nodes {
		if x.replicaOf == "" && x.owned() > 0 {
			primaries++
		}
	}
	deadShard := map[string]bool{} // primary id of a shard that lost a member
	var dead []*simNode
	for range n {
		m := w.d.Members[s.Next()%len(w.d.Members)]
		x := c.nodes[m.Addr]
		if x == nil {
			continue
		}
		shard := x.id
		if x.replicaOf != "" {
			shard = x.replicaOf
		}
		if deadShard[shard] {
			continue // one copy of a shard at a time: its other members may be the survivors
		}
		deadShard[shard] = true
		dead = append(dead, c.kill(m.Addr))
		w.log = append(w.log, fmt.Sprintf("kill %s (replica of %q)", m.Addr, x.replicaOf))
		if replace {
			w.replace(m)
		}
	}
	deadPrimaries := 0
	for _, x := range dead {
		if x.replicaOf == "" {
			deadPrimaries++
		}
	}
	for _, x := range dead {
		if x.replicaOf != "" {
			continue
		}
		var reps []*simNode
		for _, a := range addrsOf(c) {
			if c.nodes[a].replicaOf == x.id {
				reps = append(reps, c.nodes[a])
			}
		}
		if len(reps) == 0 {
			w.t.Fatalf("primary %s died with no live replica; log:\n%s", x.addr, strings.Join(w.log, "\n"))
		}
		if 2*(primaries-deadPrimaries) > primaries && s.Next()%2 == 0 {
			c.promote(reps[s.Next()%len(reps)])
			c.gossip()
			w.log = append(w.log, "the cluster failed over")
		} else {
			c.now = c.now.Add(2 * DefaultTakeoverAfter)
			w.log = append(w.log, "waiting for a takeover")
		}
	}
	w.converged = false
}

// replace declares a new address for the lost member m.
func (w *fuzzWorld) replace(m Member) {
	r := m
	w.spare++
	r.Addr = fmt.Sprintf("10.2.%d.%d:6379", w.spare/100, w.spare%100)
	var out []Member
	for _, x := range w.d.Members {
		if x.Addr == m.Addr {
			out = append(out, r)
		} else {
			out = append(out, x)
		}
	}
	w.d.Members = out
	if !w.hinted {
		// The pool window no longer describes the members: later shapes start from a
		// fresh window past the replacement, keeping it and the members before it.
		w.off, w.size = 0, 0
	}
}

// settle converges to the current shape unless it was reached, and checks the result.
func (w *fuzzWorld) settle(interrupt bool) {
	if w.converged {
		return
	}
	w.t.Helper()
	for _, m := range w.d.Members {
		w.c.ensure(m)
	}
	if !w.passes(3000, interrupt) {
		w.t.Fatalf("not converged after 3000 passes: %+v\nlog:\n%s", Compute(w.d, w.c.snapshot()), strings.Join(w.log, "\n"))
	}
	checkConverged(w.t, w.c, w.d)
	w.converged = true
}

// passes plans, checks and applies up to n passes (a random prefix of some plans, some
// gossip rounds skipped when interrupted) and reports whether the plan converged.
func (w *fuzzWorld) passes(n int, interrupt bool) bool {
	t, c := w.t, w.c
	t.Helper()
	for _, m := range w.d.Members {
		c.ensure(m)
	}
	for pass := 1; pass <= n; pass++ {
		w.total++
		snap := c.snapshot()
		p := Compute(w.d, snap)
		// Planning twice doubles a pass's cost: one pass in 16 is checked.
		if pass%16 == 1 {
			if again := Compute(w.d, snap); !reflect.DeepEqual(p, again) {
				t.Fatalf("pass %d: two plans from one snapshot:\n%v %q\n%v %q", pass, p.Steps, p.Wait, again.Steps, again.Wait)
			}
		}
		if p.Converged() {
			w.converged = true
			return true
		}
		steps := p.Steps
		if interrupt && len(steps) > 0 && w.rng.Intn(3) == 0 {
			steps = steps[:w.rng.Intn(len(steps))]
		}
		before := c.keyTotal()
		for _, s := range steps {
			if s.Op == AddSlots {
				for _, r := range s.Ranges {
					if r.Start < 0 || r.End >= valkey.SlotCount || r.Start > r.End {
						t.Fatalf("pass %d: %s: range %v", pass, s, r)
					}
					for x := r.Start; x <= r.End; x++ {
						if o := c.claim[x]; o != "" {
							t.Fatalf("pass %d: %s assigns slot %d, owned by %s\nlog:\n%s", pass, s, x, o, strings.Join(w.log, "\n"))
						}
					}
				}
			}
			if err := c.apply(s); err != nil {
				t.Fatalf("pass %d: %s: %v\nplan: %v\nlog:\n%s", pass, s, err, p.Steps[:min(len(p.Steps), 12)], strings.Join(w.log, "\n"))
			}
		}
		if !interrupt || w.rng.Intn(4) != 0 {
			c.gossip()
		}
		c.prune(w.d.Members)
		if after := c.keyTotal(); after < before {
			t.Fatalf("pass %d: keys %d -> %d\nlog:\n%s", pass, before, after, strings.Join(w.log, "\n"))
		}
		w.checkOwnedOnce(pass)
	}
	return false
}

// checkOwnedOnce: no slot is served by two live primaries, each believing it owns it. A
// source that still has the slot MIGRATING is handing it over (it answers ASK for every key
// it no longer holds), so it does not count.
func (w *fuzzWorld) checkOwnedOnce(pass int) {
	var owner [valkey.SlotCount]*simNode
	for _, a := range addrsOf(w.c) {
		n := w.c.nodes[a]
		if n.replicaOf != "" {
			continue
		}
		for s, o := range n.view {
			if o != n.id || n.migrating[s] != "" {
				continue
			}
			if owner[s] != nil {
				w.t.Fatalf("pass %d: slot %d owned by both %s and %s\nlog:\n%s", pass, s, owner[s].addr, n.addr, strings.Join(w.log, "\n"))
			}
			owner[s] = n
		}
	}
}

// FuzzCompute plans from arbitrary snapshots decoded from the input: up to six nodes, each
// answering (or not) with its own table of the others (roles, flags, epochs, slot ranges,
// slots migrating and importing), a desired shape over some of them. Compute must not
// panic, must be deterministic and must not change its input, and its steps must be
// well-formed: run on an observed member, AddSlots only of slots that no member's view
// gives another owner and no observed primary unknown to the members claims, each once, slot numbers in range, nobody meeting, forgetting, replicating or
// taking over for itself.
func FuzzCompute(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{3, 1, 0, 7, 7, 7, 0x11, 0x22, 0x33, 0x44, 0x55})
	f.Add([]byte{4, 2, 1, 15, 15, 15, 15, 1, 0, 0x80, 2, 3, 9, 1, 2, 0xff, 0, 64, 5, 6, 7, 8, 9, 10, 11, 12})
	f.Fuzz(func(t *testing.T, in []byte) {
		s := fuzzinput.New(in)
		d, snap := decodeSnapshot(s)
		ref := deepCopySnapshot(snap)
		p := Compute(d, snap)
		if !reflect.DeepEqual(snap, ref) {
			t.Fatal("Compute changed its snapshot")
		}
		if again := Compute(d, ref); !reflect.DeepEqual(p, again) {
			t.Fatalf("two plans from one snapshot:\n%v %q\n%v %q", p.Steps, p.Wait, again.Steps, again.Wait)
		}
		checkSteps(t, d, snap, p)
	})
}

// FuzzComputeFromNodes parses CLUSTER NODES replies as the observer does and plans from
// them: whatever a server answers, planning must not panic. The input is one reply per
// member, separated by a line "--".
func FuzzComputeFromNodes(f *testing.F) {
	const a = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	const b = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	f.Add(a + " 10.0.0.1:6379@16379 myself,master - 0 0 1 connected 0-8191\n" +
		b + " 10.0.0.2:6379@16379 master - 0 0 2 connected 8192-16383\n--\n" +
		b + " 10.0.0.2:6379@16379 myself,master - 0 0 2 connected 8192-16383\n" +
		a + " 10.0.0.1:6379@16379 master - 0 0 1 connected 0-8191\n")
	f.Add(a + " 10.0.0.1:6379@16379 myself,master - 0 0 1 connected 0-8191 [8192-<-" + b + "]\n" +
		b + " 10.0.0.2:6379@16379 master - 0 0 2 connected 8192-16383\n--\n" +
		b + " 10.0.0.2:6379@16379 myself,master - 0 0 2 connected 8192-16383 [8192->-" + a + "]\n" +
		a + " 10.0.0.1:6379@16379 master - 0 0 1 connected 0-8191\n")
	f.Fuzz(func(t *testing.T, text string) {
		if len(text) > 4096 || strings.Count(text, "\n") > 64 {
			return // a cluster of at most 64 lines per reply is plenty; longer ones only run slow
		}
		var snap valkey.Snapshot
		var d Desired
		for i, reply := range strings.Split(text, "\n--\n") {
			if i >= 6 {
				break
			}
			addr := fmt.Sprintf("10.0.0.%d:6379", i+1)
			v, err := valkey.ParseNodes(addr, reply)
			if err != nil {
				continue
			}
			v.Info.State = "ok"
			snap.Views = append(snap.Views, v)
			d.Members = append(d.Members, Member{Addr: addr, Host: fmt.Sprint(i % 3)})
		}
		d.Shards = max(1, len(d.Members)/2)
		d.Replicas = 1
		p := Compute(d, snap)
		checkSteps(t, d, snap, p)
	})
}

// decodeSnapshot builds a desired shape and a snapshot from the script.
func decodeSnapshot(s *script) (Desired, valkey.Snapshot) {
	n := 1 + s.Next()%6
	d := Desired{Shards: 1 + s.Next()%4, Replicas: s.Next() % 3, MoveBatch: s.Next() % 300,
		TakeoverAfter: time.Duration(s.Next()%5-1) * 30 * time.Second}
	id := func(i int) string { return fmt.Sprintf("%040d", i) }
	addr := func(i int) string { return fmt.Sprintf("10.0.0.%d:6379", i) }
	members := s.Next()
	for i := range n {
		if members&(1<<i) != 0 || i == 0 {
			d.Members = append(d.Members, Member{Addr: addr(i), Host: fmt.Sprint(s.Next() % 3),
				Shard: fmt.Sprint(s.Next() % 3), PreferPrimary: s.Next()%2 == 1})
		}
	}
	snap := valkey.Snapshot{At: time.Date(2026, 1, 1, 0, 10, 0, 0, time.UTC), FailSince: map[string]time.Time{}}
	slot := func() int { return (s.Next()<<6 | s.Next()) % valkey.SlotCount }
	for i := range n {
		answers := s.Next()
		if answers%5 == 0 {
			continue // not observed
		}
		v := valkey.View{Addr: addr(i), ShardID: fmt.Sprintf("s%d", s.Next()%4)}
		v.Info.State = []string{"ok", "fail", ""}[s.Next()%3]
		v.Info.MyEpoch, v.Info.CurrentEpoch, v.Info.KnownNodes = uint64(s.Next()%4), uint64(s.Next()%6), s.Next()%7
		v.Repl.Offset = int64(s.Next())
		knows := s.Next() | 1<<i
		for j := range n {
			if knows&(1<<j) == 0 {
				continue
			}
			flags := s.Next()
			node := valkey.Node{ID: id(j), Addr: addr(j), Myself: j == i, Primary: flags&1 == 0, Replica: flags&1 == 1,
				Fail: flags&2 != 0 && j != i, PFail: flags&4 != 0 && j != i, Handshake: flags&8 != 0 && j != i,
				NoAddr: flags&16 != 0 && j != i, Connected: flags&32 == 0 || j == i, ConfigEpoch: uint64(s.Next() % 5)}
			if node.Replica {
				node.PrimaryID = id(s.Next() % n)
				if node.PrimaryID == node.ID {
					node.PrimaryID = id((j + 1) % n)
				}
			}
			if node.Handshake {
				node.ID = fmt.Sprintf("h%039d", j)
			}
			// Only primaries list slots; a handshake is with a stranger that owns nothing yet.
			for range s.Next() % 3 * boolInt(node.Primary && !node.Handshake) {
				a, b := slot(), slot()
				node.Slots = append(node.Slots, valkey.SlotRange{Start: min(a, b), End: max(a, b)})
			}
			if j == i && flags&64 != 0 {
				node.Migrating = map[int]string{slot(): id(s.Next() % n)}
			}
			if j == i && flags&128 != 0 {
				node.Importing = map[int]string{slot(): id(s.Next() % n)}
			}
			if node.Fail || node.PFail {
				snap.FailSince[node.ID] = snap.At.Add(-time.Duration(s.Next()) * time.Second)
			}
			v.Nodes = append(v.Nodes, node)
		}
		snap.Views = append(snap.Views, v)
	}
	return d, snap
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func deepCopySnapshot(s valkey.Snapshot) valkey.Snapshot {
	out := valkey.Snapshot{At: s.At, FailSince: map[string]time.Time{}}
	for k, v := range s.FailSince {
		out.FailSince[k] = v
	}
	if s.FailSince == nil {
		out.FailSince = nil
	}
	for _, v := range s.Views {
		c := v
		c.Nodes = nil
		for _, n := range v.Nodes {
			m := n
			m.Slots = append([]valkey.SlotRange(nil), n.Slots...)
			if n.Slots == nil {
				m.Slots = nil
			}
			if n.Migrating != nil {
				m.Migrating = map[int]string{}
				for k, x := range n.Migrating {
					m.Migrating[k] = x
				}
			}
			if n.Importing != nil {
				m.Importing = map[int]string{}
				for k, x := range n.Importing {
					m.Importing[k] = x
				}
			}
			c.Nodes = append(c.Nodes, m)
		}
		out.Views = append(out.Views, c)
	}
	return out
}

// checkSteps holds a plan against the rules any plan keeps, whatever it observed.
func checkSteps(t *testing.T, d Desired, snap valkey.Snapshot, p Plan) {
	t.Helper()
	isMember := map[string]bool{}
	for _, m := range d.Members {
		isMember[m.Addr] = true
	}
	var assigned [valkey.SlotCount]bool
	// Whom the members' views give each slot, and the slots each observed primary no
	// member knows claims for itself (it is to be met and drained, not overwritten).
	var owners [][valkey.SlotCount]string
	var addrs []string
	known := map[string]bool{}
	for _, v := range snap.Views {
		if isMember[v.Addr] {
			for _, n := range v.Nodes {
				known[n.ID] = true
			}
		}
	}
	for _, v := range snap.Views {
		me, _ := v.Myself()
		switch {
		case isMember[v.Addr]:
			owners = append(owners, v.Owners())
		case me.Primary && !known[me.ID]:
			own := valkey.View{Nodes: []valkey.Node{me}}
			owners = append(owners, own.Owners())
		default:
			continue
		}
		addrs = append(addrs, v.Addr)
	}
	for _, s := range p.Steps {
		v, ok := snap.View(s.On)
		if !ok {
			t.Fatalf("%s runs on %q, which was not observed", s, s.On)
		}
		me, _ := v.Myself()
		switch s.Op {
		case AddSlots:
			if !isMember[s.On] {
				t.Fatalf("%s: slots given to a non-member", s)
			}
			for _, r := range s.Ranges {
				if r.Start < 0 || r.End >= valkey.SlotCount || r.Start > r.End {
					t.Fatalf("%s: range %v", s, r)
				}
				for x := r.Start; x <= r.End; x++ {
					if assigned[x] {
						t.Fatalf("%s: slot %d assigned twice in one plan", s, x)
					}
					assigned[x] = true
					for i := range owners {
						if o := owners[i][x]; o != "" && o != me.ID {
							t.Fatalf("%s: slot %d, which %s says %s owns", s, x, addrs[i], o)
						}
					}
				}
			}
		case SetSlotImporting, SetSlotMigrating, SetSlotNode, SetSlotStable, MigrateKeys:
			if s.Slot < 0 || s.Slot >= valkey.SlotCount {
				t.Fatalf("%s: slot out of range", s)
			}
		case Meet:
			if s.Addr == s.On {
				t.Fatalf("%s: meets itself", s)
			}
		case Forget, Replicate, Takeover:
			if s.NodeID == me.ID {
				t.Fatalf("%s: names its own node", s)
			}
		}
	}
}
