package planner

import (
	"slices"
	"testing"
)

// advertised gives every member of w an Advertised address: lb-<name>:7687 for the
// external ones, the BoltServer itself for the others.
func advertised(w Desired, external bool) Desired {
	w.Coordinators, w.Data = slices.Clone(w.Coordinators), slices.Clone(w.Data)
	for i := range w.Coordinators {
		w.Coordinators[i].Advertised = w.Coordinators[i].BoltServer
		if external {
			w.Coordinators[i].Advertised = "lb-" + w.Coordinators[i].Name + ":7687"
		}
	}
	for i := range w.Data {
		w.Data[i].Advertised = w.Data[i].BoltServer
		if external {
			w.Data[i].Advertised = "lb-" + w.Data[i].Name + ":7687"
		}
	}
	return w
}

func TestPlanAdvertisedBoltServers(t *testing.T) {
	base := desired(3, 3, 0, 1)
	cases := []struct {
		name string
		want Desired
		rows func(Desired) Desired // whose addresses the leader lists
		plan []string
	}{
		// Registered at the pods' names, then external access is switched on: every
		// member but the retiring d_2 is moved, coordinators first.
		{"switched on", advertised(base, true), func(Desired) Desired { return base },
			[]string{"UpdateBoltServer coordinator_1", "UpdateBoltServer coordinator_2", "UpdateBoltServer coordinator_3",
				"UnregisterInstance d_2", "UpdateBoltServer d_0", "UpdateBoltServer d_1"}},
		{"in step", advertised(base, true), func(w Desired) Desired { return advertised(w, true) },
			[]string{"UnregisterInstance d_2"}},
		// Switched off: back to the pods' names.
		{"switched off", advertised(base, false), func(w Desired) Desired { return advertised(w, true) },
			[]string{"UpdateBoltServer coordinator_1", "UpdateBoltServer coordinator_2", "UpdateBoltServer coordinator_3",
				"UnregisterInstance d_2", "UpdateBoltServer d_0", "UpdateBoltServer d_1"}},
		// Nothing to advertise declared: addresses are not compared.
		{"unmanaged", base, func(w Desired) Desired { return advertised(w, true) }, []string{"UnregisterInstance d_2"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			listed := tc.rows(tc.want)
			rows := view(listed, 1, ids(1, 2, 3), "d_0=main", "d_1=replica", "d_2=replica")
			for i := range rows {
				for _, d := range listed.Data {
					if rows[i].Name == d.Name {
						rows[i].BoltServer = d.AdvertisedBolt()
					}
				}
				for _, c := range listed.Coordinators {
					if rows[i].Name == c.Name {
						rows[i].BoltServer = c.AdvertisedBolt()
					}
				}
			}
			got := describe(Plan(tc.want, Observed{Leader: "coordinator_1", Instances: rows}))
			// The order among kinds is the planner's (TestPlanRegistrationModes and the
			// others): compared as sets.
			if !sameElements(got, tc.plan) {
				t.Errorf("plan %q, want %q", got, tc.plan)
			}
		})
	}
	w := advertised(base, true)
	c := Command{Kind: UpdateBoltServer, Instance: w.Data[0]}
	if want := `UPDATE CONFIG FOR INSTANCE d_0 {"bolt_server": "lb-d_0:7687"}`; c.Cypher() != want {
		t.Errorf("query %q, want %q", c.Cypher(), want)
	}
	c = Command{Kind: UpdateBoltServer, Coordinator: w.Coordinators[1]}
	if want := `UPDATE CONFIG FOR COORDINATOR 2 {"bolt_server": "lb-coordinator_2:7687"}`; c.Cypher() != want {
		t.Errorf("query %q, want %q", c.Cypher(), want)
	}
	// Registrations carry the advertised address.
	reg := Command{Kind: RegisterInstance, Instance: w.Data[1]}
	if want := `REGISTER INSTANCE d_1 WITH CONFIG {"bolt_server": "lb-d_1:7687", "management_server": "d-1.svc:10000", "replication_server": "d-1.svc:20000"}`; reg.Cypher() != want {
		t.Errorf("query %q, want %q", reg.Cypher(), want)
	}
}

func sameElements(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
