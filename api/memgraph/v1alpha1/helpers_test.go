package v1alpha1

import "testing"

func TestImageReference(t *testing.T) {
	digest := "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for _, tc := range []struct {
		spec ImageSpec
		want string
	}{
		{ImageSpec{}, "memgraph/memgraph:3.12.0"},
		{ImageSpec{Repository: "registry:5000/mg", Tag: "3.12.1"}, "registry:5000/mg:3.12.1"},
		{ImageSpec{Tag: "3.12.1", Digest: digest}, "memgraph/memgraph@" + digest},
	} {
		if got := tc.spec.Reference(); got != tc.want {
			t.Errorf("%+v.Reference() = %q, want %q", tc.spec, got, tc.want)
		}
	}
}
