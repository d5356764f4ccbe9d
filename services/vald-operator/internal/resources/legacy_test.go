package resources

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	valdv1 "github.com/opsuite/suite/api/vald/v1"
	"sigs.k8s.io/yaml"
)

// sinceLegacy are the values keys the builder gained after the legacy golden files were
// written (issue 22 item 4: topology spread, gateway replicas, no agent memory limit by
// default, the index jobs' suspend and placement). TestLegacyNamesBuild leaves them out of
// both sides; legacySpread checks what they hold for a legacy ValdRelease.
var sinceLegacy = [][]string{
	{"agent", "resources", "limits"},
	{"agent", "topologySpreadConstraints"},
	{"discoverer", "topologySpreadConstraints"},
	{"gateway", "lb", "topologySpreadConstraints"},
	{"gateway", "lb", "minReplicas"},
	{"gateway", "lb", "maxReplicas"},
	{"manager", "index", "topologySpreadConstraints"},
	{"manager", "index", "creator", "suspend"},
	{"manager", "index", "creator", "nodeSelector"},
	{"manager", "index", "creator", "tolerations"},
	{"manager", "index", "saver", "suspend"},
	{"manager", "index", "saver", "nodeSelector"},
	{"manager", "index", "saver", "tolerations"},
}

// withoutSinceLegacy is a ValdRelease's YAML without the sinceLegacy keys.
func withoutSinceLegacy(t *testing.T, doc []byte) string {
	t.Helper()
	vr := &valdv1.ValdRelease{}
	if err := yaml.Unmarshal(doc, vr); err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := json.Unmarshal(vr.Spec.Raw, &values); err != nil {
		t.Fatal(err)
	}
	for _, path := range sinceLegacy {
		parent := values
		for _, k := range path[:len(path)-1] {
			parent, _ = parent[k].(map[string]any)
		}
		delete(parent, path[len(path)-1])
	}
	raw, err := json.Marshal(values)
	if err != nil {
		t.Fatal(err)
	}
	vr.Spec.Raw = raw
	out, err := yaml.Marshal(vr)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// legacySpread: a legacy ValdRelease's spread constraints select its pods by the chart's
// default names, which its pods carry.
func legacySpread(t *testing.T, vr *valdv1.ValdRelease) {
	t.Helper()
	values := specOf(t, vr)
	for path, name := range map[string]string{"agent": "vald-agent", "gateway.lb": "vald-lb-gateway"} {
		c := values
		for _, k := range strings.Split(path, ".") {
			c, _ = c[k].(map[string]any)
		}
		tsc, _ := c["topologySpreadConstraints"].([]any)
		if len(tsc) != 1 {
			t.Errorf("%s: %s.topologySpreadConstraints %v", vr.Name, path, c["topologySpreadConstraints"])
			continue
		}
		labels := tsc[0].(map[string]any)["labelSelector"].(map[string]any)["matchLabels"].(map[string]any)
		if labels["app"] != name || labels["app.kubernetes.io/instance"] != vr.Name {
			t.Errorf("%s: %s spread selects %v, want app=%s, instance=%s", vr.Name, path, labels, name, vr.Name)
		}
	}
}

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
		if tc.afterLegacy {
			continue // no release of this case predates per-cluster names
		}
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
				got, want, which := string(b), now[i], "current"
				if vr.Name == legacy {
					got, want, which = withoutSinceLegacy(t, b), withoutSinceLegacy(t, []byte(old[i])), "legacy"
					legacySpread(t, vr)
				}
				if got != want {
					t.Errorf("ValdRelease %s differs from the %s golden file:\n got\n%s\n want\n%s", vr.Name, which, got, want)
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
