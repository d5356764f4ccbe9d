package memgraph

import (
	"testing"
)

func TestQueryText(t *testing.T) {
	cases := []struct{ got, want string }{
		{AddCoordinator(2, "c-1.svc:7687", "c-1.svc:12000", "c-1.svc:10000"),
			`ADD COORDINATOR 2 WITH CONFIG {"bolt_server": "c-1.svc:7687", "coordinator_server": "c-1.svc:12000", "management_server": "c-1.svc:10000"}`},
		{RemoveCoordinator(4), "REMOVE COORDINATOR 4"},
		{RegisterInstance("demo_data_0", "", "d-0:7687", "d-0:10000", "d-0:20000"),
			`REGISTER INSTANCE demo_data_0 WITH CONFIG {"bolt_server": "d-0:7687", "management_server": "d-0:10000", "replication_server": "d-0:20000"}`},
		{RegisterInstance("demo_data_1", ModeAsync, "d-1:7687", "d-1:10000", "d-1:20000"),
			`REGISTER INSTANCE demo_data_1 AS ASYNC WITH CONFIG {"bolt_server": "d-1:7687", "management_server": "d-1:10000", "replication_server": "d-1:20000"}`},
		{RegisterInstance("demo_data_2", ModeStrictSync, "d-2:7687", "d-2:10000", "d-2:20000"),
			`REGISTER INSTANCE demo_data_2 AS STRICT_SYNC WITH CONFIG {"bolt_server": "d-2:7687", "management_server": "d-2:10000", "replication_server": "d-2:20000"}`},
		{RegisterInstance("demo_data_3", ModeSync, "d-3:7687", "d-3:10000", "d-3:20000"),
			`REGISTER INSTANCE demo_data_3 WITH CONFIG {"bolt_server": "d-3:7687", "management_server": "d-3:10000", "replication_server": "d-3:20000"}`},
		{SetCoordinatorSetting("instance_down_timeout_sec", "7"), `SET COORDINATOR SETTING "instance_down_timeout_sec" TO "7"`},
		{UnregisterInstance("demo_data_2"), "UNREGISTER INSTANCE demo_data_2"},
		{SetInstanceToMain("demo_data_1"), "SET INSTANCE demo_data_1 TO MAIN"},
		{DemoteInstance("demo_data_2"), "DEMOTE INSTANCE demo_data_2"},
		// Names that are not plain identifiers are backtick-quoted, backticks doubled.
		{SetInstanceToMain("1demo_data_0"), "SET INSTANCE `1demo_data_0` TO MAIN"},
		{DemoteInstance("a`b c"), "DEMOTE INSTANCE `a``b c`"},
		{UnregisterInstance("main"), "UNREGISTER INSTANCE `main`"},
		// Values cannot close the literal or inject text.
		{RegisterInstance("x", "", `evil"}; MATCH (n) DETACH DELETE n //`, `a\b`, "l\nm"),
			`REGISTER INSTANCE x WITH CONFIG {"bolt_server": "evil\"}; MATCH (n) DETACH DELETE n //", "management_server": "a\\b", "replication_server": "l\nm"}`},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("got  %s\nwant %s", c.got, c.want)
		}
	}
}

func TestQuoteString(t *testing.T) {
	cases := map[string]string{
		"":          `""`,
		"plain":     `"plain"`,
		`q"uote`:    `"q\"uote"`,
		`it's`:      `"it\'s"`,
		"tab\there": `"tab\there"`,
		"\x01":      `"\u0001"`,
		"ünï":       `"ünï"`,
	}
	for in, want := range cases {
		if got := QuoteString(in); got != want {
			t.Errorf("QuoteString(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestIsPlainName(t *testing.T) {
	for name, want := range map[string]bool{
		"demo_data_0": true, "_x": true, "A9": true,
		"": false, "9a": false, "a-b": false, "a b": false, "ä": false, "TO": false, "main": false,
	} {
		if got := IsPlainName(name); got != want {
			t.Errorf("IsPlainName(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestCoordinatorNames(t *testing.T) {
	if got := CoordinatorName(3); got != "coordinator_3" {
		t.Fatalf("CoordinatorName(3) = %q", got)
	}
	for name, want := range map[string]int{"coordinator_1": 1, "coordinator_12": 12} {
		if id, ok := CoordinatorID(name); !ok || id != want {
			t.Errorf("CoordinatorID(%q) = %d, %v", name, id, ok)
		}
	}
	for _, name := range []string{"coordinator_", "coordinator_x", "coordinator_01", "coordinator_-1", "instance_1"} {
		if id, ok := CoordinatorID(name); ok {
			t.Errorf("CoordinatorID(%q) = %d, want no id", name, id)
		}
	}
}
