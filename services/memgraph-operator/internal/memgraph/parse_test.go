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
	reps, err := ParseReplicas([]map[string]any{
		{"name": "d_1", "sync_mode": "strict_sync"}, {"name": "d_2", "sync_mode": "async"}, {"name": "d_3", "sync_mode": "sync"},
	})
	want := []Replica{{Name: "d_1", Mode: ModeStrictSync}, {Name: "d_2", Mode: ModeAsync}, {Name: "d_3", Mode: ModeSync}}
	if err != nil || len(reps) != 3 || reps[0] != want[0] || reps[1] != want[1] || reps[2] != want[2] {
		t.Errorf("replicas %v, %v", reps, err)
	}
	if _, err := ParseReplicas([]map[string]any{{"name": "d_1", "sync_mode": "semi"}}); err == nil {
		t.Error("an unknown sync_mode parsed")
	}
	if got := ClassifyRefusal("Cluster cannot consists of both STRICT_SYNC and SYNC replicas. The valid cluster consists of either STRICT_SYNC and ASYNC or SYNC and ASYNC replicas."); got != RefusalModeMix {
		t.Errorf("mix refusal classified %v", got)
	}
}
