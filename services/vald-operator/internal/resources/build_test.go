package resources

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
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
	// afterLegacy marks a case added after per-cluster names: testdata/legacy has no
	// golden file of it.
	afterLegacy bool
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
		{golden: "placement", input: "placement", afterLegacy: true},
		{golden: "placement-jobs", input: "placement-jobs", afterLegacy: true},
		{golden: "tuned", input: "tuned", afterLegacy: true, config: func(c *Config) {
			c.GatewayAgentsPerReplica, c.GatewayMinReplicas, c.GatewayMaxReplicas = 4, 1, 3
			c.GatewayIngressAnnotations = map[string]string{"nginx.ingress.kubernetes.io/backend-protocol": "GRPC", "team": "platform"}
			c.DefaultValues = map[string]any{
				"defaults": map[string]any{"image": map[string]any{"tag": "v1.8.0"}, "logging": map[string]any{"level": "info", "format": "json"}},
				"gateway":  map[string]any{"lb": map[string]any{"minReplicas": float64(7), "ingress": map[string]any{"host": "template.example.com"}}},
			}
		}},
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
	bad.GatewayAgentsPerReplica = 0
	bad.GatewayMinReplicas, bad.GatewayMaxReplicas = 5, 4
	err := bad.Validate()
	if err == nil {
		t.Fatal("want errors")
	}
	for _, want := range []string{"label prefix", "access mode", "memory ratio", "maximum size", "resource fraction", "service type", "discoverer kind", "PodDisruptionBudget maxUnavailable", "gateway agents per replica", "gateway replicas bounds 5..4"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

// TestGatewayReplicas: minReplicas ceil(agents / per replica), maxReplicas one per agent,
// both within the operator's bounds; a release's own value replaces the derived one and
// moves the other to keep min <= max.
func TestGatewayReplicas(t *testing.T) {
	i := func(v int32) *int32 { return &v }
	cfg := DefaultConfig() // 2 agents per replica, bounds 2..100
	cases := []struct {
		agents      int32
		gw          valdv1.Gateway
		cfg         func(*Config)
		min, max    int32
		ok          bool
		description string
	}{
		{agents: 0, description: "no pool, nothing set: the chart's defaults"},
		{agents: 1, min: 2, max: 2, ok: true, description: "one agent: the lower bound"},
		{agents: 6, min: 3, max: 6, ok: true, description: "ceil(6/2), one per agent"},
		{agents: 7, min: 4, max: 7, ok: true, description: "ceil(7/2)"},
		{agents: 500, min: 100, max: 100, ok: true, description: "both capped"},
		{agents: 150, min: 75, max: 100, ok: true, description: "max capped"},
		{agents: 10, cfg: func(c *Config) { c.GatewayAgentsPerReplica = 4 }, min: 3, max: 10, ok: true, description: "ceil(10/4)"},
		{agents: 6, gw: valdv1.Gateway{MinReplicas: i(5)}, min: 5, max: 6, ok: true, description: "min set, max derived"},
		{agents: 6, gw: valdv1.Gateway{MinReplicas: i(9)}, min: 9, max: 9, ok: true, description: "min set above the derived max"},
		{agents: 6, gw: valdv1.Gateway{MaxReplicas: i(2)}, min: 2, max: 2, ok: true, description: "max set below the derived min"},
		{agents: 6, gw: valdv1.Gateway{MinReplicas: i(1), MaxReplicas: i(200)}, min: 1, max: 200, ok: true, description: "both set, bounds ignored"},
		{agents: 0, gw: valdv1.Gateway{MinReplicas: i(4)}, min: 4, max: 4, ok: true, description: "no pool, min set"},
	}
	for _, tc := range cases {
		c := cfg
		if tc.cfg != nil {
			tc.cfg(&c)
		}
		minR, maxR, ok := GatewayReplicas(tc.agents, tc.gw, c)
		if minR != tc.min || maxR != tc.max || ok != tc.ok {
			t.Errorf("%s: GatewayReplicas(%d) = %d, %d, %v; want %d, %d, %v", tc.description, tc.agents, minR, maxR, ok, tc.min, tc.max, tc.ok)
		}
	}
}

// TestAgentMemoryLimit: agents have no memory limit unless the release sets one (NGT
// memory-maps its index); a limit below the agent's request fails the build, naming both.
func TestAgentMemoryLimit(t *testing.T) {
	limits := func(vor *valdv1.ValdOperatorRelease) (any, error) {
		vrs, err := DesiredValdReleases(Input{Release: vor}, testConfig())
		if err != nil {
			return nil, err
		}
		res, _ := specOf(t, vrs[0])["agent"].(map[string]any)["resources"].(map[string]any)
		return res["limits"], nil
	}
	vor := loadRelease(t, "full")
	if got, err := limits(vor); err != nil || got != nil {
		t.Errorf("no memoryLimit: limits %v, %v; want none", got, err)
	}
	vor.Spec.VectorEngine.Vald.Agent.MemoryLimit = "30Gi"
	if got, err := limits(vor); err != nil || !reflect.DeepEqual(got, map[string]any{"memory": "30Gi"}) {
		t.Errorf("memoryLimit 30Gi: limits %v, %v", got, err)
	}
	vor.Spec.VectorEngine.Vald.Agent.MemoryLimit = "20Gi" // the agent requests 24Gi of its 32Gi node
	_, err := limits(vor)
	var berr *Error
	if !errors.As(err, &berr) || !strings.Contains(berr.Message, "memoryLimit 20Gi is below the 24Gi an agent of infrastructure entry \"green\" requests") {
		t.Errorf("memoryLimit below the request: %v", err)
	}
	pool := loadRelease(t, "pool-fallback")
	pool.Spec.Infrastructure[0].NodePools.General.MachineResource = valdv1.MachineResource{}
	pool.Spec.VectorEngine.Vald.Agent.MemoryLimit = "1Gi" // no request to compare with
	if got, err := limits(pool); err != nil || !reflect.DeepEqual(got, map[string]any{"memory": "1Gi"}) {
		t.Errorf("memoryLimit without a pool memory: limits %v, %v", got, err)
	}
}

// TestDefaultValues: the cluster-wide template is read from YAML or JSON, refused when the
// Vald chart would refuse it or when it names components, and goes under the generated
// values and the overlay.
func TestDefaultValues(t *testing.T) {
	v, err := ParseDefaultValues("agent:\n  image: {tag: v1.8.0}\ngateway:\n  lb: {minReplicas: 9, hpa: {targetCPUUtilizationPercentage: 70}}\n")
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	cfg.DefaultValues = v
	if err := cfg.Validate(); err != nil {
		t.Fatalf("template refused: %v", err)
	}
	vor := loadRelease(t, "full") // overlay gateway.lb.minReplicas: 2
	vrs, err := DesiredValdReleases(Input{Release: vor}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	values := specOf(t, vrs[0])
	lb := values["gateway"].(map[string]any)["lb"].(map[string]any)
	if values["agent"].(map[string]any)["image"] == nil || lb["hpa"] == nil || lb["minReplicas"] != float64(2) || lb["maxReplicas"] != float64(6) {
		t.Errorf("template keys lost or winning: agent %v, gateway.lb %v", values["agent"], lb)
	}
	if _, err := ParseDefaultValues("[1, 2]"); err == nil {
		t.Error("a list accepted as the template")
	}
	if none, err := ParseDefaultValues(" "); err != nil || none != nil {
		t.Errorf("empty template: %v, %v", none, err)
	}
	for text, want := range map[string]string{
		`{"gateway": {"lb": {"minReplicas": "3"}}}`:               "at '/gateway/lb/minReplicas': got string, want integer",
		`{"agent": {"name": "vald-agent"}}`:                       "default ValdRelease values set agent.name: component names are the operator's",
		`{"manager": {"index": {"creator": {"suspend": "yes"}}}}`: "at '/manager/index/creator/suspend': got string, want boolean",
	} {
		bad := testConfig()
		if bad.DefaultValues, err = ParseDefaultValues(text); err != nil {
			t.Fatal(err)
		}
		if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("template %s: %v, want %q", text, err, want)
		}
	}
}

func TestParseAnnotations(t *testing.T) {
	a, err := ParseAnnotations(`{"nginx.ingress.kubernetes.io/backend-protocol": "GRPC"}`)
	if err != nil || a["nginx.ingress.kubernetes.io/backend-protocol"] != "GRPC" {
		t.Errorf("annotations %v, %v", a, err)
	}
	if _, err := ParseAnnotations(`{"a": {"b": 1}}`); err == nil {
		t.Error("an annotation that is no string accepted")
	}
	bad := testConfig()
	bad.GatewayIngressAnnotations = map[string]string{"bad key": "x"}
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), `gateway ingress annotation key "bad key"`) {
		t.Errorf("bad key: %v", err)
	}
}
