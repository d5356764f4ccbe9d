package memgraph

import (
	"reflect"
	"testing"
)

func TestParseInstances(t *testing.T) {
	rows := []map[string]any{
		{"name": "coordinator_1", "bolt_server": "c0:7687", "coordinator_server": "c0:12000",
			"management_server": "c0:10000", "health": "up", "role": "leader", "last_succ_resp_ms": int64(0)},
		{"name": "coordinator_2", "bolt_server": "", "coordinator_server": "c1:12000",
			"management_server": "c1:10000", "health": "DOWN", "role": "follower", "last_succ_resp_ms": int64(5012)},
		{"name": "d_0", "bolt_server": "d0:7687", "coordinator_server": "",
			"management_server": "d0:10000", "health": "up", "role": "MAIN", "last_succ_resp_ms": int64(12)},
		{"name": "d_1", "bolt_server": "d1:7687", "coordinator_server": "",
			"management_server": "d1:10000", "health": "down", "role": "unknown", "last_succ_resp_ms": nil},
	}
	got, err := ParseInstances(rows)
	if err != nil {
		t.Fatal(err)
	}
	want := []Instance{
		{"coordinator_1", "c0:7687", "c0:12000", "c0:10000", "up", "leader", 0},
		{"coordinator_2", "", "c1:12000", "c1:10000", "down", "follower", 5012},
		{"d_0", "d0:7687", "", "d0:10000", "up", "main", 12},
		{"d_1", "d1:7687", "", "d1:10000", "down", "unknown", 0},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	if l, ok := LeaderOf(got); !ok || l.Name != "coordinator_1" {
		t.Errorf("LeaderOf = %v, %v", l, ok)
	}
	if m, ok := MainOf(got); !ok || m.Name != "d_0" {
		t.Errorf("MainOf = %v, %v", m, ok)
	}
	if !got[1].IsCoordinator() || got[3].IsCoordinator() {
		t.Errorf("IsCoordinator wrong: %v %v", got[1].IsCoordinator(), got[3].IsCoordinator())
	}
	if _, ok := LeaderOf(got[1:]); ok {
		t.Error("LeaderOf found a leader in a view naming none")
	}

	for _, bad := range [][]map[string]any{
		{{"bolt_server": "x", "role": "main"}},
		{{"name": 7, "role": "main"}},
		{{"name": "x", "role": "main", "last_succ_resp_ms": "soon"}},
	} {
		if _, err := ParseInstances(bad); err == nil {
			t.Errorf("ParseInstances(%v) accepted a malformed row", bad)
		}
	}
}

func TestParseLag(t *testing.T) {
	rows := []map[string]any{
		{"instance_name": "d_1", "data_info": map[string]any{
			"memgraph": map[string]any{"num_committed_txns": int64(10), "num_txns_behind_main": int64(0)}}},
		{"instance_name": "d_2", "data_info": map[string]any{
			"memgraph": map[string]any{"num_committed_txns": int64(7), "num_txns_behind_main": int64(3)},
			"other":    map[string]any{"num_committed_txns": int64(1), "num_txns_behind_main": int64(0)}}},
		{"instance_name": "d_3", "data_info": map[string]any{}},
	}
	got, err := ParseLag(rows)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].Databases["memgraph"] != (DatabaseLag{10, 0}) || got[1].Databases["memgraph"] != (DatabaseLag{7, 3}) {
		t.Fatalf("got %+v", got)
	}
	if !got[0].CaughtUp() || got[1].CaughtUp() || got[2].CaughtUp() {
		t.Errorf("CaughtUp: %v %v %v, want true false false", got[0].CaughtUp(), got[1].CaughtUp(), got[2].CaughtUp())
	}
	if _, err := ParseLag([]map[string]any{{"instance_name": "x", "data_info": map[string]any{"m": map[string]any{"num_committed_txns": "a"}}}}); err == nil {
		t.Error("ParseLag accepted a non-integer count")
	}
}

func TestParseCoordinatorSettingsAndReplicas(t *testing.T) {
	settings, err := ParseCoordinatorSettings([]map[string]any{
		{"setting_name": "sync_failover_only", "setting_value": "true"},
		{"setting_name": "instance_down_timeout_sec", "setting_value": "5"},
	})
	if err != nil || settings["sync_failover_only"] != "true" || settings["instance_down_timeout_sec"] != "5" || len(settings) != 2 {
		t.Errorf("settings %v, %v", settings, err)
	}
	if _, err := ParseCoordinatorSettings([]map[string]any{{"setting_name": "x", "setting_value": int64(5)}}); err == nil {
		t.Error("a non-string value parsed")
	}
	// Memgraph's data_info: per database {ts, behind, status}; system_info may be null.
	reps, err := ParseReplicas([]map[string]any{
		{"name": "d_1", "sync_mode": "strict_sync", "system_info": nil, "data_info": map[string]any{"memgraph": map[string]any{"ts": int64(7), "behind": int64(0), "status": "ready"}}},
		{"name": "d_2", "sync_mode": "async", "data_info": map[string]any{"memgraph": map[string]any{"ts": int64(5), "behind": int64(2), "status": "replicating"}}},
		{"name": "d_3", "sync_mode": "sync", "data_info": map[string]any{"memgraph": map[string]any{"ts": int64(7), "behind": int64(0), "status": "ready"},
			"tenant": map[string]any{"ts": int64(3), "behind": int64(0), "status": "recovery"}}},
		{"name": "d_4", "sync_mode": "sync"},
	})
	want := []Replica{
		{Name: "d_1", Mode: ModeStrictSync, Databases: map[string]ReplicaDatabase{"memgraph": {Timestamp: 7, Status: "ready"}}},
		{Name: "d_2", Mode: ModeAsync, Databases: map[string]ReplicaDatabase{"memgraph": {Timestamp: 5, Behind: 2, Status: "replicating"}}},
		{Name: "d_3", Mode: ModeSync, Databases: map[string]ReplicaDatabase{"memgraph": {Timestamp: 7, Status: "ready"}, "tenant": {Timestamp: 3, Status: "recovery"}}},
		{Name: "d_4", Mode: ModeSync},
	}
	if err != nil || !reflect.DeepEqual(reps, want) {
		t.Errorf("replicas %+v, %v", reps, err)
	}
	// Caught up: ready and nothing behind in every database; no data_info proves nothing.
	for i, wantCaughtUp := range []bool{true, false, false, false} {
		if reps[i].CaughtUp() != wantCaughtUp {
			t.Errorf("%s caught up: %v", reps[i].Name, !wantCaughtUp)
		}
	}
	for _, bad := range []map[string]any{{"name": "d_1", "sync_mode": "semi"},
		{"name": "d_1", "sync_mode": "sync", "data_info": map[string]any{"memgraph": map[string]any{"ts": "7", "behind": int64(0), "status": "ready"}}}} {
		if _, err := ParseReplicas([]map[string]any{bad}); err == nil {
			t.Errorf("%v parsed", bad)
		}
	}
	if got := ClassifyRefusal("Cluster cannot consists of both STRICT_SYNC and SYNC replicas. The valid cluster consists of either STRICT_SYNC and ASYNC or SYNC and ASYNC replicas."); got != RefusalModeMix {
		t.Errorf("mix refusal classified %v", got)
	}
}
