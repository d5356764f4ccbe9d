package v1alpha1

import "testing"

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
