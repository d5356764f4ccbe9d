package memgraphsim

import (
	"strings"
	"testing"
	"time"

	"github.com/opsuite/suite/shared/testenv"
)

// settingsOf is SHOW COORDINATOR SETTINGS on p as name -> value.
func settingsOf(t *testing.T, p *simProc) map[string]string {
	t.Helper()
	res := mustRun(t, p, "SHOW COORDINATOR SETTINGS")
	if len(res.Fields) != 2 || res.Fields[0] != "setting_name" || res.Fields[1] != "setting_value" {
		t.Fatalf("columns %v", res.Fields)
	}
	out := map[string]string{}
	for _, r := range res.Records {
		out[r[0].(string)] = r[1].(string)
	}
	return out
}

// TestCoordinatorSettings: SHOW COORDINATOR SETTINGS lists Memgraph 3.12's eight settings
// with their defaults (the health timings from the flags, in whole seconds); SET
// COORDINATOR SETTING takes string literals, checks values as Memgraph does, and the
// change reaches every coordinator through Raft; data instances refuse both.
func TestCoordinatorSettings(t *testing.T) {
	tc := newTestCluster(t, 3, 1)
	l := tc.waitLeader()
	for _, p := range tc.coords {
		mustRunRetrying(t, l, tc.addCoordinatorQuery(p))
	}
	got := settingsOf(t, l)
	want := map[string]string{"enabled_reads_on_main": "false", "sync_failover_only": "true",
		"max_failover_replica_lag": "18446744073709551615", "max_replica_read_lag": "18446744073709551615",
		"deltas_batch_progress_size": "100000", "instance_down_timeout_sec": "2",
		"instance_health_check_frequency_sec": "1", "global_read_only": "false"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("default %s = %q, want %q", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d settings listed, want %d: %v", len(got), len(want), got)
	}
	mustRun(t, l, `SET COORDINATOR SETTING 'instance_down_timeout_sec' TO '07'`)
	mustRun(t, l, `SET COORDINATOR SETTING "sync_failover_only" TO "FALSE"`)
	for _, q := range []struct{ query, want string }{
		{`SET COORDINATOR SETTING 'no_such' TO '1'`, "Setting no_such doesn't exist on coordinators."},
		{`SET COORDINATOR SETTING 'instance_down_timeout_sec' TO 'soon'`, "Invalid argument detected while trying to update setting instance_down_timeout_sec"},
		{`SET COORDINATOR SETTING 'instance_health_check_frequency_sec' TO '0'`, "Invalid argument detected while trying to update setting instance_health_check_frequency_sec"},
		{`SET COORDINATOR SETTING instance_down_timeout_sec TO '7'`, "Setting name should be a string literal"},
	} {
		if _, err := run(t, l, q.query); err == nil || !strings.Contains(err.Error(), q.want) {
			t.Errorf("%s: %v, want %q", q.query, err, q.want)
		}
	}
	for _, p := range tc.coords {
		testenv.EventuallyTrue(t, 5*time.Second, "the settings on every coordinator", func() bool {
			s := settingsOf(t, p)
			return s["instance_down_timeout_sec"] == "7" && s["sync_failover_only"] == "false"
		})
	}
	if got := l.srv.coord.downTimeout(); got != 7*time.Second {
		t.Errorf("the leader's down timeout is %s after the setting, want 7s", got)
	}
	for _, q := range []string{"SHOW COORDINATOR SETTINGS", `SET COORDINATOR SETTING 'sync_failover_only' TO 'true'`} {
		if _, err := run(t, tc.data[0], q); err == nil || !strings.Contains(err.Error(), "Only coordinator can run") {
			t.Errorf("%s on a data instance: %v", q, err)
		}
	}
}

// TestFailoverFollowsSyncFailoverOnly: with sync_failover_only true (the default) a MAIN
// whose only replica is ASYNC is never replaced, however long it is down; once the setting
// is false the ASYNC replica is promoted. A SYNC registration beside STRICT_SYNC is refused
// with Memgraph's text.
func TestFailoverFollowsSyncFailoverOnly(t *testing.T) {
	tc := newTestCluster(t, 1, 3)
	l := tc.waitLeader()
	mustRunRetrying(t, l, tc.addCoordinatorQuery(tc.coords[0]))
	mustRunRetrying(t, l, registerQuery("instance_0", tc.data[0], testenv.FreePortBelowEphemeral(t)))
	mustRun(t, l, strings.Replace(registerQuery("instance_1", tc.data[1], testenv.FreePortBelowEphemeral(t)), " WITH CONFIG", " AS ASYNC WITH CONFIG", 1))
	strict := strings.Replace(registerQuery("instance_2", tc.data[2], testenv.FreePortBelowEphemeral(t)), " WITH CONFIG", " AS STRICT_SYNC WITH CONFIG", 1)
	if _, err := run(t, l, strict); err == nil || !strings.Contains(err.Error(), ErrStrictSyncAndSync) {
		t.Fatalf("STRICT_SYNC beside a SYNC instance: %v", err)
	}
	mustRunRetrying(t, l, "SET INSTANCE instance_0 TO MAIN")
	mustRun(t, tc.data[0], `CREATE (:Person)`)

	tc.kill(tc.data[0])
	// Three down timeouts: a failover would have happened long before.
	time.Sleep(3 * tc.data[0].opts.InstanceDownTimeout)
	r := showInstances(t, l)
	if r["instance_1"][5] != RoleReplica || l.srv.coord.fsm.state().Main != "instance_0" {
		t.Fatalf("with sync_failover_only the ASYNC replica was promoted: %v, Raft MAIN %q", r["instance_1"], l.srv.coord.fsm.state().Main)
	}
	mustRun(t, l, `SET COORDINATOR SETTING 'sync_failover_only' TO 'false'`)
	testenv.EventuallyTrue(t, 10*time.Second, "instance_1 promoted", func() bool {
		r := showInstances(t, l)
		return r["instance_1"][5] == RoleMain && r["instance_1"][4] == "up"
	})
	if n := count(t, tc.data[1], "Person"); n != 1 {
		t.Errorf("the promoted ASYNC replica holds %d nodes, want 1", n)
	}
}
