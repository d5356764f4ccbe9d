package resources

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"reflect"
	"sort"
	"strings"
	"testing"

	valdv1 "github.com/opsuite/suite/api/vald/v1"
	"github.com/opsuite/suite/api/vald/valdchart"
	"github.com/opsuite/suite/shared/fuzzinput"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

// fuzzBytes reads the fuzz input: a byte per decision, 0 past its end.
type fuzzBytes struct{ *fuzzinput.Bytes }

func (s *fuzzBytes) pick(options ...string) string { return options[s.Next()%len(options)] }

// label is a DNS label of 1 to maxLen characters: lowercase letters, digits and '-', a
// letter or digit at both ends, as admission requires of names.
func (s *fuzzBytes) label(maxLen int) string {
	const inner, edge = "abcdefghijklmnopqrstuvwxyz0123456789-", "abcdefghijklmnopqrstuvwxyz0123456789"
	n := 1 + s.Next()%maxLen
	if x := s.Next(); x%4 == 0 {
		n = maxLen - x%3 // the longest names are where truncation bites
		n = max(n, 1)
	}
	// The characters come from one byte, so a name costs the script two or three.
	r := rand.New(rand.NewSource(int64(s.Next())))
	b := make([]byte, n)
	for i := range b {
		set := inner
		if i == 0 || i == n-1 {
			set = edge
		}
		b[i] = set[r.Intn(len(set))]
	}
	return string(b)
}

// spread is nil (the default), an empty list (none) or constraints admission accepts.
func (s *fuzzBytes) spread() *[]valdv1.TopologySpread {
	switch s.Next() % 3 {
	case 0:
		return nil
	case 1:
		return &[]valdv1.TopologySpread{}
	}
	out := []valdv1.TopologySpread{}
	for range 1 + s.Next()%3 {
		out = append(out, valdv1.TopologySpread{MaxSkew: int32(s.Next() % 4), TopologyKey: s.pick("kubernetes.io/hostname", "topology.kubernetes.io/zone", "rack"),
			WhenUnsatisfiable: s.pick("", "DoNotSchedule", "ScheduleAnyway")})
	}
	return &out
}

// placement is a Placement admission accepts; podKeys adds podPriority and the grace
// period (the index jobs have neither). Some node selectors and affinities contradict a
// node pool's labels (with either label prefix the decoder picks).
func (s *fuzzBytes) placement(podKeys bool) valdv1.Placement {
	var p valdv1.Placement
	switch s.Next() % 5 {
	case 1:
		p.NodeSelector = map[string]valdv1.LabelValue{"disktype": "nvme"}
	case 2:
		p.NodeSelector = map[string]valdv1.LabelValue{s.pick("type", "pool.opsuite.io/type"): valdv1.LabelValue(s.pick("agent", "general"))}
	case 3:
		p.NodeSelector = map[string]valdv1.LabelValue{s.pick("namespace", "pool.opsuite.io/namespace"): "other", "rack": "7"}
	}
	req := func(key string, op corev1.NodeSelectorOperator, values ...string) *corev1.Affinity {
		return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: op, Values: values}}}}}}}
	}
	switch s.Next() % 6 {
	case 1:
		p.Affinity = req("topology.kubernetes.io/zone", corev1.NodeSelectorOpIn, "a", "b")
	case 2:
		p.Affinity = req(s.pick("type", "pool.opsuite.io/type"), corev1.NodeSelectorOpNotIn, s.pick("agent", "general"))
	case 3:
		p.Affinity = req("rack", corev1.NodeSelectorOpGt, "3")
	case 4:
		p.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
			Weight: 1, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: "kubernetes.io/hostname"}}}}}
	case 5:
		p.Affinity = &corev1.Affinity{}
	}
	if s.Next()%2 == 1 {
		p.Tolerations = []corev1.Toleration{{Key: s.pick("dedicated", "pool.opsuite.io/type", "type"), Operator: corev1.TolerationOpEqual,
			Value: s.pick("vald", "agent", "general"), Effect: corev1.TaintEffectNoSchedule}}
	}
	if !podKeys {
		return p
	}
	switch s.Next() % 4 {
	case 1:
		p.PodPriority = &valdv1.PodPriority{Value: ptr.To(int32(s.Next()) * 1000)}
	case 2:
		p.PodPriority = &valdv1.PodPriority{Enabled: ptr.To(s.Next()%2 == 1)}
	}
	if s.Next()%3 == 1 {
		p.TerminationGracePeriodSeconds = ptr.To(int64(1 + s.Next()))
	}
	return p
}

// quantity is a positive quantity or "".
func (s *fuzzBytes) quantity(options ...string) string {
	return s.pick(append([]string{""}, options...)...)
}

func (s *fuzzBytes) pool() *valdv1.NodePool {
	if s.Next()%3 == 0 {
		return nil
	}
	return &valdv1.NodePool{Name: s.pick("", "pool"), Replicas: int32(1 + (s.Next()<<8|s.Next())%10000),
		MachineResource: valdv1.MachineResource{
			CPU:    s.quantity("1", "4", "3500m", "1m", "128", "0.5"),
			Memory: s.quantity("1", "16Gi", "512Mi", "1Ti", "3.5G", "100000Ki"),
		}}
}

// decodeRelease builds a ValdOperatorRelease that admission accepts, the node-pool match
// and a valid configuration from the input; overlay says which overlay it carries: 0 none,
// 1 one whose keys the chart declares, 2 the rest of the input as it is.
func decodeRelease(s *fuzzBytes) (*valdv1.ValdOperatorRelease, NodePools, Config, int) {
	vor := &valdv1.ValdOperatorRelease{}
	vor.Name, vor.Namespace = s.label(valdv1.MaxNameLength), s.label(63)
	vor.UID, vor.Generation = "00000000-0000-0000-0000-0000000000f0", int64(s.Next())
	clusters := 0
	for i := range 1 + s.Next()%3 {
		infra := valdv1.Infrastructure{Role: fmt.Sprintf("%s%d", s.pick("green", "blue", "Hot_1.x", "a"), i), Type: s.pick("", "kind", "eks")}
		switch s.Next() % 3 {
		case 1:
			infra.Active = ptr.To(true)
		case 2:
			infra.Active = ptr.To(false)
		}
		names := map[string]bool{}
		for range s.Next() % 5 {
			if clusters == valdv1.MaxClusters {
				break
			}
			cl := valdv1.Cluster{ID: s.pick("", "id-1", "cluster/7")}
			if s.Next()%8 != 0 {
				// Reused names across entries are legal at admission; the builder refuses them.
				cl.Name = s.pick("a", "b", "c", "")
				if cl.Name == "" {
					cl.Name = s.label(valdv1.MaxClusterNameLength)
				}
			}
			if cl.Name != "" && names[cl.Name] {
				continue
			}
			names[cl.Name] = true
			infra.Clusters = append(infra.Clusters, cl)
			clusters++
		}
		infra.NodePools.General, infra.NodePools.Agent = s.pool(), s.pool()
		vor.Spec.Infrastructure = append(vor.Spec.Infrastructure, infra)
	}
	e := &vor.Spec.VectorEngine
	e.Name = s.label(63)
	v := &e.Vald
	v.Defaults.LogLevel = s.pick("", "debug", "info", "warn", "error", "fatal")
	v.Agent.NGT = valdv1.NGT{Dimension: int32(1 + (s.Next()<<8|s.Next())%65536),
		DistanceType:     s.pick("", "l2", "cosine", "innerproduct", "normalizedangle"),
		ObjectType:       s.pick("", "float", "uint8", "float16"),
		CreationEdgeSize: int32(s.Next()%2) * int32(1+s.Next()%1000), SearchEdgeSize: int32(s.Next()%2) * int32(1+s.Next()%1000)}
	if x := s.Next() % 3; x > 0 {
		v.Agent.PersistentVolume = &valdv1.PersistentVolume{Enabled: x == 1, StorageClass: s.pick("", "fast-nvme", "a.b"),
			AccessMode: s.pick("", "ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod")}
	}
	v.Indexer = valdv1.Indexer{IndexSchedule: s.pick("", "@every 1m", "*/5 * * * *"), Concurrency: int32(s.Next()%2) * int32(1+s.Next()%10000),
		Manager: s.Next()%2 == 1, IndexDuration: s.pick("", "1h", "30m", "1.5h2m"), SaveDuration: s.pick("", "1h", "90s")}
	v.Gateway = valdv1.Gateway{IndexReplica: int32(s.Next() % 101), ServiceType: s.pick("", "ClusterIP", "NodePort", "LoadBalancer")}
	if x := s.Next() % 3; x > 0 {
		v.Gateway.Ingress = &valdv1.Ingress{Enabled: x == 1, Host: s.pick("", "vald.example.com", "*.example.com")}
	}
	v.Discoverer.Kind = s.pick("", "DaemonSet", "Deployment")
	// Issue 22 item 4: spread, memory limit, gateway replicas, index jobs, annotations.
	v.Agent.MemoryLimit = s.quantity("1Gi", "64Gi", "2Ti")
	v.Agent.TopologySpreadConstraints, v.Gateway.TopologySpreadConstraints = s.spread(), s.spread()
	v.Discoverer.TopologySpreadConstraints, v.Indexer.TopologySpreadConstraints = s.spread(), s.spread()
	v.Indexer.IndexSuspend, v.Indexer.SaveSuspend = s.Next()%2 == 1, s.Next()%2 == 1
	v.Indexer.SaveSchedule = s.pick("", "@hourly", "0 */6 * * *")
	switch s.Next() % 4 {
	case 1:
		v.Gateway.MinReplicas = ptr.To(int32(1 + s.Next()%50))
	case 2:
		v.Gateway.MaxReplicas = ptr.To(int32(1 + s.Next()%50))
	case 3:
		minR := int32(1 + s.Next()%50)
		v.Gateway.MinReplicas, v.Gateway.MaxReplicas = &minR, ptr.To(minR+int32(s.Next()%50)) // admission keeps min <= max
	}
	if v.Gateway.Ingress != nil && s.Next()%2 == 1 {
		v.Gateway.Ingress.Annotations = map[string]string{"team": s.pick("search", "")}
	}

	// Issue 26: placement, including what clashes with the node pools (admission cannot
	// see their label prefix; the build refuses it).
	v.Agent.Placement, v.Gateway.Placement, v.Discoverer.Placement = s.placement(true), s.placement(true), s.placement(true)
	v.Indexer.Placement = s.placement(v.Indexer.Manager) // admission refuses the manager's keys on the jobs

	var nodes NodePools
	if x := s.Next() % 4; x > 0 {
		nodes = NodePools{valdv1.NodePoolTypeGeneral: x&1 == 1, valdv1.NodePoolTypeValdAgent: x&2 == 2}
	}
	cfg := DefaultConfig()
	cfg.NodePoolLabelPrefix = s.pick("", "pool.opsuite.io")
	cfg.DefaultStorageClass = s.pick("", "standard")
	cfg.PVMemoryRatio = []float64{2, 0.5, 1, 10, 100}[s.Next()%5]
	cfg.PVMinSize = resource.MustParse(s.pick("1Gi", "50Gi", "1"))
	cfg.PVMaxSize = resource.MustParse(s.pick("0", "20Gi", "1Ti"))
	if !cfg.PVMaxSize.IsZero() && cfg.PVMaxSize.Cmp(cfg.PVMinSize) < 0 {
		cfg.PVMaxSize = cfg.PVMinSize // Validate refuses a cap below the minimum
	}
	cfg.AgentResourceFraction = []float64{0.75, 1, 0.001, 0.5}[s.Next()%4]
	cfg.IngressDomain = s.pick("", "vald.internal")
	cfg.DiscovererKind = s.pick("Deployment", "DaemonSet")
	cfg.DiscovererMaxUnavailable = intstr.Parse(s.pick("1", "3", "25%"))
	cfg.DiscovererPDBMaxUnavailable = s.pick("", "0", "2", "50%")
	cfg.GatewayAgentsPerReplica = []int{2, 1, 7, 10000}[s.Next()%4]
	cfg.GatewayMinReplicas = []int{2, 1, 5}[s.Next()%3]
	cfg.GatewayMaxReplicas = cfg.GatewayMinReplicas + []int{98, 0, 9995}[s.Next()%3]
	if s.Next()%2 == 1 {
		cfg.GatewayIngressAnnotations = map[string]string{"team": "platform", "nginx.ingress.kubernetes.io/backend-protocol": "GRPC"}
	}
	if s.Next()%2 == 1 {
		cfg.DefaultValues = map[string]any{"defaults": map[string]any{"image": map[string]any{"tag": "v1.8.0"}},
			"gateway": map[string]any{"lb": map[string]any{"minReplicas": float64(9), "ingress": map[string]any{"host": "t.example.com"}}}}
	}

	overlay := s.Next() % 4
	switch overlay {
	case 1:
		v.Overlay = &apiextensionsv1.JSON{Raw: fmt.Appendf(nil, `{"gateway":{"lb":{"minReplicas":%d}},"agent":{"ngt":{"dimension":null}}}`, 1+s.Next())}
	case 2:
		if rest := s.Rest(); rest != nil {
			v.Overlay = &apiextensionsv1.JSON{Raw: rest}
		}
	default:
		overlay = 0
	}
	return vor, nodes, cfg, overlay
}

// FuzzDesiredValdReleases builds from any release admission accepts, any node-pool match
// and any valid configuration (overlay included, as a user may write any). The build is
// deterministic and leaves its input alone. It fails only with a stable *Error; without an
// overlay it fails only for what admission cannot see (a cluster without a name yet,
// <namespace>-<name> too long, a name two entries share) or for an empty set. A build that
// succeeds has one ValdRelease per admitted cluster, named <namespace>-<cluster>, sorted
// and unique, with valid labels and an owner; no object the chart renders belongs to two
// of them; and, unless an overlay renamed things, every rendered name is valid for its kind
// and every value has the type the chart declares.
func FuzzDesiredValdReleases(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{5, 3, 0, 2, 1, 1, 3, 1, 0, 1, 0, 1, 1, 2, 1, 1, 4, 1, 2, 3})
	f.Add([]byte{60, 1, 1, 62, 3, 4, 2, 0, 1, 4, 0, 1, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1})
	f.Add([]byte{3, 7, 7, 7, 7, 7, 1, 1, 2, 0, 1, 4, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, '{', '"', 'a', 'g', 'e', 'n', 't', '"', ':', 'n', 'u', 'l', 'l', '}'})
	f.Fuzz(func(t *testing.T, in []byte) {
		vor, nodes, cfg, overlay := decodeRelease(&fuzzBytes{fuzzinput.New(in)})
		if err := cfg.Validate(); err != nil {
			t.Fatalf("the decoder made an invalid configuration: %v", err)
		}
		orig := vor.DeepCopy()
		vrs, err := DesiredValdReleases(Input{Release: vor, Nodes: nodes}, cfg)
		if !reflect.DeepEqual(vor, orig) {
			t.Fatal("the build changed the release")
		}
		vrs2, err2 := DesiredValdReleases(Input{Release: orig, Nodes: nodes}, cfg)
		if !reflect.DeepEqual(vrs, vrs2) || fmt.Sprint(err) != fmt.Sprint(err2) {
			t.Fatalf("two builds differ: %v / %v", err, err2)
		}
		admitted := admittedClusters(vor, nodes)
		if err != nil {
			checkBuildError(t, vor, admitted, overlay, err)
			return
		}
		checkReleases(t, vor, admitted, overlay, vrs)
	})
}

// admittedClusters are the clusters of the active entries the node-pool match admits.
func admittedClusters(vor *valdv1.ValdOperatorRelease, nodes NodePools) []valdv1.Cluster {
	var out []valdv1.Cluster
	for _, infra := range vor.Spec.Infrastructure {
		if infra.IsActive() && (nodes == nil || nodes.admit(infra)) {
			out = append(out, infra.Clusters...)
		}
	}
	return out
}

func checkBuildError(t *testing.T, vor *valdv1.ValdOperatorRelease, admitted []valdv1.Cluster, overlay int, err error) {
	t.Helper()
	var be *Error
	if !errors.As(err, &be) || be.Message == "" {
		t.Fatalf("error %v is no *Error with a message", err)
	}
	if be.Empty != (len(admitted) == 0) {
		t.Fatalf("Empty %v with %d admitted clusters: %v", be.Empty, len(admitted), err)
	}
	if overlay != 0 || len(admitted) == 0 {
		return
	}
	if vor.Spec.VectorEngine.Vald.Agent.MemoryLimit != "" && strings.Contains(be.Message, "memoryLimit") {
		return // below the request: the request comes from the pool, which admission does not relate
	}
	if strings.Contains(be.Message, ".nodeSelector sets ") || strings.Contains(be.Message, "matches no node the pods may run on") {
		return // placement against the node pool's labels, whose prefix admission does not know
	}
	seen := map[string]bool{}
	for _, cl := range admitted {
		if cl.Name == "" || len(Name(vor.Namespace, cl.Name)) > MaxNameLength || seen[cl.Name] {
			return // a reason admission cannot see
		}
		seen[cl.Name] = true
	}
	t.Fatalf("a valid release without overlay failed: %v", err)
}

func checkReleases(t *testing.T, vor *valdv1.ValdOperatorRelease, admitted []valdv1.Cluster, overlay int, vrs []*valdv1.ValdRelease) {
	t.Helper()
	if len(vrs) != len(admitted) || len(vrs) == 0 {
		t.Fatalf("%d ValdReleases for %d admitted clusters", len(vrs), len(admitted))
	}
	want := map[string]bool{}
	for _, cl := range admitted {
		want[Name(vor.Namespace, cl.Name)] = true
	}
	renders := map[string][]valdchart.Resource{}
	for i, vr := range vrs {
		if i > 0 && vrs[i-1].Name >= vr.Name {
			t.Fatalf("names not sorted and unique: %s, %s", vrs[i-1].Name, vr.Name)
		}
		if !want[vr.Name] || vr.Namespace != vor.Namespace {
			t.Fatalf("ValdRelease %s/%s names no admitted cluster", vr.Namespace, vr.Name)
		}
		if msgs := validation.IsDNS1123Label(vr.Name); len(msgs) > 0 {
			t.Fatalf("name %q: %v", vr.Name, msgs)
		}
		if vr.Labels[valdv1.LabelCluster] == "" || Name(vor.Namespace, vr.Labels[valdv1.LabelCluster]) != vr.Name {
			t.Fatalf("%s: cluster label %q", vr.Name, vr.Labels[valdv1.LabelCluster])
		}
		for k, v := range vr.Labels {
			if msgs := append(validation.IsQualifiedName(k), validation.IsValidLabelValue(v)...); len(msgs) > 0 {
				t.Fatalf("%s: label %s=%q: %v", vr.Name, k, v, msgs)
			}
		}
		if refs := vr.OwnerReferences; len(refs) != 1 || refs[0].Name != vor.Name || refs[0].UID != vor.UID || refs[0].Controller == nil || !*refs[0].Controller {
			t.Fatalf("%s: owner references %+v", vr.Name, refs)
		}
		var values map[string]any
		if vr.Spec == nil || json.Unmarshal(vr.Spec.Raw, &values) != nil || values == nil {
			t.Fatalf("%s: values are not a JSON object", vr.Name)
		}
		objs := valdchart.Objects(vr.Name, vr.Namespace, values)
		renders[vr.Name] = objs
		if overlay == 2 {
			continue // an overlay may rename, retype or drop anything
		}
		if vs := valdchart.Check(values); len(vs) > 0 {
			t.Fatalf("%s: the chart's schema refuses the values: %s", vr.Name, valdchart.SchemaError(vs))
		}
		valdchart.Walk(values, func(path string, _ any, _ valdchart.Key, known bool) {
			if !known {
				t.Fatalf("%s: key %s is not one the chart declares", vr.Name, path)
			}
		})
		if lb, _ := values["gateway"].(map[string]any)["lb"].(map[string]any); lb["maxReplicas"] != nil && lb["minReplicas"].(float64) > lb["maxReplicas"].(float64) {
			t.Fatalf("%s: gateway minReplicas %v above maxReplicas %v", vr.Name, lb["minReplicas"], lb["maxReplicas"])
		}
		if len(objs) < 10 {
			t.Fatalf("%s renders %d objects: %v", vr.Name, len(objs), objs)
		}
		for _, o := range objs {
			if msgs := objectNameErrors(o); len(msgs) > 0 {
				t.Fatalf("%s: %s: %v", vr.Name, o, msgs)
			}
		}
	}
	if clashes := valdchart.Clashes(renders); len(clashes) > 0 {
		c := clashes[0]
		t.Fatalf("%s is rendered by both %s and %s", c.Object, c.A, c.B)
	}
	names := make([]string, 0, len(vrs))
	for _, vr := range vrs {
		names = append(names, vr.Name)
	}
	if !sort.StringsAreSorted(names) {
		t.Fatalf("not sorted: %v", names)
	}
}

// objectNameErrors checks a rendered object's name as the API server would, with the room
// the chart's derived names need: a CronJob's Jobs and a StatefulSet's revision label add
// suffixes (componentNameMax).
func objectNameErrors(o valdchart.Resource) []string {
	switch o.Kind {
	case "Service":
		return validation.IsDNS1035Label(o.Name)
	case "ClusterRole", "ClusterRoleBinding":
		var msgs []string
		for _, e := range pathSegmentErrors(o.Name) {
			msgs = append(msgs, e.Error())
		}
		return msgs
	case "CronJob", "StatefulSet":
		msgs := validation.IsDNS1123Subdomain(o.Name)
		if len(o.Name) > componentNameMax {
			msgs = append(msgs, fmt.Sprintf("longer than %d", componentNameMax))
		}
		return msgs
	default:
		return validation.IsDNS1123Subdomain(o.Name)
	}
}

// pathSegmentErrors is what RBAC objects' names must be: any path segment name.
func pathSegmentErrors(name string) field.ErrorList {
	var errs field.ErrorList
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/%") {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), name, "not a path segment name"))
	}
	return errs
}
