package planner

import (
	"reflect"
	"strings"
	"testing"

	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
)

func ops(p Plan) []Op {
	var out []Op
	for _, s := range p.Steps {
		out = append(out, s.Op)
	}
	return out
}

// formed returns a sim converged to 3x1 on six members and the desired shape.
func formed(t *testing.T) (*sim, Desired) {
	t.Helper()
	c := newSim()
	d := Desired{Shards: 3, Replicas: 1, Members: pool(6)}
	converge(t, c, d, runOpts{})
	return c, d
}

// halfMoved returns a formed sim where slot 0 is IMPORTING on a primary other than its
// owner, as a move interrupted right after its first step leaves it, and that primary.
func halfMoved(t *testing.T) (*sim, Desired, *simNode) {
	t.Helper()
	c, d := formed(t)
	src := c.byID(c.claim[0])
	var dst *simNode
	for _, n := range c.nodes {
		if n.replicaOf == "" && n != src {
			dst = n
			break
		}
	}
	if err := c.apply(Step{Op: SetSlotImporting, On: dst.addr, Slot: 0, NodeID: src.id}); err != nil {
		t.Fatal(err)
	}
	return c, d, dst
}

func TestPlanTable(t *testing.T) {
	six := pool(6)
	tests := []struct {
		name  string
		setup func(t *testing.T) (Desired, valkey.Snapshot)
		check func(t *testing.T, p Plan)
	}{{
		name: "fresh members get distinct config epochs, then are met from one seed, then the planner waits for gossip",
		setup: func(t *testing.T) (Desired, valkey.Snapshot) {
			c := newSim()
			for _, m := range six {
				c.ensure(m)
			}
			return Desired{Shards: 3, Replicas: 1, Members: six}, c.snapshot()
		},
		check: func(t *testing.T, p Plan) {
			if len(p.Steps) != 11 || p.Wait == "" {
				t.Fatalf("plan %v wait %q", p.Steps, p.Wait)
			}
			for i, s := range p.Steps[:6] {
				if s.Op != SetConfigEpoch || s.On != six[i].Addr || s.Epoch != uint64(i+1) {
					t.Fatalf("step %s, want SET-CONFIG-EPOCH %d on %s", s, i+1, six[i].Addr)
				}
			}
			for _, s := range p.Steps[6:] {
				if s.Op != Meet || s.On != six[0].Addr {
					t.Fatalf("step %s, want MEET from %s", s, six[0].Addr)
				}
			}
		},
	}, {
		name: "a formation stopped after some SET-CONFIG-EPOCH gives the others epochs above theirs",
		setup: func(t *testing.T) (Desired, valkey.Snapshot) {
			c := newSim()
			for _, m := range six {
				c.ensure(m)
			}
			for i, e := range []uint64{1, 2} {
				if err := c.apply(Step{Op: SetConfigEpoch, On: six[i].Addr, Epoch: e}); err != nil {
					t.Fatal(err)
				}
			}
			return Desired{Shards: 3, Replicas: 1, Members: six}, c.snapshot()
		},
		check: func(t *testing.T, p Plan) {
			var epochs []uint64
			for _, s := range p.Steps {
				if s.Op == SetConfigEpoch {
					epochs = append(epochs, s.Epoch)
				}
			}
			if !reflect.DeepEqual(epochs, []uint64{3, 4, 5, 6}) {
				t.Fatalf("epochs %v, want 3..6 for the four members without one; plan %v", epochs, p.Steps)
			}
		},
	}, {
		name: "members that know each other get no SET-CONFIG-EPOCH",
		setup: func(t *testing.T) (Desired, valkey.Snapshot) {
			c := newSim()
			for _, m := range six {
				c.ensure(m)
			}
			if err := c.apply(Step{Op: Meet, On: six[0].Addr, Addr: six[1].Addr}); err != nil {
				t.Fatal(err)
			}
			return Desired{Shards: 3, Replicas: 1, Members: six}, c.snapshot()
		},
		check: func(t *testing.T, p Plan) {
			for _, s := range p.Steps {
				if s.Op == SetConfigEpoch {
					t.Fatalf("planned %s in a cluster already met", s)
				}
			}
		},
	}, {
		name: "met members get even contiguous slot ranges and replicas on other hosts",
		setup: func(t *testing.T) (Desired, valkey.Snapshot) {
			c := newSim()
			for _, m := range six {
				c.ensure(m)
			}
			for _, m := range six[1:] {
				if err := c.apply(Step{Op: Meet, On: six[0].Addr, Addr: m.Addr}); err != nil {
					t.Fatal(err)
				}
			}
			c.gossip()
			return Desired{Shards: 3, Replicas: 1, Members: six}, c.snapshot()
		},
		check: func(t *testing.T, p Plan) {
			if got := ops(p); !reflect.DeepEqual(got, []Op{AddSlots, AddSlots, AddSlots, Replicate, Replicate, Replicate}) {
				t.Fatalf("ops %v", got)
			}
			want := [][]valkey.SlotRange{{{Start: 0, End: 5461}}, {{Start: 5462, End: 10922}}, {{Start: 10923, End: 16383}}}
			hostOfAddr := map[string]string{}
			for _, m := range six {
				hostOfAddr[m.Addr] = m.Host
			}
			hosts := map[string]bool{}
			for i, s := range p.Steps[:3] {
				if !reflect.DeepEqual(s.Ranges, want[i]) {
					t.Fatalf("primary %d gets %v, want %v", i, s.Ranges, want[i])
				}
				hosts[hostOfAddr[s.On]] = true
			}
			if len(hosts) != 3 {
				t.Fatalf("primaries on hosts %v, want three different ones", hosts)
			}
			if p.Wait != "" {
				t.Fatalf("wait %q", p.Wait)
			}
		},
	}, {
		name: "an unobserved member stops planning",
		setup: func(t *testing.T) (Desired, valkey.Snapshot) {
			c, d := formed(t)
			snap := c.snapshot()
			snap.Views = snap.Views[1:]
			return d, snap
		},
		check: func(t *testing.T, p Plan) {
			if len(p.Steps) != 0 || !strings.Contains(p.Wait, "was not observed") {
				t.Fatalf("plan %v wait %q", p.Steps, p.Wait)
			}
		},
	}, {
		name: "a converged cluster plans nothing",
		setup: func(t *testing.T) (Desired, valkey.Snapshot) {
			c, d := formed(t)
			return d, c.snapshot()
		},
		check: func(t *testing.T, p Plan) {
			if !p.Converged() {
				t.Fatalf("plan %v wait %q", p.Steps, p.Wait)
			}
		},
	}, {
		name: "members disagreeing on an owner wait instead of moving slots",
		setup: func(t *testing.T) (Desired, valkey.Snapshot) {
			c, d := formed(t)
			snap := c.snapshot()
			n := snap.Views[0].Nodes[0]
			n.Slots = append([]valkey.SlotRange(nil), n.Slots...)
			snap.Views[0].Nodes[0].Slots = n.Slots[:len(n.Slots)-1]
			return d, snap
		},
		check: func(t *testing.T, p Plan) {
			if len(p.Steps) != 0 || !strings.Contains(p.Wait, "do not agree") {
				t.Fatalf("plan %v wait %q", p.Steps, p.Wait)
			}
		},
	}, {
		name: "a move interrupted after IMPORTING is finished forward",
		setup: func(t *testing.T) (Desired, valkey.Snapshot) {
			c, d, _ := halfMoved(t)
			return d, c.snapshot()
		},
		check: func(t *testing.T, p Plan) {
			want := []Op{SetSlotMigrating, MigrateKeys, SetSlotNode, SetSlotNode, SetSlotNode}
			if got := ops(p); !reflect.DeepEqual(got, want) {
				t.Fatalf("ops %v, want %v", got, want)
			}
			for _, s := range p.Steps {
				if s.Slot != 0 {
					t.Fatalf("step %s touches another slot", s)
				}
			}
			// MIGRATING, the keys and SETSLOT NODE on the new owner each a wave of their
			// own; SETSLOT NODE on the source and the third primary one wave together.
			var waves []int
			for _, s := range p.Steps {
				waves = append(waves, s.Wave)
			}
			if w := waves; w[0] == 0 || w[0] == w[1] || w[1] == w[2] || w[2] == w[3] || w[3] != w[4] {
				t.Fatalf("waves %v of %v", waves, p.Steps)
			}
		},
	}, {
		name: "a half-done move waits while its target reports cluster_state fail (CLUSTERDOWN)",
		setup: func(t *testing.T) (Desired, valkey.Snapshot) {
			c, d, dst := halfMoved(t)
			snap := c.snapshot()
			for i := range snap.Views {
				if snap.Views[i].Addr == dst.addr {
					snap.Views[i].Info.State = "fail"
				}
			}
			return d, snap
		},
		check: func(t *testing.T, p Plan) {
			if len(p.Steps) != 0 || !strings.Contains(p.Wait, "cluster_state ok") {
				t.Fatalf("plan %v wait %q", p.Steps, p.Wait)
			}
		},
	}, {
		name: "a rebalance starts no move while the new primary reports cluster_state fail",
		setup: func(t *testing.T) (Desired, valkey.Snapshot) {
			c, _ := formed(t)
			d := Desired{Shards: 4, Replicas: 1, Members: pool(8)}
			// Form the new members into the cluster until the first move is planned.
			for pass := 0; pass < 50; pass++ {
				for _, m := range d.Members {
					c.ensure(m)
				}
				p := Compute(d, c.snapshot())
				for _, s := range p.Steps {
					if s.Op == MigrateKeys {
						snap := c.snapshot()
						for i := range snap.Views {
							if snap.Views[i].Addr == s.Addr {
								snap.Views[i].Info.State = "fail"
							}
						}
						return d, snap
					}
				}
				for _, s := range p.Steps {
					if err := c.apply(s); err != nil {
						t.Fatal(err)
					}
				}
				c.gossip()
			}
			t.Fatal("no move planned")
			return d, valkey.Snapshot{}
		},
		check: func(t *testing.T, p Plan) {
			for _, s := range p.Steps {
				if s.Op == MigrateKeys || s.Op == SetSlotImporting || s.Op == SetSlotMigrating {
					t.Fatalf("step %s planned while the target is in cluster_state fail", s)
				}
			}
			if !strings.Contains(p.Wait, "cluster_state ok") {
				t.Fatalf("wait %q", p.Wait)
			}
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, snap := tc.setup(t)
			tc.check(t, Compute(d, snap))
		})
	}
}

func TestScaleInDrainsThenForgets(t *testing.T) {
	c, _ := formed(t)
	c.writeKeys(2)
	// 3x1 -> 2x1: the last two pool members leave.
	d := Desired{Shards: 2, Replicas: 1, Members: pool(4)}
	sawForgetAfterDrain := false
	for pass := 0; pass < 500; pass++ {
		p := Compute(d, c.snapshot())
		if p.Converged() {
			break
		}
		for _, s := range p.Steps {
			if s.Op == Forget {
				if n := c.byID(s.NodeID); n != nil && n.owned() > 0 {
					t.Fatalf("forgets %s while it still owns %d slots", s.NodeID, n.owned())
				}
				sawForgetAfterDrain = true
			}
			if err := c.apply(s); err != nil {
				t.Fatalf("%s: %v", s, err)
			}
		}
		c.gossip()
		c.prune(d.Members)
	}
	checkConverged(t, c, d)
	if !sawForgetAfterDrain {
		t.Fatal("the removed members were never forgotten")
	}
}

// TestStaleReplicationLinkRepointed: a replica whose table has its primary at the address
// the primary answers at, but whose replication link is down dialling another address (a
// replica restarted from nodes.conf after every member moved, on Redis 7.0), gets
// REPLICATE to the same primary again; a link down towards the right address (a sync
// starting, the primary restarting in place) gets nothing.
func TestStaleReplicationLinkRepointed(t *testing.T) {
	c, d := formed(t)
	snap := c.snapshot()
	var replica string
	var primary valkey.Node
	for i, v := range snap.Views {
		me, _ := v.Myself()
		if !me.Replica {
			continue
		}
		replica, primary = v.Addr, valkey.Node{}
		for _, n := range v.Nodes {
			if n.ID == me.PrimaryID {
				primary = n
			}
		}
		snap.Views[i].Repl.MasterLinkUp, snap.Views[i].Repl.MasterAddr = false, "127.0.0.1:1"
		break
	}
	if p := Compute(d, snap); len(p.Steps) != 1 || !reflect.DeepEqual(p.Steps[0], Step{Op: Replicate, On: replica, NodeID: primary.ID}) {
		t.Fatalf("plan %v wait %q, want REPLICATE %s on %s", p.Steps, p.Wait, primary.ID, replica)
	}
	for i, v := range snap.Views {
		if v.Addr == replica {
			snap.Views[i].Repl.MasterAddr = primary.Addr
		}
	}
	if p := Compute(d, snap); !p.Converged() {
		t.Fatalf("plan %v wait %q for a link down towards the right address", p.Steps, p.Wait)
	}
}

// TestScaleInUndoneAfterDrain: upstream valkey-operator #445. A 4x1 cluster scaled in to
// 3x1 and back to 4x1 after every possible number of drain passes, down to the removed
// primary having given its last slot away (it and its replica then follow the primary
// that took it, as Valkey's replica migration does): each run converges on 4 shards with
// one primary per shard id, every key in place, each shard served by the members named
// for it.
func TestScaleInUndoneAfterDrain(t *testing.T) {
	all := hinted(4, 1)
	full := Desired{Shards: 4, Replicas: 1, Members: all}
	in := Desired{Shards: 3, Replicas: 1, Members: all[:6], MoveBatch: 512}
	for undoAfter := 0; ; undoAfter++ {
		c := newSim()
		converge(t, c, full, runOpts{})
		c.writeKeys(2)
		drained := false
		for pass := 0; pass < undoAfter; pass++ {
			p := Compute(in, c.snapshot())
			for _, s := range p.Steps {
				if err := c.apply(s); err != nil {
					t.Fatalf("drain pass %d: %s: %v", pass, s, err)
				}
			}
			c.gossip()
			if n := c.nodes[all[6].Addr]; n.owned() == 0 {
				drained = true
				break
			}
		}
		converge(t, c, full, runOpts{})
		checkConverged(t, c, full)
		for i, m := range all {
			n := c.nodes[m.Addr]
			primary := n
			if n.replicaOf != "" {
				primary = c.byID(n.replicaOf)
			}
			if want := all[i/2*2].Addr; primary.addr != want {
				t.Errorf("undone after %d passes: %s (shard %s) is served by %s, want %s", undoAfter, m.Addr, m.Shard, primary.addr, want)
			}
		}
		if drained {
			t.Logf("undone at every one of %d drain passes", undoAfter)
			return
		}
	}
}

// TestSharedShardIDRepaired: two primaries sharing a shard id (what a soft reset left
// behind, before resets were hard) are one shard to CLUSTER SHARDS. The second is drained,
// reset for a shard id of its own and given its share of the slots again; no key is lost.
func TestSharedShardIDRepaired(t *testing.T) {
	all := hinted(4, 1)
	d := Desired{Shards: 4, Replicas: 1, Members: all}
	c := newSim()
	converge(t, c, d, runOpts{})
	c.writeKeys(2)
	a, b := c.nodes[all[4].Addr], c.nodes[all[6].Addr]
	if a.replicaOf != "" || b.replicaOf != "" {
		t.Fatalf("the index-0 members are not primaries: %q %q", a.replicaOf, b.replicaOf)
	}
	b.shard = a.shard
	for _, n := range c.nodes {
		if n.replicaOf == b.id {
			n.shard = a.shard
		}
	}
	if Compute(d, c.snapshot()).Converged() {
		t.Fatal("two primaries sharing a shard id counted as converged")
	}
	converge(t, c, d, runOpts{})
	checkConverged(t, c, d)
}

// TestStaleReplicaStatesCleared: a replica that shows slots importing and migrating while
// no primary has a move open (its first sync's snapshot carried a move that finished while
// it synced, and Valkey 8.0 replicates SETSLOT only to online replicas) gets SETSLOT STABLE
// for those slots sent to its primary, and nothing else; then the cluster is converged.
func TestStaleReplicaStatesCleared(t *testing.T) {
	c, d := formed(t)
	var r *simNode
	for _, n := range c.nodes {
		if n.replicaOf != "" {
			r = n
			break
		}
	}
	primary := c.byID(r.replicaOf)
	var other *simNode
	for _, n := range c.nodes {
		if n.replicaOf == "" && n != primary {
			other = n
			break
		}
	}
	r.importing[7], r.migrating[9] = other.id, other.id
	p := Compute(d, c.snapshot())
	want := []Step{{Op: SetSlotStable, On: primary.addr, Slot: 7}, {Op: SetSlotStable, On: primary.addr, Slot: 9}}
	if !reflect.DeepEqual(p.Steps, want) || p.Wait != "" {
		t.Fatalf("plan %v wait %q, want %v", p.Steps, p.Wait, want)
	}
	converge(t, c, d, runOpts{})
	if len(r.importing)+len(r.migrating) != 0 {
		t.Errorf("replica %s still shows %v %v", r.addr, r.importing, r.migrating)
	}
	if p := Compute(d, c.snapshot()); !p.Converged() {
		t.Errorf("not converged: %v %q", p.Steps, p.Wait)
	}
}
