package memgraph

import (
	"fmt"
	"strings"
)

// ParseInstances reads SHOW INSTANCES rows (keyed by column name).
func ParseInstances(rows []map[string]any) ([]Instance, error) {
	out := make([]Instance, 0, len(rows))
	for i, r := range rows {
		var in Instance
		var err error
		if in.Name, err = stringCol(r, "name"); err != nil {
			return nil, fmt.Errorf("row %d: %w", i, err)
		}
		in.BoltServer, _ = stringCol(r, "bolt_server")
		in.CoordinatorServer, _ = stringCol(r, "coordinator_server")
		in.ManagementServer, _ = stringCol(r, "management_server")
		in.Health, _ = stringCol(r, "health")
		in.Health = strings.ToLower(in.Health)
		if in.Role, err = stringCol(r, "role"); err != nil {
			return nil, fmt.Errorf("row %d: %w", i, err)
		}
		in.Role = strings.ToLower(in.Role)
		if v, ok := r["last_succ_resp_ms"]; ok && v != nil {
			ms, ok := toInt64(v)
			if !ok {
				return nil, fmt.Errorf("row %d: last_succ_resp_ms is %T", i, v)
			}
			in.LastResponseMS = ms
		}
		out = append(out, in)
	}
	return out, nil
}

// ParseLag reads SHOW REPLICATION LAG rows: instance_name and data_info, a map of
// database name to {num_committed_txns, num_txns_behind_main}.
func ParseLag(rows []map[string]any) ([]Lag, error) {
	out := make([]Lag, 0, len(rows))
	for i, r := range rows {
		name, err := stringCol(r, "instance_name")
		if err != nil {
			return nil, fmt.Errorf("row %d: %w", i, err)
		}
		l := Lag{Instance: name, Databases: map[string]DatabaseLag{}}
		info, ok := r["data_info"].(map[string]any)
		if !ok && r["data_info"] != nil {
			return nil, fmt.Errorf("row %d: data_info is %T", i, r["data_info"])
		}
		for db, v := range info {
			m, ok := v.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("row %d: data_info[%q] is %T", i, db, v)
			}
			committed, ok1 := toInt64(m["num_committed_txns"])
			behind, ok2 := toInt64(m["num_txns_behind_main"])
			if !ok1 || !ok2 {
				return nil, fmt.Errorf("row %d: data_info[%q] lacks integer num_committed_txns/num_txns_behind_main", i, db)
			}
			l.Databases[db] = DatabaseLag{Committed: committed, Behind: behind}
		}
		out = append(out, l)
	}
	return out, nil
}

// ParseCoordinatorSettings reads SHOW COORDINATOR SETTINGS rows into name -> value.
func ParseCoordinatorSettings(rows []map[string]any) (map[string]string, error) {
	out := make(map[string]string, len(rows))
	for i, r := range rows {
		name, err := stringCol(r, "setting_name")
		if err != nil {
			return nil, fmt.Errorf("row %d: %w", i, err)
		}
		value, err := stringCol(r, "setting_value")
		if err != nil {
			return nil, fmt.Errorf("row %d: %w", i, err)
		}
		out[name] = value
	}
	return out, nil
}

// ParseReplicas reads SHOW REPLICAS rows: name and sync_mode ("sync", "async",
// "strict_sync"), the mode returned upper-cased as REGISTER INSTANCE spells it.
func ParseReplicas(rows []map[string]any) ([]Replica, error) {
	out := make([]Replica, 0, len(rows))
	for i, r := range rows {
		name, err := stringCol(r, "name")
		if err != nil {
			return nil, fmt.Errorf("row %d: %w", i, err)
		}
		mode, err := stringCol(r, "sync_mode")
		if err != nil {
			return nil, fmt.Errorf("row %d: %w", i, err)
		}
		mode = strings.ToUpper(mode)
		switch mode {
		case ModeSync, ModeAsync, ModeStrictSync:
		default:
			return nil, fmt.Errorf("row %d: sync_mode %q", i, mode)
		}
		rep := Replica{Name: name, Mode: mode}
		if rep.Databases, err = parseReplicaData(r["data_info"]); err != nil {
			return nil, fmt.Errorf("row %d: %w", i, err)
		}
		out = append(out, rep)
	}
	return out, nil
}

// parseReplicaData reads SHOW REPLICAS' data_info: database name to {ts, behind, status}.
func parseReplicaData(v any) (map[string]ReplicaDatabase, error) {
	if v == nil {
		return nil, nil
	}
	info, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("data_info is %T", v)
	}
	out := make(map[string]ReplicaDatabase, len(info))
	for db, e := range info {
		m, ok := e.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("data_info[%q] is %T", db, e)
		}
		ts, ok1 := toInt64(m["ts"])
		behind, ok2 := toInt64(m["behind"])
		status, ok3 := m["status"].(string)
		if !ok1 || !ok2 || !ok3 {
			return nil, fmt.Errorf("data_info[%q] lacks integer ts and behind and a status", db)
		}
		out[db] = ReplicaDatabase{Timestamp: ts, Behind: behind, Status: strings.ToLower(status)}
	}
	return out, nil
}

func stringCol(r map[string]any, col string) (string, error) {
	v, ok := r[col]
	if !ok {
		return "", fmt.Errorf("no column %q", col)
	}
	if v == nil {
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("column %q is %T, want string", col, v)
	}
	return s, nil
}

func toInt64(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case int:
		return int64(n), true
	case int32:
		return int64(n), true
	case float64:
		if n != float64(int64(n)) {
			return 0, false
		}
		return int64(n), true
	}
	return 0, false
}
