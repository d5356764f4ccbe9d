package planner

import "github.com/opsuite/suite/services/memgraph-operator/internal/memgraph"

// boltUpdates is rule 8: an UPDATE CONFIG for every declared, non-retiring member with an
// Advertised address that the leader lists with another bolt_server (no Advertised: the
// registered address is left alone), coordinators (id order)
// then data instances (declared order). A row with no bolt_server (a fresh coordinator
// listing itself) is rule 1's to add, not to update. Memgraph keeps bolt_server for
// routing tables only (health checks, replication and Raft use the other addresses), so
// the update moves clients, never the cluster: it runs whatever else the pass does.
func boltUpdates(want Desired, coords map[int]memgraph.Instance, data map[string]memgraph.Instance,
	retiringC map[int]bool, retiringD map[string]bool) []Command {
	var out []Command
	for _, c := range want.Coordinators {
		row, ok := coords[c.ID]
		if !ok || retiringC[c.ID] || c.Advertised == "" || row.BoltServer == "" || row.BoltServer == c.Advertised {
			continue
		}
		out = append(out, Command{Kind: UpdateBoltServer, Coordinator: c})
	}
	for _, d := range want.Data {
		row, ok := data[d.Name]
		if !ok || retiringD[d.Name] || d.Advertised == "" || row.BoltServer == "" || row.BoltServer == d.Advertised {
			continue
		}
		out = append(out, Command{Kind: UpdateBoltServer, Instance: d})
	}
	return out
}
