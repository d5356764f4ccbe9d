package v1alpha1

import (
	"encoding/json"
	"testing"
)

// TestPodDisruptionBudgetForms: the object form, upstream's earlier string form, and
// values the schema lets through all decode (never an error that would fail a list), and
// PDBMode turns each into the policy applied.
func TestPodDisruptionBudgetForms(t *testing.T) {
	for _, tc := range []struct {
		json       string
		mode, rule PDBMode
	}{
		{`{"podDisruptionBudget":{"mode":"Disabled"}}`, PDBModeDisabled, PDBModeDisabled},
		{`{"podDisruptionBudget":{"mode":"Cluster"}}`, PDBModeCluster, PDBModeCluster},
		{`{"podDisruptionBudget":{}}`, "", PDBModeCluster},
		{`{"podDisruptionBudget":"Disabled"}`, PDBModeDisabled, PDBModeDisabled},
		{`{"podDisruptionBudget":"Managed"}`, PDBModeCluster, PDBModeCluster},
		{`{"podDisruptionBudget":"Shard"}`, "Shard", PDBModeCluster},
		{`{"podDisruptionBudget": 5}`, "5", PDBModeCluster},
		{`{"podDisruptionBudget":true}`, "true", PDBModeCluster},
		{`{"podDisruptionBudget":null}`, "", PDBModeCluster},
		{`{}`, "", PDBModeCluster},
	} {
		var s ValkeyClusterSpec
		if err := json.Unmarshal([]byte(tc.json), &s); err != nil {
			t.Errorf("%s: %v", tc.json, err)
			continue
		}
		var mode PDBMode
		if s.PodDisruptionBudget != nil {
			mode = s.PodDisruptionBudget.Mode
		}
		if mode != tc.mode || s.PDBMode() != tc.rule {
			t.Errorf("%s: mode %q policy %q, want %q and %q", tc.json, mode, s.PDBMode(), tc.mode, tc.rule)
		}
	}
	// Written back, it is the object form.
	out, err := json.Marshal(&PodDisruptionBudgetConfig{Mode: PDBModeDisabled})
	if err != nil || string(out) != `{"mode":"Disabled"}` {
		t.Errorf("marshal: %s %v", out, err)
	}
	// A broken object is still an error.
	var c PodDisruptionBudgetConfig
	if err := json.Unmarshal([]byte(`{"mode":5}`), &c); err == nil {
		t.Error(`{"mode":5} decoded without error`)
	}
}
