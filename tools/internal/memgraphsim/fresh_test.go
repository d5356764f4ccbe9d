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
		mustRun(t, l, registerQuery([]string{"instance_0", "instance_1"}[i], p, testenv.FreePortBelowEphemeral(t)))
	}
	if _, err := run(t, tc.data[0], `CREATE (:Person)`); err == nil {
		t.Fatal("a registered instance accepted a write before any SET INSTANCE TO MAIN")
	}
	mustRun(t, l, "SET INSTANCE instance_0 TO MAIN")
	testenv.EventuallyTrue(t, 5*time.Second, "the promoted MAIN accepting writes", func() bool {
		_, err := run(t, tc.data[0], `CREATE (:Person)`)
		return err == nil
	})
	if _, err := run(t, tc.data[1], `CREATE (:Person)`); err == nil || !strings.Contains(err.Error(), "replica") {
		t.Errorf("write on the replica: %v", err)
	}
}
