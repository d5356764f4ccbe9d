package valdchart

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestMatches(t *testing.T) {
	cases := []struct {
		v    any
		t    Type
		want bool
	}{
		{"1", String, true},
		{float64(1), String, false},
		{int32(1), Integer, true},
		{float64(3), Integer, true},
		{1.5, Integer, false},
		{1.5, Number, true},
		{true, Boolean, true},
		{"true", Boolean, false},
		{map[string]any{}, Object, true},
		{[]any{}, Array, true},
		{nil, String, false},
	}
	for _, tc := range cases {
		if got := Matches(tc.v, tc.t); got != tc.want {
			t.Errorf("Matches(%#v, %s) = %v, want %v", tc.v, tc.t, got, tc.want)
		}
	}
}

// TestCheck: the schema error Helm reports for the integer maxUnavailable the operator used
// to write, and nothing for keys the table does not hold or inside open objects.
func TestCheck(t *testing.T) {
	var values map[string]any
	if err := json.Unmarshal([]byte(`{
		"discoverer": {"rollingUpdate": {"maxUnavailable": 1}, "maxUnavailable": "25%", "nodeSelector": {"a": 1}},
		"agent": {"ngt": {"dimension": "768"}, "unknown": {"x": 1}},
		"gateway": {"lb": {"enabled": "yes"}}
	}`), &values); err != nil {
		t.Fatal(err)
	}
	vs := Check(values)
	var got []string
	for _, v := range vs {
		got = append(got, v.Error())
	}
	want := []string{
		"at '/agent/ngt/dimension': got string, want integer",
		"at '/discoverer/rollingUpdate/maxUnavailable': got number, want string",
		"at '/gateway/lb/enabled': got string, want boolean",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if msg := SchemaError(vs[1:2]); msg != "values don't meet the specifications of the schema(s) in the following chart(s):\nvald:\n- at '/discoverer/rollingUpdate/maxUnavailable': got number, want string" {
		t.Errorf("SchemaError: %q", msg)
	}
}

// TestKeysParents: every key's parent is an object entry the walk enters, so no entry is
// unreachable.
func TestKeysParents(t *testing.T) {
	for path := range Keys {
		i := strings.LastIndex(path, ".")
		if i < 0 {
			continue
		}
		parent, ok := Keys[path[:i]]
		if !ok || parent.Type != Object || parent.Open {
			t.Errorf("%s: parent %s is not an object entry", path, path[:i])
		}
	}
}
