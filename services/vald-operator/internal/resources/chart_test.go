package resources

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	valdv1 "github.com/opsuite/suite/api/vald/v1"
	"github.com/opsuite/suite/api/vald/valdchart"
	"github.com/opsuite/suite/shared/testenv"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// build is one render of the builder that the chart tests hold against the Vald chart's
// declarations.
type build struct {
	name string
	vrs  []*valdv1.ValdRelease
}

// chartBuilds renders every golden case and the sample release (deploy/samples/vald.yaml),
// plus the discoverer settings in every form a flag can give them.
func chartBuilds(t *testing.T) []build {
	t.Helper()
	var out []build
	render := func(name string, vor *valdv1.ValdOperatorRelease, cfg Config, nodes NodePools) {
		if err := cfg.Validate(); err != nil {
			t.Fatalf("%s: config: %v", name, err)
		}
		vrs, err := DesiredValdReleases(Input{Release: vor, Nodes: nodes}, cfg)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out = append(out, build{name: name, vrs: vrs})
	}
	for _, tc := range goldenCases() {
		cfg := testConfig()
		if tc.config != nil {
			tc.config(&cfg)
		}
		render(tc.golden, loadRelease(t, tc.input), cfg, tc.nodes)
	}
	sample := loadSample(t)
	render("sample", sample, DefaultConfig(), nil)
	for _, v := range []string{"1", "3", "25%"} {
		cfg := DefaultConfig()
		cfg.DiscovererKind, cfg.DiscovererMaxUnavailable, cfg.DiscovererPDBMaxUnavailable = "DaemonSet", intstr.Parse(v), v
		render("sample, discoverer maxUnavailable "+v, sample, cfg, nil)
	}
	return out
}

// loadSample reads the ValdOperatorRelease of deploy/samples/vald.yaml.
func loadSample(t *testing.T) *valdv1.ValdOperatorRelease {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, "deploy", "samples", "vald.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		if strings.Contains(doc, "kind: ValdOperatorRelease") {
			vor := &valdv1.ValdOperatorRelease{}
			if err := yaml.UnmarshalStrict([]byte(doc), vor); err != nil {
				t.Fatal(err)
			}
			vor.Generation, vor.UID = 1, "00000000-0000-0000-0000-00000000000a"
			return vor
		}
	}
	t.Fatal("no ValdOperatorRelease in deploy/samples/vald.yaml")
	return nil
}

// specOf decodes a ValdRelease's values as the Vald Helm Operator reads them (JSON).
func specOf(t *testing.T, vr *valdv1.ValdRelease) map[string]any {
	t.Helper()
	var values map[string]any
	if err := json.Unmarshal(vr.Spec.Raw, &values); err != nil {
		t.Fatalf("%s: %v", vr.Name, err)
	}
	return values
}

// TestChartTypes holds every key of every build against the types the Vald chart declares:
// a key of the wrong type is refused by the chart's schema (so by the Vald Helm Operator),
// and a key without an entry in valdchart.Keys has not been checked against the chart.
func TestChartTypes(t *testing.T) {
	for _, b := range chartBuilds(t) {
		for _, vr := range b.vrs {
			valdchart.Walk(specOf(t, vr), func(path string, v any, key valdchart.Key, known bool) {
				switch {
				case !known:
					t.Errorf("%s, %s: key %s has no entry in valdchart.Keys: read its type in the Vald chart %s and add it", b.name, vr.Name, path, valdchart.ChartVersion)
				case !valdchart.Matches(v, key.Type):
					t.Errorf("%s, %s: %s is %s %v, the Vald chart declares %s", b.name, vr.Name, path, valdchart.TypeOf(v), v, key.Type)
				}
			})
		}
	}
}
