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
