package memgraphsim

import (
	"reflect"
	"testing"
)

func TestParseQuery(t *testing.T) {
	cases := []struct {
		q    string
		want Command
	}{
		{`ADD COORDINATOR 2 WITH CONFIG {"bolt_server": "c2:7687", "coordinator_server": "c2:12000", "management_server": "c2:10000"};`,
			Command{Kind: KindAddCoordinator, ID: 2, Config: map[string]string{"bolt_server": "c2:7687", "coordinator_server": "c2:12000", "management_server": "c2:10000"}}},
		{`remove coordinator 3`, Command{Kind: KindRemoveCoordinator, ID: 3}},
		{`REGISTER INSTANCE demo_data_0 AS ASYNC WITH CONFIG {"bolt_server": "d0:7687", "management_server": "d0:10000", "replication_server": "d0:20000"}`,
			Command{Kind: KindRegisterInstance, Name: "demo_data_0", Mode: "async", Config: map[string]string{"bolt_server": "d0:7687", "management_server": "d0:10000", "replication_server": "d0:20000"}}},
		{`REGISTER INSTANCE i WITH CONFIG {bolt_server: 'a:1', management_server: 'a:2', replication_server: 'a:3'}`,
			Command{Kind: KindRegisterInstance, Name: "i", Mode: "sync", Config: map[string]string{"bolt_server": "a:1", "management_server": "a:2", "replication_server": "a:3"}}},
		{`UNREGISTER INSTANCE i`, Command{Kind: KindUnregisterInstance, Name: "i"}},
		{`SET INSTANCE i TO MAIN`, Command{Kind: KindSetMain, Name: "i"}},
		{`DEMOTE INSTANCE i`, Command{Kind: KindDemote, Name: "i"}},
		{`YIELD LEADERSHIP`, Command{Kind: KindYieldLeadership}},
		{`SHOW INSTANCES;`, Command{Kind: KindShowInstances}},
		{`SHOW INSTANCE`, Command{Kind: KindShowInstance}},
		{`SHOW REPLICATION LAG`, Command{Kind: KindShowReplicationLag}},
		{`SHOW REPLICATION ROLE`, Command{Kind: KindShowReplicationRole}},
		{`SHOW STORAGE INFO`, Command{Kind: KindShowStorageInfo}},
		{`CREATE (:Person:Admin {name: "ann", age: 42, score: 1.5, ok: true}), (n:City {name: $city})`,
			Command{Kind: KindCreate, Nodes: []NodePattern{
				{Labels: []string{"Person", "Admin"}, Props: map[string]any{"name": "ann", "age": int64(42), "score": 1.5, "ok": true}},
				{Labels: []string{"City"}, Props: map[string]any{"name": "Oslo"}}}}},
		{`MATCH (n:Person) RETURN count(n)`, Command{Kind: KindCount, Label: "Person", Column: "count(n)"}},
		{`MATCH (n) RETURN count(*) AS c`, Command{Kind: KindCount, Column: "c"}},
		{`MATCH (n:City) RETURN n`, Command{Kind: KindMatchReturn, Label: "City", Column: "n"}},
		{`RETURN 1`, Command{Kind: KindReturnLiteral, Value: int64(1), Column: "1"}},
	}
	for _, tc := range cases {
		got, err := ParseQuery(tc.q, map[string]any{"city": "Oslo"})
		if err != nil {
			t.Errorf("%s: %v", tc.q, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.q, got, tc.want)
		}
	}
}

func TestParseQueryRejects(t *testing.T) {
	for _, q := range []string{
		`MATCH (n:Person) DETACH DELETE n`,
		`CREATE (:A {x: })`,
		`SET INSTANCE i TO REPLICA`,
		`ADD COORDINATOR x WITH CONFIG {}`,
		`MATCH (n) RETURN count(m)`,
		`CREATE (:A {name: $missing})`,
		`SHOW INSTANCES extra`,
	} {
		if _, err := ParseQuery(q, nil); err == nil {
			t.Errorf("%s: parsed, want an error", q)
		}
	}
}
