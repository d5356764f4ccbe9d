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

// TestReleasesCoexist renders, through the chart's naming (valdchart.Objects), every build
// and the layouts a cluster holds at once: the clusters of one release, two releases in one
// namespace, both sides of a blue/green switch, and one release in two namespaces whose
// names joined by a hyphen read alike. No object may belong to two ValdReleases: Helm
// refuses to install it for the second.
func TestReleasesCoexist(t *testing.T) {
	type layout struct {
		name string
		vrs  []*valdv1.ValdRelease
	}
	var layouts []layout
	for _, b := range chartBuilds(t) {
		layouts = append(layouts, layout(b))
	}
	build := func(vor *valdv1.ValdOperatorRelease) []*valdv1.ValdRelease {
		vrs, err := DesiredValdReleases(Input{Release: vor}, testConfig())
		if err != nil {
			t.Fatal(err)
		}
		return vrs
	}
	// Blue and green active at once, as during a switch.
	both := loadRelease(t, "full")
	for i := range both.Spec.Infrastructure {
		active := true
		both.Spec.Infrastructure[i].Active = &active
	}
	layouts = append(layouts, layout{"blue/green switch", build(both)})
	// A second release in the same namespace, its own clusters.
	other := both.DeepCopy()
	other.Name, other.UID = "other", "00000000-0000-0000-0000-0000000000ff"
	for i := range other.Spec.Infrastructure {
		for j := range other.Spec.Infrastructure[i].Clusters {
			other.Spec.Infrastructure[i].Clusters[j].Name += "-other"
		}
	}
	layouts = append(layouts, layout{"two releases in one namespace", append(build(both), build(other)...)})
	// "a-b" + "c" and "a" + "b-c": one ValdRelease name, two namespaces.
	var spread []*valdv1.ValdRelease
	for _, nc := range [][2]string{{"a-b", "c"}, {"a", "b-c"}} {
		vor := loadRelease(t, "pool-fallback")
		vor.Namespace = nc[0]
		vor.Spec.Infrastructure[0].Clusters[0].Name = nc[1]
		spread = append(spread, build(vor)...)
	}
	layouts = append(layouts, layout{"one name in two namespaces", spread})

	for _, l := range layouts {
		renders := map[string][]valdchart.Resource{}
		for _, vr := range l.vrs {
			objs := valdchart.Objects(vr.Name, vr.Namespace, specOf(t, vr))
			if len(objs) < 10 {
				t.Errorf("%s: %s renders %d objects: %v", l.name, vr.Name, len(objs), objs)
			}
			renders[vr.Namespace+"/"+vr.Name] = objs
		}
		for _, c := range valdchart.Clashes(renders) {
			t.Errorf("%s: %s is rendered by both %s and %s", l.name, c.Object, c.A, c.B)
		}
	}
}

// TestComponentNames: names stay within what the chart's objects allow and distinct, long
// cluster names included.
func TestComponentNames(t *testing.T) {
	long := strings.Repeat("c", 61)
	names := map[string]string{}
	for _, cluster := range []string{"a", long, long[:60] + "d", strings.Repeat("x-", 30) + "y"} {
		n := namesOf("ns", cluster)
		for _, name := range []string{n.agent, n.discoverer, n.gateway, n.indexManager, n.indexCreation, n.indexSave} {
			if len(name) > componentNameMax || strings.HasSuffix(name, "-") || strings.Contains(name, "--") {
				t.Errorf("cluster %q: name %q (%d characters)", cluster, name, len(name))
			}
			if prev, dup := names[name]; dup {
				t.Errorf("name %q for clusters %q and %q", name, prev, cluster)
			}
			names[name] = cluster
		}
	}
	if got := componentName("vald-agent", "cluster-a"); got != "vald-agent-cluster-a" {
		t.Errorf("short name %q", got)
	}
}
