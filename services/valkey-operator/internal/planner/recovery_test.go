package planner

import (
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
)

// primaryOf returns the live primary owning slot and its replicas.
func (c *sim) primaryOf(slot int) (*simNode, []*simNode) {
	p := c.byID(c.claim[slot])
	var reps []*simNode
	for _, a := range sortedAddrs(c) {
		if n := c.nodes[a]; n.replicaOf == p.id {
			reps = append(reps, n)
		}
	}
	return p, reps
}

func sortedAddrs(c *sim) []string {
	snap := c.snapshot()
	out := make([]string, 0, len(snap.Views))
	for _, v := range snap.Views {
		out = append(out, v.Addr)
	}
	return out
}

// passes applies up to n plans, gossiping after each, and returns the last plan computed.
func passes(t *testing.T, c *sim, d Desired, n int) Plan {
	t.Helper()
	var p Plan
	for range n {
		p = Compute(d, c.snapshot())
		for _, s := range p.Steps {
			if err := c.apply(s); err != nil {
				t.Fatalf("%s: %v", s, err)
			}
		}
		c.gossip()
	}
	return p
}

func TestTakeoverTable(t *testing.T) {
	tests := []struct {
		name  string
		after time.Duration
		wait  time.Duration // how long the primary has been failing
		check func(t *testing.T, p Plan, replicas []*simNode)
	}{{
		name: "before TakeoverAfter the planner waits for the cluster's own failover and plans nothing else",
		wait: 10 * time.Second,
		check: func(t *testing.T, p Plan, _ []*simNode) {
			if len(p.Steps) != 0 || !strings.Contains(p.Wait, "waiting for the cluster to fail over") {
				t.Fatalf("plan %v wait %q", p.Steps, p.Wait)
			}
		},
	}, {
		name: "after TakeoverAfter the replica with the highest offset takes over",
		wait: 2 * time.Minute,
		check: func(t *testing.T, p Plan, reps []*simNode) {
			if len(p.Steps) != 1 || p.Steps[0].Op != Takeover || p.Steps[0].On != reps[1].addr || p.Wait == "" {
				t.Fatalf("plan %v wait %q, want one Takeover on %s (offset %d)", p.Steps, p.Wait, reps[1].addr, reps[1].offset)
			}
		},
	}, {
		name:  "a negative TakeoverAfter never takes over",
		after: -1,
		wait:  time.Hour,
		check: func(t *testing.T, p Plan, _ []*simNode) {
			if len(p.Steps) != 0 || p.Wait == "" {
				t.Fatalf("plan %v wait %q", p.Steps, p.Wait)
			}
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newSim()
			d := Desired{Shards: 3, Replicas: 2, Members: pool(9), TakeoverAfter: tc.after}
			converge(t, c, d, runOpts{})
			p, reps := c.primaryOf(0)
			reps[0].offset, reps[1].offset = 100, 250
			c.kill(p.addr)
			c.now = c.now.Add(tc.wait)
			tc.check(t, Compute(d, c.snapshot()), reps)
		})
	}
}

// TestQuorumLossTakeoverThenRejoin kills two of three primaries (the survivors cannot
// elect replicas), lets the planner take over after TakeoverAfter, then brings the dead
// pods back empty with new ids at their addresses: they are met, attached as replicas and
// the dead ids forgotten everywhere, with no key lost.
func TestQuorumLossTakeoverThenRejoin(t *testing.T) {
	c := newSim()
	d := Desired{Shards: 3, Replicas: 1, Members: pool(6), TakeoverAfter: 30 * time.Second}
	converge(t, c, d, runOpts{})
	c.writeKeys(3)
	p0, _ := c.primaryOf(0)
	p1, _ := c.primaryOf(valkey.SlotCount - 1)
	c.kill(p0.addr)
	c.kill(p1.addr)
	if p := passes(t, c, d, 3); len(p.Steps) != 0 || p.Wait == "" {
		t.Fatalf("before TakeoverAfter: plan %v wait %q", p.Steps, p.Wait)
	}
	c.now = c.now.Add(time.Minute)
	p := Compute(d, c.snapshot())
	if got := ops(p); len(got) != 2 || got[0] != Takeover || got[1] != Takeover {
		t.Fatalf("plan %v, want two takeovers", p.Steps)
	}
	if s := Summarize(p.Steps); len(s.TakenOver) != 2 {
		t.Fatalf("summary %+v", s)
	}
	passes(t, c, d, 1)
	// Still waiting for the dead members' pods: nothing but waiting.
	if p := Compute(d, c.snapshot()); len(p.Steps) != 0 || !strings.Contains(p.Wait, "not observed") {
		t.Fatalf("after takeover: plan %v wait %q", p.Steps, p.Wait)
	}
	forgotten := map[string]bool{}
	for pass := 0; pass < 100; pass++ {
		for _, m := range d.Members {
			c.ensure(m)
		}
		p := Compute(d, c.snapshot())
		if p.Converged() {
			break
		}
		for _, s := range Summarize(p.Steps).Forgotten {
			forgotten[s] = true
		}
		for _, s := range p.Steps {
			if err := c.apply(s); err != nil {
				t.Fatalf("%s: %v", s, err)
			}
		}
		c.gossip()
	}
	checkConverged(t, c, d)
	if !forgotten[p0.id] || !forgotten[p1.id] {
		t.Fatalf("forgotten %v, want both dead primaries", forgotten)
	}
}

// TestPrimaryBackEmptyBeforeFailover brings a dead primary's pod back empty (new id, same
// address) before the cluster failed over: its replica must not be re-pointed while the
// cluster is electing it, and after the failover everything converges.
func TestPrimaryBackEmptyBeforeFailover(t *testing.T) {
	c := newSim()
	d := Desired{Shards: 3, Replicas: 1, Members: pool(6)}
	converge(t, c, d, runOpts{})
	c.writeKeys(2)
	p, reps := c.primaryOf(0)
	c.kill(p.addr)
	for pass := 0; pass < 5; pass++ {
		for _, m := range d.Members {
			c.ensure(m)
		}
		plan := Compute(d, c.snapshot())
		for _, s := range plan.Steps {
			if s.Op != Meet {
				t.Fatalf("pass %d: %s planned while the cluster elects a replica (wait %q)", pass, s, plan.Wait)
			}
			if err := c.apply(s); err != nil {
				t.Fatal(err)
			}
		}
		c.gossip()
	}
	c.promote(reps[0]) // the cluster's own failover
	c.gossip()
	converge(t, c, d, runOpts{})
	checkConverged(t, c, d)
}

// TestReplicaReplacedAtNewAddress loses a replica for good; its replacement comes up
// elsewhere (new address, new id): it is met and attached, the dead id forgotten.
func TestReplicaReplacedAtNewAddress(t *testing.T) {
	c := newSim()
	all := pool(7)
	d := Desired{Shards: 3, Replicas: 1, Members: all[:6]}
	converge(t, c, d, runOpts{})
	c.writeKeys(1)
	_, reps := c.primaryOf(0)
	c.kill(reps[0].addr)
	var members []Member
	for _, m := range all {
		if m.Addr != reps[0].addr {
			members = append(members, m)
		}
	}
	d.Members = members
	converge(t, c, d, runOpts{})
	checkConverged(t, c, d)
}

// TestMemberAtNewAddressIsMetAgain: a member whose pod came back with a new IP but its old
// id (persistent nodes.conf) is met at the new address from the seed, and the member meets
// the seed back when it knows the seed at an old address.
func TestMemberAtNewAddressIsMetAgain(t *testing.T) {
	c, d := formed(t)
	snap := c.snapshot()
	moved := d.Members[5].Addr
	movedID := c.nodes[moved].id
	seed := d.Members[0].Addr
	seedID := c.nodes[seed].id
	for i := range snap.Views {
		v := &snap.Views[i]
		nodes := append([]valkey.Node(nil), v.Nodes...)
		for j := range nodes {
			if nodes[j].ID == movedID && !nodes[j].Myself {
				nodes[j].Addr = "10.9.9.9:6379"
			}
			if v.Addr == moved && nodes[j].ID == seedID {
				nodes[j].Addr = "10.9.9.8:6379"
			}
		}
		v.Nodes = nodes
	}
	p := Compute(d, snap)
	if len(p.Steps) != 1 || p.Steps[0].String() != (Step{Op: Meet, On: seed, Addr: moved}).String() || !strings.Contains(p.Wait, "gossip") {
		t.Fatalf("plan %v wait %q, want MEET %s from the seed", p.Steps, p.Wait, moved)
	}
	// Once the seed knows the new address, the moved member still knows the seed at an
	// old one and meets it from its side.
	for i := range snap.Views {
		if snap.Views[i].Addr == seed {
			snap.Views[i] = c.snapshot().Views[i]
		}
	}
	p = Compute(d, snap)
	if len(p.Steps) != 1 || p.Steps[0].String() != (Step{Op: Meet, On: moved, Addr: seed}).String() {
		t.Fatalf("plan %v wait %q, want MEET %s from %s", p.Steps, p.Wait, seed, moved)
	}
}

// TestSimulationRandomFailures kills random members of clusters with replicas, one at a
// time: a dead primary is either failed over by the cluster itself or, its quorum lost,
// taken over by the planner once TakeoverAfter passed; the pod then comes back empty with a
// new id. Plans are interrupted at random. Every round ends converged, with the dead ids
// forgotten and no key lost.
func TestSimulationRandomFailures(t *testing.T) {
	for seed := int64(1); seed <= 4; seed++ {
		rng := rand.New(rand.NewSource(seed))
		shards, replicas := 2+rng.Intn(3), 1+rng.Intn(2)
		d := Desired{Shards: shards, Replicas: replicas, Members: pool(shards * (1 + replicas))}
		c := newSim()
		converge(t, c, d, runOpts{})
		c.writeKeys(2)
		takeovers := 0
		for round := 0; round < 6; round++ {
			victim := d.Members[rng.Intn(len(d.Members))].Addr
			n := c.kill(victim)
			if n.replicaOf == "" {
				var reps []*simNode
				for _, a := range sortedAddrs(c) {
					if c.nodes[a].replicaOf == n.id {
						reps = append(reps, c.nodes[a])
					}
				}
				if len(reps) == 0 {
					t.Fatalf("seed %d round %d: primary %s had no replica", seed, round, victim)
				}
				if rng.Intn(2) == 0 {
					c.promote(reps[rng.Intn(len(reps))]) // the cluster's own election
				} else {
					c.now = c.now.Add(2 * DefaultTakeoverAfter)
					takeovers++
				}
			}
			converge(t, c, d, runOpts{rng: rng, interrupt: true})
			checkConverged(t, c, d)
		}
		t.Logf("seed %d: %dx%d survived 6 failures, %d by takeover", seed, shards, replicas, takeovers)
	}
}

// TestStaleTakeoverEpochIsBumped: a replica that took over with its dead primary's config
// epoch, the greatest in the cluster (gossip had not told them apart before it became a
// replica), is never preferred by the other members, which keep the dead owner and stay
// down. The planner has another primary bump first (BUMPEPOCH does nothing on the node
// holding the greatest epoch), then the one that took over, then waits for gossip.
func TestStaleTakeoverEpochIsBumped(t *testing.T) {
	c := newSim()
	d := Desired{Shards: 3, Replicas: 1, Members: pool(6), TakeoverAfter: time.Second}
	converge(t, c, d, runOpts{})
	dead, reps := c.primaryOf(0)
	r := reps[0]
	c.kill(dead.addr)
	if err := c.apply(Step{Op: Takeover, On: r.addr, NodeID: dead.id}); err != nil {
		t.Fatal(err)
	}
	top := c.maxEpoch() + 5
	dead.epoch, r.epoch = top, top // no gossip: the others still give slot 0 to dead

	p := Compute(d, c.snapshot())
	if len(p.Steps) != 1 || p.Steps[0].Op != BumpEpoch || p.Steps[0].On == r.addr || p.Steps[0].NodeID != dead.id ||
		c.nodes[p.Steps[0].On].replicaOf != "" || !strings.Contains(p.Wait, "raising the current epoch first") {
		t.Fatalf("plan %v wait %q, want BUMPEPOCH on another primary first", p.Steps, p.Wait)
	}
	if err := c.apply(p.Steps[0]); err != nil {
		t.Fatal(err)
	}
	p = Compute(d, c.snapshot())
	if len(p.Steps) != 1 || p.Steps[0].Op != BumpEpoch || p.Steps[0].On != r.addr {
		t.Fatalf("plan %v wait %q, want BUMPEPOCH on %s, which took over", p.Steps, p.Wait, r.addr)
	}
	if err := c.apply(p.Steps[0]); err != nil {
		t.Fatal(err)
	}
	if r.epoch <= dead.epoch {
		t.Fatalf("epoch %d after the bump, dead primary's %d", r.epoch, dead.epoch)
	}
	p = Compute(d, c.snapshot())
	if len(p.Steps) != 0 || !strings.Contains(p.Wait, "agree on the replicas that took over") {
		t.Fatalf("plan %v wait %q, want a wait for gossip", p.Steps, p.Wait)
	}
	c.gossip()
	converge(t, c, d, runOpts{})
	if s := Summarize([]Step{{Op: BumpEpoch, On: r.addr, NodeID: dead.id}}); len(s.EpochBumped) != 1 || s.EpochBumped[0].Addr != r.addr {
		t.Fatalf("summary %+v", s)
	}
}
