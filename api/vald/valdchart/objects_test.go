package valdchart

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestPriorityClasses: the chart's PriorityClasses in the order Helm applies them, named
// after the namespace and each component's name, valued podPriority.value (a JSON number
// or the int64 the API server decodes) or the chart's default; none for a component or a
// podPriority that is disabled.
func TestPriorityClasses(t *testing.T) {
	var fromJSON map[string]any
	if err := json.Unmarshal([]byte(`{
		"agent": {"name": "vald-agent-tokyo", "podPriority": {"value": 2000000}},
		"discoverer": {"podPriority": {"enabled": false, "value": 5}},
		"gateway": {"lb": {"podPriority": {"enabled": true, "value": null}}},
		"manager": {"index": {"name": "index-tokyo", "podPriority": {"value": 7}}}
	}`), &fromJSON); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		values map[string]any
		want   []PriorityClass
	}{
		{"defaults", nil, []PriorityClass{
			{"ns-vald-agent-priority", 1000000000}, {"ns-vald-discoverer-priority", 1000000},
			{"ns-vald-lb-gateway-priority", 1000000}, {"ns-vald-manager-index-priority", 1000000},
		}},
		{"values from JSON", fromJSON, []PriorityClass{
			{"ns-vald-agent-tokyo-priority", 2000000}, {"ns-vald-lb-gateway-priority", 1000000},
			{"ns-index-tokyo-priority", 7},
		}},
		{"values from the API server, components disabled", map[string]any{
			"agent":   map[string]any{"podPriority": map[string]any{"value": int64(3)}},
			"gateway": map[string]any{"lb": map[string]any{"enabled": false, "podPriority": map[string]any{"value": int64(4)}}},
			"manager": map[string]any{"index": map[string]any{"enabled": false}},
		}, []PriorityClass{{"ns-vald-agent-priority", 3}, {"ns-vald-discoverer-priority", 1000000}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := PriorityClasses("ns", tc.values)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("PriorityClasses = %v, want %v", got, tc.want)
			}
			// Each is among the objects the chart renders.
			objs := map[Resource]bool{}
			for _, o := range Objects("vr", "ns", tc.values) {
				objs[o] = true
			}
			for _, pc := range got {
				if !objs[Resource{Kind: "PriorityClass", Name: pc.Name}] {
					t.Errorf("%s is not among the rendered objects", pc.Name)
				}
			}
		})
	}
}
