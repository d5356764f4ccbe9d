package v1alpha1

import (
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// ImageRef is the server container's image: the repository in image tagged with version.
func (s *VeltrixClusterSpec) ImageRef() string {
	return s.Image + ":" + s.Version
}

// URingBridgeEnv is the server's VELTRIXDB_URING_BRIDGE value for the spec's bridge: on,
// sqpoll, or "" when the bridge is off (the server's default; the variable is then not
// set, so clusters without the bridge keep their engine environment).
func (s *VeltrixClusterSpec) URingBridgeEnv() string {
	switch s.URingBridge {
	case URingBridgeEnabled:
		return "on"
	case URingBridgeSQPoll:
		return "sqpoll"
	}
	return ""
}

// PodSeccompProfile is the members' seccomp profile: spec.seccompProfile when set;
// otherwise Unconfined with rawVLog (its raw partition path calls io_uring_setup, which
// RuntimeDefault blocks) and RuntimeDefault without. (The io_uring bridge and net uring
// have the CRD require seccompProfile: they never run under a profile picked for them.)
func (s *VeltrixClusterSpec) PodSeccompProfile() *corev1.SeccompProfile {
	if p := s.SeccompProfile; p != nil {
		out := &corev1.SeccompProfile{Type: p.Type}
		if p.LocalhostProfile != nil {
			out.LocalhostProfile = ptr(*p.LocalhostProfile)
		}
		return out
	}
	if s.RawVLog.Enabled {
		return &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}
	}
	return &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
}

func ptr[T any](v T) *T { return &v }

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

// versionRE reads a version tag as the CRD's version rule does: MAJOR.MINOR[.PATCH], an
// optional leading v, then anything after '.', '-' or '+'.
var versionRE = regexp.MustCompile(`^v?([0-9]+)\.([0-9]+)([.+-].*)?$`)

// VersionBelowMin reports whether the tag v reads as a version below MinVersion (1.17).
// The CRD refuses such a version; a cluster stored before that rule (or through a CRD
// without it) may still carry one, and the operator must not roll its pods to it. A tag
// that does not read as a version (latest, a branch) is never below. Numbers are compared
// as digit strings, as the CRD's rule does, so no length overflows.
func VersionBelowMin(v string) bool {
	m := versionRE.FindStringSubmatch(v)
	if m == nil {
		return false
	}
	major, minor := strings.TrimLeft(m[1], "0"), strings.TrimLeft(m[2], "0")
	switch {
	case major == "":
		return true // 0.x
	case major != "1":
		return false // 2 and later
	}
	return len(minor) < 2 || len(minor) == 2 && minor < "17"
}
