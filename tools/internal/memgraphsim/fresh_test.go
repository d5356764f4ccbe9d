package memgraphsim

import (
	"strings"
	"testing"
	"time"

	"github.com/opsuite/suite/shared/testenv"
)

// TestFreshHADataInstanceRefusesWrites: a data instance started with a management port
// is a MAIN that refuses writes, with Memgraph 3.12's text, until a coordinator promotes
// it: before registration, and after REGISTER INSTANCE (then as a replica) until SET
// INSTANCE TO MAIN. So a pod that has just started, and that a client reaches by its own
// address, is never a second writable MAIN.
func TestFreshHADataInstanceRefusesWrites(t *testing.T) {
	tc := newTestCluster(t, 1, 2)
	for _, p := range tc.data {
		if role := mustRun(t, p, "SHOW REPLICATION ROLE").Records[0][0]; role != RoleMain {
			t.Fatalf("a fresh data instance's role is %v, want main", role)
		}
		if _, err := run(t, p, `CREATE (:Person)`); err == nil || !strings.Contains(err.Error(), ErrWriteOnReadOnlyMain) {
			t.Fatalf("write on a fresh, unregistered HA data instance: %v, want %q", err, ErrWriteOnReadOnlyMain)
		}
	}
	l := tc.waitLeader()
	mustRunRetrying(t, l, tc.addCoordinatorQuery(tc.coords[0]))
	for i, p := range tc.data {
		mustRunRetrying(t, l, registerQuery([]string{"instance_0", "instance_1"}[i], p, testenv.FreePortBelowEphemeral(t)))
	}
	if _, err := run(t, tc.data[0], `CREATE (:Person)`); err == nil {
		t.Fatal("a registered instance accepted a write before any SET INSTANCE TO MAIN")
	}
	mustRunRetrying(t, l, "SET INSTANCE instance_0 TO MAIN")
	testenv.EventuallyTrue(t, 5*time.Second, "the promoted MAIN accepting writes", func() bool {
		_, err := run(t, tc.data[0], `CREATE (:Person)`)
		return err == nil
	})
	if _, err := run(t, tc.data[1], `CREATE (:Person)`); err == nil || !strings.Contains(err.Error(), "replica") {
		t.Errorf("write on the replica: %v", err)
	}
}

// TestRestartedReplicaWaitsForTheCoordinators: a replica restored from disk under HA
// follows no MAIN until a coordinator names the current one, as Memgraph resets a
// restored replica's MAIN UUID: with the coordinators stopped it refuses even the MAIN of
// its own epoch, and once they are back it is told the epoch and catches up.
func TestRestartedReplicaWaitsForTheCoordinators(t *testing.T) {
	tc := newTestCluster(t, 1, 2)
	tc.bootstrap()
	main, replica := tc.data[0], tc.data[1]
	mustRun(t, main, `CREATE (:Person)`)
	testenv.EventuallyTrue(t, 5*time.Second, "the replica caught up", func() bool { return count(t, replica, "Person") == 1 })
	epoch := tc.coords[0].srv.coord.fsm.state().Epoch

	tc.stop(tc.coords[0])
	tc.stop(replica)
	tc.start(replica)
	if resp := replica.srv.data.handleReplication(request{Op: "ping", Epoch: epoch}); !strings.Contains(resp.Error, "follows no main") {
		t.Fatalf("a restarted replica answered its MAIN's ping before any coordinator spoke: %+v", resp)
	}
	if h := replica.srv.data.handleManagement(request{Op: "health"}); h.Role != RoleReplica || h.Epoch != 0 {
		t.Errorf("a restarted replica reports %+v, want a replica of no epoch", h)
	}
	// The MAIN commits (its SYNC replica does not confirm), and the replica stays behind.
	_, _ = run(t, main, `CREATE (:Person)`)
	if n := count(t, replica, "Person"); n != 1 {
		t.Errorf("the restarted replica took a write without a coordinator: %d nodes", n)
	}

	tc.start(tc.coords[0])
	testenv.EventuallyTrue(t, 15*time.Second, "the replica told its MAIN and caught up", func() bool { return count(t, replica, "Person") == 2 })
}
