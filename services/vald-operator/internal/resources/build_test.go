package resources

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	valdv1 "github.com/opsuite/suite/api/vald/v1"
	"github.com/opsuite/suite/shared/testenv"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite the golden files from the builder's output")

func loadRelease(t *testing.T, name string) *valdv1.ValdOperatorRelease {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name+".vor.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	vor := &valdv1.ValdOperatorRelease{}
	if err := yaml.UnmarshalStrict(raw, vor); err != nil {
		t.Fatalf("decoding %s: %v", name, err)
	}
	return vor
}

func testConfig() Config {
	cfg := DefaultConfig()
	cfg.NodePoolLabelPrefix = "pool.opsuite.io"
	return cfg
}

// goldenCase is one golden file: the release it is built from, the configuration and the
// node-pool match.
type goldenCase struct {
	golden, input string
	config        func(*Config)
	nodes         NodePools
}

// goldenCases are the builds the golden files hold; the chart tests walk them too.
func goldenCases() []goldenCase {
	return []goldenCase{
		{golden: "full", input: "full"},
		{golden: "pool-fallback", input: "pool-fallback", config: func(c *Config) { c.NodePoolLabelPrefix = "" }},
		{golden: "overlay", input: "overlay"},
		{golden: "pv-sizing", input: "pv-sizing", config: func(c *Config) {
			c.DefaultStorageClass, c.DefaultAccessMode = "fast-nvme", "ReadWriteOncePod"
		}},
		{golden: "pv-sizing-min", input: "pv-sizing", config: func(c *Config) { c.PVMinSize = resource.MustParse("50Gi") }},
		{golden: "pv-sizing-max", input: "pv-sizing", config: func(c *Config) {
			c.PVMemoryRatio, c.PVMaxSize = 10, resource.MustParse("20Gi")
		}},
		{golden: "ingress-domain", input: "pool-fallback", config: func(c *Config) {
			c.IngressDomain, c.GatewayServiceType, c.DiscovererKind = "vald.internal", "LoadBalancer", "DaemonSet"
		}},
		{golden: "discoverer-daemonset", input: "pool-fallback", config: func(c *Config) {
			c.DiscovererKind, c.DiscovererMaxUnavailable, c.DiscovererPDBMaxUnavailable = "DaemonSet", intstr.FromString("25%"), "2"
		}},
		{golden: "discoverer-deployment-pdb", input: "pool-fallback", config: func(c *Config) { c.DiscovererPDBMaxUnavailable = "50%" }},
		{golden: "nodepool-match", input: "full", nodes: NodePools{valdv1.NodePoolTypeGeneral: true, valdv1.NodePoolTypeValdAgent: true}},
	}
}

func TestGolden(t *testing.T) {
	cases := goldenCases()
	for _, tc := range cases {
		t.Run(tc.golden, func(t *testing.T) {
			cfg := testConfig()
			if tc.config != nil {
				tc.config(&cfg)
			}
			if err := cfg.Validate(); err != nil {
				t.Fatalf("test config: %v", err)
			}
			vrs, err := DesiredValdReleases(Input{Release: loadRelease(t, tc.input), Nodes: tc.nodes}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			for _, vr := range vrs {
				b, err := yaml.Marshal(vr)
				if err != nil {
					t.Fatal(err)
				}
				buf.WriteString("---\n")
				buf.Write(b)
			}
			testenv.Golden(t, filepath.Join("testdata", tc.golden+".golden.yaml"), buf.Bytes(), *update)
		})
	}
}

func TestDesiredValdReleasesFailures(t *testing.T) {
	inactive := false
	cases := []struct {
		name      string
		mutate    func(*valdv1.ValdOperatorRelease)
		nodes     NodePools
		wantEmpty bool
		wantMsg   string
	}{
		{
			name: "name over 63 characters",
			mutate: func(v *valdv1.ValdOperatorRelease) {
				v.Spec.Infrastructure[0].Clusters[0].Name = strings.Repeat("a", 57)
			},
			wantMsg: "longer than 63",
		},
		{
			name: "same cluster name in two active entries",
			mutate: func(v *valdv1.ValdOperatorRelease) {
				v.Spec.Infrastructure[1].Active = nil
				v.Spec.Infrastructure[1].Clusters[0].Name = "cluster-a"
			},
			wantMsg: `Cluster name "cluster-a" is used by infrastructure entries "green" and "blue"`,
		},
		{
			name:      "every entry inactive",
			mutate:    func(v *valdv1.ValdOperatorRelease) { v.Spec.Infrastructure[0].Active = &inactive },
			wantEmpty: true, wantMsg: "No infrastructure entry is active",
		},
		{
			name:      "node-pool match found no nodes",
			nodes:     NodePools{},
			wantEmpty: true, wantMsg: "No node carries the node-pool labels",
		},
		{
			name:      "node-pool match lacks the agent pool",
			nodes:     NodePools{valdv1.NodePoolTypeGeneral: true},
			wantEmpty: true, wantMsg: "No node carries the node-pool labels",
		},
		{
			name:      "active entry without clusters",
			mutate:    func(v *valdv1.ValdOperatorRelease) { v.Spec.Infrastructure[0].Clusters = nil },
			wantEmpty: true, wantMsg: "have no clusters",
		},
		{
			name:    "cluster without a name",
			mutate:  func(v *valdv1.ValdOperatorRelease) { v.Spec.Infrastructure[0].Clusters[1].Name = "" },
			wantMsg: `A cluster of infrastructure entry "green" has no name yet.`,
		},
		{
			name: "overlay names a component alike for every cluster",
			mutate: func(v *valdv1.ValdOperatorRelease) {
				v.Spec.VectorEngine.Vald.Overlay.Raw = []byte(`{"gateway": {"lb": {"name": "vald-lb-gateway"}}}`)
			},
			wantMsg: `ValdReleases "search-cluster-a" and "search-cluster-b" would both make the Vald chart render ConfigMap search/vald-lb-gateway-config`,
		},
		{
			name: "overlay names the discoverer's ClusterRoleBinding alike",
			mutate: func(v *valdv1.ValdOperatorRelease) {
				v.Spec.VectorEngine.Vald.Overlay.Raw = []byte(`{"discoverer": {"clusterRoleBinding": {"name": "discoverer"}}}`)
			},
			wantMsg: `would both make the Vald chart render ClusterRoleBinding discoverer`,
		},
		{
			name: "overlay not an object",
			mutate: func(v *valdv1.ValdOperatorRelease) {
				v.Spec.VectorEngine.Vald.Overlay.Raw = []byte(`[1]`)
			},
			wantMsg: "overlay is not a JSON object",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			vor := loadRelease(t, "full")
			if tc.mutate != nil {
				tc.mutate(vor)
			}
			vrs, err := DesiredValdReleases(Input{Release: vor, Nodes: tc.nodes}, testConfig())
			if err == nil {
				t.Fatalf("built %d ValdReleases, want an error", len(vrs))
			}
			var berr *Error
			if !errors.As(err, &berr) {
				t.Fatalf("error %T %v, want *Error", err, err)
			}
			if berr.Empty != tc.wantEmpty || !strings.Contains(berr.Message, tc.wantMsg) {
				t.Errorf("got Empty=%v %q, want Empty=%v containing %q", berr.Empty, berr.Message, tc.wantEmpty, tc.wantMsg)
			}
		})
	}
}

// TestNodePoolAdmission: an entry needs labelled nodes only for the pools it declares.
func TestNodePoolAdmission(t *testing.T) {
	general, agent := &valdv1.NodePool{Replicas: 1}, &valdv1.NodePool{Replicas: 1}
	entry := func(role string, g, a *valdv1.NodePool) valdv1.Infrastructure {
		return valdv1.Infrastructure{Role: role, Clusters: []valdv1.Cluster{{Name: role, ID: "1"}}, NodePools: valdv1.NodePools{General: g, Agent: a}}
	}
	vor := loadRelease(t, "full")
	vor.Spec.Infrastructure = []valdv1.Infrastructure{
		entry("both", general, agent), entry("general-only", general, nil), entry("agent-only", nil, agent), entry("none", nil, nil),
	}
	cases := []struct {
		nodes     NodePools
		unmatched string
		built     string
	}{
		{nodes: nil, unmatched: "", built: "search-agent-only,search-both,search-general-only,search-none"},
		{nodes: NodePools{}, unmatched: "both,general-only,agent-only", built: "search-none"},
		{nodes: NodePools{valdv1.NodePoolTypeGeneral: true}, unmatched: "both,agent-only", built: "search-general-only,search-none"},
		{nodes: NodePools{valdv1.NodePoolTypeValdAgent: true}, unmatched: "both,general-only", built: "search-agent-only,search-none"},
		{nodes: NodePools{valdv1.NodePoolTypeGeneral: true, valdv1.NodePoolTypeValdAgent: true}, unmatched: "", built: "search-agent-only,search-both,search-general-only,search-none"},
	}
	for _, tc := range cases {
		in := Input{Release: vor, Nodes: tc.nodes}
		if got := strings.Join(Unmatched(in), ","); got != tc.unmatched {
			t.Errorf("nodes %v: unmatched %q, want %q", tc.nodes, got, tc.unmatched)
		}
		vrs, err := DesiredValdReleases(in, testConfig())
		if err != nil {
			t.Fatalf("nodes %v: %v", tc.nodes, err)
		}
		var names []string
		for _, vr := range vrs {
			names = append(names, vr.Name)
		}
		if got := strings.Join(names, ","); got != tc.built {
			t.Errorf("nodes %v: built %s, want %s", tc.nodes, got, tc.built)
		}
	}
}

func TestPVSize(t *testing.T) {
	q := func(s string) *resource.Quantity { v := resource.MustParse(s); return &v }
	cfg := DefaultConfig()
	cases := []struct {
		memory *resource.Quantity
		ratio  float64
		min    string
		max    string
		want   string
	}{
		{memory: nil, ratio: 2, min: "1Gi", want: "1Gi"},
		{memory: q("16Gi"), ratio: 2, min: "1Gi", want: "32Gi"},
		{memory: q("1500Mi"), ratio: 1, min: "1Gi", want: "2Gi"},
		{memory: q("1Gi"), ratio: 1.5, min: "10Gi", want: "10Gi"},
		{memory: q("64Gi"), ratio: 2, min: "1Gi", max: "100Gi", want: "100Gi"},
	}
	for _, tc := range cases {
		c := cfg
		c.PVMemoryRatio, c.PVMinSize = tc.ratio, resource.MustParse(tc.min)
		if tc.max != "" {
			c.PVMaxSize = resource.MustParse(tc.max)
		}
		got := PVSize(tc.memory, c)
		if got.String() != tc.want {
			t.Errorf("PVSize(%v, ratio %v, min %s, max %s) = %s, want %s", tc.memory, tc.ratio, tc.min, tc.max, got.String(), tc.want)
		}
	}
}

func TestMerge(t *testing.T) {
	base := map[string]any{"a": map[string]any{"b": 1, "c": []any{1}}, "d": "x", "e": 1}
	overlay := map[string]any{"a": map[string]any{"c": []any{2, 3}, "n": map[string]any{"z": nil, "y": 1}}, "d": nil, "f": true}
	got, _ := yaml.Marshal(Merge(base, overlay))
	want := "a:\n  b: 1\n  c:\n  - 2\n  - 3\n  \"n\":\n    \"y\": 1\ne: 1\nf: true\n"
	if string(got) != want {
		t.Errorf("merged:\n%s\nwant:\n%s", got, want)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	bad := DefaultConfig()
	bad.NodePoolLabelPrefix = "Bad/Prefix"
	bad.DefaultAccessMode = "RWO"
	bad.PVMemoryRatio = 0
	bad.PVMaxSize = resource.MustParse("1Mi")
	bad.AgentResourceFraction = 2
	bad.GatewayServiceType = "ExternalName"
	bad.DiscovererKind = "StatefulSet"
	bad.DiscovererPDBMaxUnavailable = "half"
	err := bad.Validate()
	if err == nil {
		t.Fatal("want errors")
	}
	for _, want := range []string{"label prefix", "access mode", "memory ratio", "maximum size", "resource fraction", "service type", "discoverer kind", "PodDisruptionBudget maxUnavailable"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}
