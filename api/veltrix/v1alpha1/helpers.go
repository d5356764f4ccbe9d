package v1alpha1

// ImageRef is the server container's image: the repository in image tagged with version.
func (s *VeltrixClusterSpec) ImageRef() string {
	return s.Image + ":" + s.Version
}

// XFSPercent is the XFS share of each disk the node agent is asked for (its
// PrepareDisksRequest.xfs_percent): 0, the whole disk XFS, unless rawVLog is enabled.
func (s *VeltrixClusterSpec) XFSPercent() uint32 {
	if !s.RawVLog.Enabled || s.RawVLog.XFSPartitionPercent < 1 {
		return 0
	}
	return uint32(s.RawVLog.XFSPartitionPercent)
}

// NVMeOnlyOrDefault reports whether only NVMe devices may be prepared; unset (an object built in
// Go, not read from the API server) means the schema's default.
func (d *DiskSelector) NVMeOnlyOrDefault() bool {
	if d.NVMeOnly == nil {
		return DefaultNVMeOnly
	}
	return *d.NVMeOnly
}
