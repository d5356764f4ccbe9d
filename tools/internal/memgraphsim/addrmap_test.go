package memgraphsim

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opsuite/suite/shared/testenv"
)

func TestParseAddressMap(t *testing.T) {
	m, err := ParseAddressMap(" a.example:7687=127.0.0.1:31001 ,b.example:20000=127.0.0.1:31002,,")
	if err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]string{
		"a.example:7687": "127.0.0.1:31001", "b.example:20000": "127.0.0.1:31002",
		"a.example:10000": "a.example:10000", "127.0.0.1:31001": "127.0.0.1:31001",
	} {
		if got := m.Resolve(in); got != want {
			t.Errorf("Resolve(%q) = %q, want %q", in, got, want)
		}
	}
	if got := AddressMap(nil).Resolve("x:1"); got != "x:1" {
		t.Errorf("a nil map resolved x:1 to %q", got)
	}
	for in, wantErr := range map[string]string{
		"a.example:7687":                                  "want host:port=host:port",
		"a.example=127.0.0.1:1":                           "missing port",
		"a.example:1=127.0.0.1":                           "missing port",
		"a.example:1=127.0.0.1:2,a.example:1=127.0.0.1:3": "twice",
	} {
		if _, err := ParseAddressMap(in); err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("ParseAddressMap(%q) = %v, want an error with %q", in, err, wantErr)
		}
	}
	if _, _, err := ParseOptions(nil, env(map[string]string{"MEMGRAPH_SIM_ADDRESS_MAP": "nonsense"})); err == nil ||
		!strings.Contains(err.Error(), "MEMGRAPH_SIM_ADDRESS_MAP") {
		t.Errorf("a malformed MEMGRAPH_SIM_ADDRESS_MAP: %v, want an error naming it", err)
	}
}

// TestAddressMapPeers registers 2 coordinators and 2 data instances under names that do not
// resolve, with the same ports for every member (as pods have), mapped to loopback ports:
// Raft (ADD COORDINATOR's reachability check, then replication of the log), the health
// checks, the management calls and SYNC replication all reach their peer through the
// map, and each replica listens on the port its replication address maps to.
func TestAddressMapPeers(t *testing.T) {
	root := t.TempDir()
	ilog := filepath.Join(root, "invariants.jsonl")
	m := AddressMap{}
	logical := func(name string, port int) string { return fmt.Sprintf("%s.sim.invalid:%d", name, port) }
	mapTo := func(name string, port int) int {
		p := testenv.FreePortBelowEphemeral(t)
		m[logical(name, port)] = fmt.Sprintf("127.0.0.1:%d", p)
		return p
	}
	var coords, data []*simProc
	for id := 1; id <= 2; id++ {
		o := fastOptions(filepath.Join(root, fmt.Sprintf("coord%d", id)))
		name := fmt.Sprintf("coord-%d", id)
		o.CoordinatorID, o.InvariantLog, o.AddressMap = id, ilog, m
		o.BoltPort, o.ManagementPort, o.CoordinatorPort = mapTo(name, 7687), mapTo(name, 10000), mapTo(name, 12000)
		coords = append(coords, &simProc{opts: o})
	}
	for i := range 2 {
		o := fastOptions(filepath.Join(root, fmt.Sprintf("data%d", i)))
		name := fmt.Sprintf("data-%d", i)
		o.InvariantLog, o.AddressMap = ilog, m
		o.BoltPort, o.ManagementPort = mapTo(name, 7687), mapTo(name, 10000)
		mapTo(name, 20000) // the replica's replication port, bound once it is registered
		data = append(data, &simProc{opts: o})
	}
	tc := &testCluster{t: t, ilog: ilog, coords: coords, data: data}
	for _, p := range append(append([]*simProc{}, coords...), data...) {
		tc.start(p)
	}
	t.Cleanup(func() {
		for _, p := range append(append([]*simProc{}, coords...), data...) {
			tc.stop(p)
		}
	})

	leader := tc.waitLeader()
	for id := 1; id <= 2; id++ {
		name := fmt.Sprintf("coord-%d", id)
		mustRunRetrying(t, leader, fmt.Sprintf(`ADD COORDINATOR %d WITH CONFIG {"bolt_server": %q, "coordinator_server": %q, "management_server": %q}`,
			id, logical(name, 7687), logical(name, 12000), logical(name, 10000)))
	}
	for i := range 2 {
		name := fmt.Sprintf("data-%d", i)
		mustRunRetrying(t, leader, fmt.Sprintf(`REGISTER INSTANCE data_%d WITH CONFIG {"bolt_server": %q, "management_server": %q, "replication_server": %q}`,
			i, logical(name, 7687), logical(name, 10000), logical(name, 20000)))
	}
	mustRunRetrying(t, leader, "SET INSTANCE data_0 TO MAIN")
	testenv.EventuallyTrue(t, 10*time.Second, "every member up in the leader's SHOW INSTANCES", func() bool {
		rows := showInstances(t, leader)
		for _, n := range []string{"coordinator_2", "data_0", "data_1"} {
			if rows[n] == nil || rows[n][4] != "up" {
				return false
			}
		}
		return true
	})
	// Coordinator 2 learnt the cluster over Raft: it names coordinator 1 its leader.
	if rows := showInstances(t, coords[1]); rows["coordinator_1"] == nil || rows["coordinator_1"][5] != RoleLeader {
		t.Errorf("coordinator 2 shows %v, want coordinator_1 as its leader", rows)
	}
	mustRun(t, data[0], "CREATE (:T {i: 1}), (:T {i: 2})")
	if n := count(t, data[1], "T"); n != 2 {
		t.Errorf("the replica counts %d T nodes after a SYNC write, want 2", n)
	}
}
