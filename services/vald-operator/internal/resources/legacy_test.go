package resources

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// goldenDocs splits a golden file into its ValdReleases' YAML.
func goldenDocs(t *testing.T, path string) []string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(raw), "---\n")
	return docs[1:]
}

// TestLegacyNamesBuild: a ValdRelease that exists without the per-cluster name keys is
// built exactly as the operator before per-cluster names built it (testdata/legacy holds
// that operator's golden files, from the commit before edccfb4), so an upgrade renames
// nothing; the release's other clusters keep their per-cluster names. Two legacy clusters
// of one release would render the same objects: the build fails naming both.
func TestLegacyNamesBuild(t *testing.T) {
	for _, tc := range goldenCases() {
		t.Run(tc.golden, func(t *testing.T) {
			cfg := testConfig()
			if tc.config != nil {
				tc.config(&cfg)
			}
			vor := loadRelease(t, tc.input)
			current, err := DesiredValdReleases(Input{Release: vor, Nodes: tc.nodes}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			legacy := current[0].Name
			vrs, err := DesiredValdReleases(Input{Release: vor, Nodes: tc.nodes, Legacy: map[string]bool{legacy: true}}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			old := goldenDocs(t, filepath.Join("testdata", "legacy", tc.golden+".golden.yaml"))
			now := goldenDocs(t, filepath.Join("testdata", tc.golden+".golden.yaml"))
			if len(vrs) != len(old) || len(vrs) != len(now) {
				t.Fatalf("%d ValdReleases, golden files hold %d (legacy) and %d", len(vrs), len(old), len(now))
			}
			for i, vr := range vrs {
				b, err := yaml.Marshal(vr)
				if err != nil {
					t.Fatal(err)
				}
				want, which := now[i], "current"
				if vr.Name == legacy {
					want, which = old[i], "legacy"
				}
				if string(b) != want {
					t.Errorf("ValdRelease %s differs from the %s golden file:\n got\n%s\n want\n%s", vr.Name, which, b, want)
				}
				if LegacyNamed(vr) != (vr.Name == legacy) {
					t.Errorf("ValdRelease %s: LegacyNamed %v", vr.Name, LegacyNamed(vr))
				}
			}
			if len(vrs) < 2 {
				return
			}
			all := map[string]bool{}
			for _, vr := range vrs {
				all[vr.Name] = true
			}
			_, err = DesiredValdReleases(Input{Release: vor, Nodes: tc.nodes, Legacy: all}, cfg)
			if err == nil || !strings.Contains(err.Error(), "both keep the chart's default names they were installed with") {
				t.Errorf("two legacy clusters: error %v, want the clash named", err)
			}
		})
	}
}
