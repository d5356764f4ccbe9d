package v1alpha1

import (
	"bytes"
	"encoding/json"
)

// legacyPDBManaged is mode Cluster in upstream's first API, where podDisruptionBudget was
// a string ("Managed" or "Disabled").
const legacyPDBManaged = "Managed"

// UnmarshalJSON reads the object form, and the string form of upstream's first API:
// "Managed" is mode Cluster, "Disabled" mode Disabled, any other string that mode as
// written. Any other value (a number, a list) is kept as its text in Mode, an unknown
// mode, instead of an error: one object the schema let through must not fail the decoding
// of every cluster in a list. PDBMode treats an unknown mode as Cluster.
func (c *PodDisruptionBudgetConfig) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	var s string
	if err := json.Unmarshal(data, &s); err == nil {
		switch s {
		case legacyPDBManaged:
			*c = PodDisruptionBudgetConfig{Mode: PDBModeCluster}
		default: // "Disabled" is the mode's own name
			*c = PodDisruptionBudgetConfig{Mode: PDBMode(s)}
		}
		return nil
	}
	if len(data) > 0 && data[0] == '{' {
		type plain PodDisruptionBudgetConfig
		var p plain
		if err := json.Unmarshal(data, &p); err != nil {
			return err
		}
		*c = PodDisruptionBudgetConfig(p)
		return nil
	}
	*c = PodDisruptionBudgetConfig{Mode: PDBMode(data)}
	return nil
}
