package memgraphsim

import (
	"slices"
	"testing"
	"time"

	"github.com/opsuite/suite/shared/testenv"
)

// UPDATE CONFIG FOR INSTANCE|COORDINATOR changes the bolt_server SHOW INSTANCES shows and
// routing tables carry (on the leader at once, on a follower once it has the commit),
// while replication, which uses the other addresses, goes on; any other key and an
// unknown member are refused.
func TestUpdateConfigMovesRoutingTables(t *testing.T) {
	tc := newTestCluster(t, 3, 2)
	tc.bootstrap()
	l, main, replica := tc.leader(), tc.data[0], tc.data[1]
	mustRun(t, l, `UPDATE CONFIG FOR INSTANCE instance_0 {"bolt_server": "127.4.0.10:7687"}`)
	mustRun(t, tc.coords[2], `UPDATE CONFIG FOR COORDINATOR 2 {"bolt_server": "127.4.0.2:7687"}`) // forwarded
	if rows := showInstances(t, l); rows["instance_0"][1] != "127.4.0.10:7687" || rows["coordinator_2"][1] != "127.4.0.2:7687" {
		t.Fatalf("SHOW INSTANCES after UPDATE CONFIG: %v", rows)
	}
	testenv.EventuallyTrue(t, 5*time.Second, "a follower's routing table names the new addresses", func() bool {
		rt, err := tc.coords[1].conn().Route("")
		return err == nil && slices.Equal(rt.Writers, []string{"127.4.0.10:7687"}) && slices.Contains(rt.Routers, "127.4.0.2:7687") &&
			slices.Equal(rt.Readers, []string{replica.addr(replica.opts.BoltPort)})
	})
	mustRun(t, main, `CREATE (:Person)`)
	if n := count(t, replica, "Person"); n != 1 {
		t.Fatalf("replica counts %d after the MAIN's bolt_server moved, want 1", n)
	}
	_, err := run(t, l, `UPDATE CONFIG FOR INSTANCE nobody {"bolt_server": "127.4.0.11:7687"}`)
	wantFailure(t, err, ErrNoSuchInstance)
	if _, err := run(t, l, `UPDATE CONFIG FOR INSTANCE instance_1 {"management_server": "127.4.0.11:10000"}`); err == nil {
		t.Fatal("UPDATE CONFIG of management_server was accepted")
	}
	if _, err := run(t, l, `UPDATE CONFIG FOR COORDINATOR 9 {"bolt_server": "127.4.0.11:7687"}`); err == nil {
		t.Fatal("UPDATE CONFIG of an unknown coordinator was accepted")
	}
}
