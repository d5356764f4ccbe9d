package planner

import (
	"fmt"
	"strings"

	"github.com/opsuite/suite/services/memgraph-operator/internal/memgraph"
)

// desired declares coordinators 1..nc and data instances d_0..d_{nd-1}, the last
// retiringC coordinators and retiringD data instances retiring.
func desired(nc, nd, retiringC, retiringD int) Desired {
	var w Desired
	for id := 1; id <= nc; id++ {
		h := fmt.Sprintf("c-%d.svc", id-1)
		w.Coordinators = append(w.Coordinators, Coordinator{ID: id, Name: memgraph.CoordinatorName(id),
			BoltServer: h + ":7687", CoordinatorServer: h + ":12000", ManagementServer: h + ":10000"})
		if id > nc-retiringC {
			w.RetiringCoordinators = append(w.RetiringCoordinators, id)
		}
	}
	for i := 0; i < nd; i++ {
		n := fmt.Sprintf("d_%d", i)
		h := fmt.Sprintf("d-%d.svc", i)
		w.Data = append(w.Data, DataInstance{Name: n, BoltServer: h + ":7687",
			ManagementServer: h + ":10000", ReplicationServer: h + ":20000"})
		if i >= nd-retiringD {
			w.RetiringData = append(w.RetiringData, n)
		}
	}
	return w
}

// view builds a leader's SHOW INSTANCES: coordinators listed as added, leader as named,
// data instances with "name=role" or "name=role/down".
func view(want Desired, leader int, coordIDs []int, data ...string) []memgraph.Instance {
	var out []memgraph.Instance
	byID := map[int]Coordinator{}
	for _, c := range want.Coordinators {
		byID[c.ID] = c
	}
	for _, id := range coordIDs {
		c := byID[id]
		role := memgraph.RoleFollower
		if id == leader {
			role = memgraph.RoleLeader
		}
		out = append(out, memgraph.Instance{Name: memgraph.CoordinatorName(id), BoltServer: c.BoltServer,
			CoordinatorServer: c.CoordinatorServer, ManagementServer: c.ManagementServer, Health: "up", Role: role})
	}
	for _, d := range data {
		name, state, _ := strings.Cut(d, "=")
		role, health, _ := strings.Cut(state, "/")
		if health == "" {
			health = "up"
		}
		out = append(out, memgraph.Instance{Name: name, BoltServer: "x:7687", ManagementServer: "x:10000",
			Health: health, Role: role})
	}
	return out
}

func lagOf(entries ...string) []memgraph.Lag {
	var out []memgraph.Lag
	for _, e := range entries {
		var name string
		var behind int64
		if _, err := fmt.Sscanf(strings.Replace(e, "=", " ", 1), "%s %d", &name, &behind); err != nil {
			panic(err)
		}
		out = append(out, memgraph.Lag{Instance: name, Databases: map[string]memgraph.DatabaseLag{
			"memgraph": {Committed: 100 - behind, Behind: behind}}})
	}
	return out
}

func ids(n ...int) []int { return n }

func describe(r Result) []string {
	out := make([]string, 0, len(r.Commands))
	for _, c := range r.Commands {
		out = append(out, c.String())
	}
	return out
}

func drain(w Desired, data []string, coords []int) Desired {
	w.DrainData, w.DrainCoordinators = data, coords
	return w
}
