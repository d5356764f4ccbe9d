package planner

import (
	"fmt"
	"testing"
)

// hinted is the members of shards x (1+replicas) as the controller names them: shard s,
// index 0 preferred as primary, spread over three hosts so a shard's members differ.
func hinted(shards, replicas int) []Member {
	var out []Member
	for s := range shards {
		for i := 0; i <= replicas; i++ {
			out = append(out, Member{Addr: fmt.Sprintf("10.1.%d.%d:6379", s, i), Host: fmt.Sprintf("host-%d", (s+i)%3),
				Shard: fmt.Sprint(s), PreferPrimary: i == 0})
		}
	}
	return out
}

// TestShardHintsFollowed: a cluster formed, then scaled out, from hinted members has the
// index-0 member of every shard as primary and every replica following its own shard's
// primary, when the hosts allow it.
func TestShardHintsFollowed(t *testing.T) {
	c := newSim()
	check := func(d Desired) {
		t.Helper()
		converge(t, c, d, runOpts{})
		checkConverged(t, c, d)
		shardOf, preferred := map[string]string{}, map[string]bool{}
		for _, m := range d.Members {
			shardOf[m.Addr], preferred[m.Addr] = m.Shard, m.PreferPrimary
		}
		addrOf := map[string]string{}
		for addr, n := range c.nodes {
			addrOf[n.id] = addr
		}
		for _, m := range d.Members {
			n := c.nodes[m.Addr]
			if n.replicaOf == "" {
				if !m.PreferPrimary {
					t.Errorf("%s (shard %s) is a primary, not its shard's index 0", m.Addr, m.Shard)
				}
				continue
			}
			if p := addrOf[n.replicaOf]; shardOf[p] != m.Shard || !preferred[p] {
				t.Errorf("%s of shard %s replicates %s of shard %s", m.Addr, m.Shard, p, shardOf[p])
			}
		}
	}
	check(Desired{Shards: 3, Replicas: 1, Members: hinted(3, 1)})
	check(Desired{Shards: 4, Replicas: 2, Members: hinted(4, 2)})
}

// TestFreshFormationFollowsNames: a fresh 3x1 cluster on hosts laid out as the demo's were
// when the SHARD column misled (shard 2's index 0 on the host of shard 0's, shard 0's
// index 1 alone on a host) makes every shard's index 0 its primary, each with its own
// index 1 as replica, and gives shard i the i-th slot range. Picking primaries by free host
// first made <c>-0-1 a second primary of "shard 0" and left shard 2 without one.
func TestFreshFormationFollowsNames(t *testing.T) {
	hosts := map[string]string{"0-0": "A", "0-1": "C", "1-0": "B", "1-1": "D", "2-0": "A", "2-1": "B"}
	var members []Member
	for s := range 3 {
		for i := range 2 {
			members = append(members, Member{Addr: fmt.Sprintf("10.1.%d.%d:6379", s, i), Host: hosts[fmt.Sprintf("%d-%d", s, i)],
				Shard: fmt.Sprint(s), PreferPrimary: i == 0})
		}
	}
	c := newSim()
	d := Desired{Shards: 3, Replicas: 1, Members: members}
	converge(t, c, d, runOpts{})
	checkConverged(t, c, d)
	for s := range 3 {
		p, r := c.nodes[fmt.Sprintf("10.1.%d.0:6379", s)], c.nodes[fmt.Sprintf("10.1.%d.1:6379", s)]
		if p.replicaOf != "" {
			t.Errorf("shard %d: index 0 is a replica", s)
		}
		if r.replicaOf != p.id {
			t.Errorf("shard %d: index 1 replicates %q, not its shard's index 0 %q", s, r.replicaOf, p.id)
		}
		lo := 0
		for i := range s {
			lo += quota(i, 3)
		}
		hi := lo + quota(s, 3) - 1
		if c.claim[lo] != p.id || c.claim[hi] != p.id {
			t.Errorf("shard %d: slots %d and %d are not its primary's", s, lo, hi)
		}
	}
}
