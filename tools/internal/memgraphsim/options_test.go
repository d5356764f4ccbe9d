package memgraphsim

import (
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

var licensed = map[string]string{"MEMGRAPH_ENTERPRISE_LICENSE": "key", "MEMGRAPH_ORGANIZATION_NAME": "org"}

func TestParseOptionsRoles(t *testing.T) {
	cases := []struct {
		name        string
		args        []string
		env         map[string]string
		coordinator bool
		ha          bool
		wantErr     string
	}{
		{name: "standalone", args: []string{"--bolt-port=7688"}},
		{name: "data instance", args: []string{"--management-port=10000", "--bolt-port", "7687"}, env: licensed, ha: true},
		{name: "coordinator", args: []string{"--coordinator-id=2", "--coordinator-port=12000", "--management-port=10000", "--coordinator-hostname=c2.example"},
			env: licensed, coordinator: true, ha: true},
		{name: "HA without license", args: []string{"--management-port=10000"}, wantErr: "Access to high availability requires an enterprise license"},
		{name: "coordinator id without port", args: []string{"--coordinator-id=1"}, env: licensed, wantErr: "must be set together"},
		{name: "env overrides flag", args: []string{"--management-port=1"}, env: map[string]string{"MEMGRAPH_MANAGEMENT_PORT": "10000",
			"MEMGRAPH_ENTERPRISE_LICENSE": "k", "MEMGRAPH_ORGANIZATION_NAME": "o"}, ha: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o, _, err := ParseOptions(tc.args, env(tc.env))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if o.IsCoordinator() != tc.coordinator || o.IsHA() != tc.ha {
				t.Fatalf("coordinator=%v ha=%v, want %v %v", o.IsCoordinator(), o.IsHA(), tc.coordinator, tc.ha)
			}
		})
	}
}

func TestParseOptionsValuesAndUnknownFlags(t *testing.T) {
	args := []string{"--bolt-port", "7700", "--some-future-flag", "x", "--also-log-to-stderr", "--log-level=TRACE",
		"--storage-snapshot-interval-sec=300", "--data-recovery-on-startup=false", "--instance-down-timeout-sec=2",
		"--coordinator-id=1", "--coordinator-port=12000", "--management-port=10000"}
	o, warnings, err := ParseOptions(args, env(map[string]string{"MEMGRAPH_ENTERPRISE_LICENSE": "k", "MEMGRAPH_ORGANIZATION_NAME": "o",
		"MEMGRAPH_SIM_RAFT_ELECTION": "300ms"}))
	if err != nil {
		t.Fatal(err)
	}
	if o.BoltPort != 7700 || !o.AlsoLogToStderr || o.LogLevel != "TRACE" || o.DataRecovery || o.InstanceDownTimeout != 2*time.Second ||
		o.RaftElection != 300*time.Millisecond || o.CoordinatorServer() != "0.0.0.0:12000" || !o.RestoreReplication {
		t.Fatalf("options %+v", o)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "--some-future-flag") {
		t.Fatalf("warnings %q, want one about --some-future-flag", warnings)
	}
}

// TestParseOptionsDurability: the WAL is on by default with Memgraph's file size, its
// flags are honoured, and MEMGRAPH_SIM_SNAPSHOT_DELAY takes a duration.
func TestParseOptionsDurability(t *testing.T) {
	o, _, err := ParseOptions(nil, env(nil))
	if err != nil || !o.WALEnabled || o.WALFileSize != DefaultWALFileSizeKiB*1024 || o.SnapshotDelay != 0 {
		t.Fatalf("defaults %+v %v", o, err)
	}
	o, warnings, err := ParseOptions([]string{"--storage-wal-enabled=false", "--storage-wal-file-size-kib=4"}, env(map[string]string{"MEMGRAPH_SIM_SNAPSHOT_DELAY": "2s"}))
	if err != nil || o.WALEnabled || o.WALFileSize != 4096 || o.SnapshotDelay != 2*time.Second || len(warnings) != 0 {
		t.Fatalf("options %+v %v %v", o, warnings, err)
	}
	if _, _, err := ParseOptions(nil, env(map[string]string{"MEMGRAPH_SIM_SNAPSHOT_DELAY": "soon"})); err == nil {
		t.Error("a malformed MEMGRAPH_SIM_SNAPSHOT_DELAY was taken")
	}
}
