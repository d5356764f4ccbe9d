package v1alpha1

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestImageRef(t *testing.T) {
	s := VeltrixClusterSpec{Image: "registry.local:5000/veltrixdb", Version: "1.17.0"}
	if got := s.ImageRef(); got != "registry.local:5000/veltrixdb:1.17.0" {
		t.Errorf("ImageRef %q", got)
	}
}

func TestXFSPercent(t *testing.T) {
	cases := []struct {
		raw  RawVLogSpec
		want uint32
	}{
		{raw: RawVLogSpec{XFSPartitionPercent: 20}, want: 0}, // disabled: whole disk XFS
		{raw: RawVLogSpec{Enabled: true, XFSPartitionPercent: 20}, want: 20},
		{raw: RawVLogSpec{Enabled: true}, want: 0}, // never a 0% XFS split, even if built in Go
	}
	for _, tc := range cases {
		s := VeltrixClusterSpec{RawVLog: tc.raw}
		if got := s.XFSPercent(); got != tc.want {
			t.Errorf("%+v: XFSPercent %d, want %d", tc.raw, got, tc.want)
		}
	}
}

func TestNVMeOnlyOrDefault(t *testing.T) {
	no, yes := false, true
	for _, tc := range []struct {
		sel  DiskSelector
		want bool
	}{{DiskSelector{}, DefaultNVMeOnly}, {DiskSelector{NVMeOnly: &no}, false}, {DiskSelector{NVMeOnly: &yes}, true}} {
		if got := tc.sel.NVMeOnlyOrDefault(); got != tc.want {
			t.Errorf("%+v: %v, want %v", tc.sel, got, tc.want)
		}
	}
}

// versionCases are tags and whether they read as a version below MinVersion (the
// validation package's admission test sends such tags to the API server and checks that
// the CRD's rule agrees with VersionBelowMin).
var versionCases = []struct {
	Version string
	Below   bool
}{
	{"1.17.0", false}, {"1.17", false}, {"v1.17.0", false}, {"1.17.0-rc.1", false}, {"1.17.3", false},
	{"1.18.0", false}, {"1.20.1", false}, {"1.100.0", false}, {"2.0.0", false}, {"10.0", false},
	{"01.017.0", false}, {"99999999999999999999.0", false},
	{"1.16.2", true}, {"1.16", true}, {"v1.16.0", true}, {"1.16.0-hotfix", true}, {"1.9.0", true},
	{"1.0.0", true}, {"1.1", true}, {"0.99.0", true}, {"0.99999999999999999999.1", true}, {"1.06.0", true},
	{"latest", false}, {"main", false}, {"nightly-2026-12-01", false}, {"1", false}, {"sha-1a2b3c", false},
}

func TestVersionBelowMin(t *testing.T) {
	for _, tc := range versionCases {
		if got := VersionBelowMin(tc.Version); got != tc.Below {
			t.Errorf("VersionBelowMin(%q) = %v, want %v", tc.Version, got, tc.Below)
		}
	}
	if VersionBelowMin(MinVersion) || VersionBelowMin(DefaultVersion) {
		t.Errorf("MinVersion %s or DefaultVersion %s below the minimum", MinVersion, DefaultVersion)
	}
}

func TestURingBridge(t *testing.T) {
	for _, tc := range []struct {
		spec VeltrixClusterSpec
		env  string
	}{
		{VeltrixClusterSpec{}, ""},
		{VeltrixClusterSpec{URingBridge: URingBridgeDisabled}, ""},
		{VeltrixClusterSpec{URingBridge: URingBridgeEnabled}, "on"},
		{VeltrixClusterSpec{URingBridge: URingBridgeSQPoll}, "sqpoll"},
	} {
		if got := tc.spec.URingBridgeEnv(); got != tc.env {
			t.Errorf("%+v: URingBridgeEnv %q, want %q", tc.spec, got, tc.env)
		}
	}
}

// TestPodSeccompProfile: the spec's profile when set (copied, not shared), otherwise
// Unconfined with rawVLog only, as the issue asks.
func TestPodSeccompProfile(t *testing.T) {
	file := "operator/io-uring.json"
	for _, tc := range []struct {
		spec      VeltrixClusterSpec
		want      corev1.SeccompProfileType
		localhost string
	}{
		{VeltrixClusterSpec{}, corev1.SeccompProfileTypeRuntimeDefault, ""},
		{VeltrixClusterSpec{RawVLog: RawVLogSpec{Enabled: true}}, corev1.SeccompProfileTypeUnconfined, ""},
		{VeltrixClusterSpec{RawVLog: RawVLogSpec{Enabled: true}, SeccompProfile: &SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: &file}},
			corev1.SeccompProfileTypeLocalhost, file},
		{VeltrixClusterSpec{URingBridge: URingBridgeEnabled, SeccompProfile: &SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}}, corev1.SeccompProfileTypeUnconfined, ""},
		{VeltrixClusterSpec{SeccompProfile: &SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}, corev1.SeccompProfileTypeRuntimeDefault, ""},
	} {
		got := tc.spec.PodSeccompProfile()
		if got.Type != tc.want || (got.LocalhostProfile == nil) != (tc.localhost == "") || (got.LocalhostProfile != nil && *got.LocalhostProfile != tc.localhost) {
			t.Errorf("%+v: PodSeccompProfile %+v, want %s %q", tc.spec, got, tc.want, tc.localhost)
		}
		if got.LocalhostProfile != nil && got.LocalhostProfile == tc.spec.SeccompProfile.LocalhostProfile {
			t.Errorf("%+v: the profile shares the spec's pointer", tc.spec)
		}
	}
}
