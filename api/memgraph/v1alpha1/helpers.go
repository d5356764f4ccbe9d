package v1alpha1

import "strconv"

// Reference is the image reference a container runs: repository@digest when a digest is
// set (it pins the image, so the tag is ignored), else repository:tag; empty fields fall
// back to the schema defaults.
func (s ImageSpec) Reference() string {
	repo := s.Repository
	if repo == "" {
		repo = DefaultImageRepository
	}
	if s.Digest != "" {
		return repo + "@" + s.Digest
	}
	tag := s.Tag
	if tag == "" {
		tag = DefaultImageTag
	}
	return repo + ":" + tag
}

// WhenScaled is what happens to the claims of instances a scale-down retires:
// RetentionPolicyWhenScaled when set, else RetentionPolicy (the one field both follow
// unless told otherwise), else the default.
func (s StorageSpec) WhenScaled() RetentionAction {
	if s.RetentionPolicyWhenScaled != nil && *s.RetentionPolicyWhenScaled != "" {
		return *s.RetentionPolicyWhenScaled
	}
	return s.WhenDeleted()
}

// WhenDeleted is what happens to the claims when the MemgraphCluster is deleted.
func (s StorageSpec) WhenDeleted() RetentionAction {
	if s.RetentionPolicy == "" {
		return DefaultRetention
	}
	return s.RetentionPolicy
}

// ModeOf is the replication mode of the data instance at ordinal: its entry in Instances,
// else Mode, else the default.
func (s ReplicationSpec) ModeOf(ordinal int32) ReplicationMode {
	for _, i := range s.Instances {
		if i.Ordinal == ordinal && i.Mode != "" {
			return i.Mode
		}
	}
	if s.Mode == "" {
		return DefaultReplicationMode
	}
	return s.Mode
}

// Setting is one coordinator setting as SET COORDINATOR SETTING names and spells it.
type Setting struct{ Name, Value string }

// Settings are the coordinator settings the operator keeps, in a fixed order, with the
// defaults filled in.
func (s CoordinatorSettings) Settings() []Setting {
	down, freq := s.InstanceDownTimeoutSec, s.InstanceHealthCheckFrequencySec
	if down <= 0 {
		down = DefaultInstanceDownTimeoutSec
	}
	if freq <= 0 {
		freq = DefaultInstanceHealthCheckFrequencySec
	}
	syncOnly := DefaultSyncFailoverOnly
	if s.SyncFailoverOnly != nil {
		syncOnly = *s.SyncFailoverOnly
	}
	return []Setting{
		{Name: "instance_down_timeout_sec", Value: strconv.Itoa(int(down))},
		{Name: "instance_health_check_frequency_sec", Value: strconv.Itoa(int(freq))},
		{Name: "sync_failover_only", Value: strconv.FormatBool(syncOnly)},
	}
}
