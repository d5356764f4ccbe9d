package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"

	valdv1 "github.com/opsuite/suite/api/vald/v1"
	"github.com/opsuite/suite/services/vald-operator/internal/resources"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestAdmission checks the CRD's schema and CEL rules on the real API server: what is
// structurally wrong is refused with a message that says what to change; what an external
// system fills in later is accepted.
func TestAdmission(t *testing.T) {
	h := &harness{t: t, ns: newNamespace(t)}
	cases := []struct {
		name   string
		mutate func(*valdv1.ValdOperatorRelease)
		want   string // "" accepts
	}{
		{name: "valid", mutate: func(*valdv1.ValdOperatorRelease) {}},
		{name: "empty cluster id and name", mutate: func(v *valdv1.ValdOperatorRelease) {
			v.Spec.Infrastructure[0].Clusters = append(v.Spec.Infrastructure[0].Clusters, valdv1.Cluster{})
		}},
		{name: "empty infrastructure", mutate: func(v *valdv1.ValdOperatorRelease) { v.Spec.Infrastructure = nil }},
		{name: "cluster name not a DNS label", mutate: func(v *valdv1.ValdOperatorRelease) { v.Spec.Infrastructure[0].Clusters[0].Name = "Cluster_A" },
			want: "cluster name must be lowercase letters, digits and '-'"},
		{name: "duplicate cluster names", mutate: func(v *valdv1.ValdOperatorRelease) {
			v.Spec.Infrastructure[0].Clusters = append(v.Spec.Infrastructure[0].Clusters, valdv1.Cluster{Name: "a"})
		}, want: "cluster names must be unique within an infrastructure entry"},
		{name: "duplicate roles", mutate: func(v *valdv1.ValdOperatorRelease) {
			v.Spec.Infrastructure = append(v.Spec.Infrastructure, v.Spec.Infrastructure[0])
		}, want: "each infrastructure entry needs its own role"},
		{name: "role with a slash", mutate: func(v *valdv1.ValdOperatorRelease) { v.Spec.Infrastructure[0].Role = "hot/cold" },
			want: "role must be a valid label value (it labels the ValdReleases): at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit"},
		{name: "role of 64 characters", mutate: func(v *valdv1.ValdOperatorRelease) { v.Spec.Infrastructure[0].Role = strings.Repeat("r", 64) },
			want: "role must be a valid label value"},
		{name: "role of 63 characters with '_' and '.'", mutate: func(v *valdv1.ValdOperatorRelease) {
			v.Spec.Infrastructure[0].Role = "Hot_1." + strings.Repeat("r", 57)
		}},
		{name: "release name of 64 characters", mutate: func(v *valdv1.ValdOperatorRelease) { v.Name = strings.Repeat("n", 64) },
			want: "metadata.name must be at most 63 characters: it is the value of the vald.vdaas.org/operator-release label on every ValdRelease"},
		{name: "release name of 63 characters", mutate: func(v *valdv1.ValdOperatorRelease) { v.Name = strings.Repeat("n", 63) }},
		{name: "distance type", mutate: func(v *valdv1.ValdOperatorRelease) { v.Spec.VectorEngine.Vald.Agent.NGT.DistanceType = "euclid" },
			want: `spec.vectorEngine.vald.agent.ngt.distanceType: Unsupported value: "euclid"`},
		{name: "object type", mutate: func(v *valdv1.ValdOperatorRelease) { v.Spec.VectorEngine.Vald.Agent.NGT.ObjectType = "double" },
			want: `spec.vectorEngine.vald.agent.ngt.objectType: Unsupported value: "double"`},
		{name: "discoverer kind", mutate: func(v *valdv1.ValdOperatorRelease) { v.Spec.VectorEngine.Vald.Discoverer.Kind = "StatefulSet" },
			want: `spec.vectorEngine.vald.discoverer.kind: Unsupported value: "StatefulSet"`},
		{name: "service type", mutate: func(v *valdv1.ValdOperatorRelease) { v.Spec.VectorEngine.Vald.Gateway.ServiceType = "ExternalName" },
			want: `spec.vectorEngine.vald.gateway.serviceType: Unsupported value: "ExternalName"`},
		{name: "access mode", mutate: func(v *valdv1.ValdOperatorRelease) {
			v.Spec.VectorEngine.Vald.Agent.PersistentVolume = &valdv1.PersistentVolume{Enabled: true, AccessMode: "RWO"}
		}, want: `accessMode: Unsupported value: "RWO"`},
		{name: "zero dimension", mutate: func(v *valdv1.ValdOperatorRelease) { v.Spec.VectorEngine.Vald.Agent.NGT.Dimension = 0 },
			want: "spec.vectorEngine.vald.agent.ngt.dimension: Invalid value: 0: spec.vectorEngine.vald.agent.ngt.dimension in body should be greater than or equal to 1"},
		{name: "zero replicas", mutate: func(v *valdv1.ValdOperatorRelease) { v.Spec.Infrastructure[0].NodePools.General.Replicas = 0 },
			want: "replicas in body should be greater than or equal to 1"},
		{name: "negative memory", mutate: func(v *valdv1.ValdOperatorRelease) {
			v.Spec.Infrastructure[0].NodePools.General.MachineResource.Memory = "-1Gi"
		}, want: `machineResource.memory must be a positive quantity, such as "16Gi"`},
		{name: "cpu not a quantity", mutate: func(v *valdv1.ValdOperatorRelease) {
			v.Spec.Infrastructure[0].NodePools.General.MachineResource.CPU = "four"
		}, want: `machineResource.cpu must be a positive quantity`},
		{name: "index duration", mutate: func(v *valdv1.ValdOperatorRelease) { v.Spec.VectorEngine.Vald.Indexer.IndexDuration = "hourly" },
			want: "indexer.indexDuration must be a duration such as 30m or 1h"},
		{name: "ingress host", mutate: func(v *valdv1.ValdOperatorRelease) {
			v.Spec.VectorEngine.Vald.Gateway.Ingress = &valdv1.Ingress{Enabled: true, Host: "Vald Example"}
		}, want: "ingress.host must be a lowercase DNS name"},
		{name: "vector engine name", mutate: func(v *valdv1.ValdOperatorRelease) { v.Spec.VectorEngine.Name = "My Vald" },
			want: "vectorEngine.name must be lowercase letters, digits and '-'"},
		{name: "overlay not an object", mutate: func(v *valdv1.ValdOperatorRelease) {
			v.Spec.VectorEngine.Vald.Overlay = &apiextensionsv1.JSON{Raw: []byte(`[1,2]`)}
		}, want: "spec.vectorEngine.vald.overlay: Invalid value"},
		// Issue 22 item 4: the fields upstream's ValdOperatorRelease has and ours gained.
		{name: "every new field", mutate: func(v *valdv1.ValdOperatorRelease) {
			vald := &v.Spec.VectorEngine.Vald
			vald.Agent.MemoryLimit = "24Gi"
			vald.Agent.TopologySpreadConstraints = &[]valdv1.TopologySpread{{MaxSkew: 2, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: "ScheduleAnyway"}}
			vald.Indexer = valdv1.Indexer{IndexSchedule: "*/30 * * * *", IndexSuspend: true, SaveSchedule: "@every 1h30m", SaveSuspend: true,
				TopologySpreadConstraints: &[]valdv1.TopologySpread{}}
			vald.Gateway = valdv1.Gateway{MinReplicas: ptr.To[int32](2), MaxReplicas: ptr.To[int32](2),
				Ingress: &valdv1.Ingress{Enabled: true, Annotations: map[string]string{"nginx.ingress.kubernetes.io/backend-protocol": "GRPC", "team": "search"}}}
			vald.Discoverer.TopologySpreadConstraints = &[]valdv1.TopologySpread{{TopologyKey: "kubernetes.io/hostname"}}
		}},
		{name: "agent memory limit not a quantity", mutate: func(v *valdv1.ValdOperatorRelease) { v.Spec.VectorEngine.Vald.Agent.MemoryLimit = "lots" },
			want: `agent.memoryLimit must be a positive quantity, such as "24Gi"; leave it out for no limit`},
		{name: "agent memory limit zero", mutate: func(v *valdv1.ValdOperatorRelease) { v.Spec.VectorEngine.Vald.Agent.MemoryLimit = "0" },
			want: "agent.memoryLimit must be a positive quantity"},
		{name: "gateway minReplicas above maxReplicas", mutate: func(v *valdv1.ValdOperatorRelease) {
			v.Spec.VectorEngine.Vald.Gateway.MinReplicas, v.Spec.VectorEngine.Vald.Gateway.MaxReplicas = ptr.To[int32](5), ptr.To[int32](4)
		}, want: "gateway.minReplicas must be at most gateway.maxReplicas"},
		{name: "gateway minReplicas zero", mutate: func(v *valdv1.ValdOperatorRelease) { v.Spec.VectorEngine.Vald.Gateway.MinReplicas = ptr.To[int32](0) },
			want: "minReplicas in body should be greater than or equal to 1"},
		{name: "gateway maxReplicas above the limit", mutate: func(v *valdv1.ValdOperatorRelease) {
			v.Spec.VectorEngine.Vald.Gateway.MaxReplicas = ptr.To[int32](valdv1.MaxGatewayReplicas + 1)
		}, want: "gateway.maxReplicas must be at most 10000"},
		{name: "index schedule of four fields", mutate: func(v *valdv1.ValdOperatorRelease) { v.Spec.VectorEngine.Vald.Indexer.IndexSchedule = "0 * * *" },
			want: "indexer.indexSchedule must be a CronJob schedule: five fields"},
		{name: "save schedule with a time zone", mutate: func(v *valdv1.ValdOperatorRelease) {
			v.Spec.VectorEngine.Vald.Indexer.SaveSchedule = "CRON_TZ=UTC 0 * * * *"
		}, want: "indexer.saveSchedule must be a CronJob schedule"},
		{name: "save schedule @every without a unit", mutate: func(v *valdv1.ValdOperatorRelease) { v.Spec.VectorEngine.Vald.Indexer.SaveSchedule = "@every 10" },
			want: "indexer.saveSchedule must be a CronJob schedule"},
		{name: "topology key with a space", mutate: func(v *valdv1.ValdOperatorRelease) {
			v.Spec.VectorEngine.Vald.Gateway.TopologySpreadConstraints = &[]valdv1.TopologySpread{{TopologyKey: "kubernetes.io/host name"}}
		}, want: "topologyKey must be a node label key such as kubernetes.io/hostname"},
		{name: "topology whenUnsatisfiable", mutate: func(v *valdv1.ValdOperatorRelease) {
			v.Spec.VectorEngine.Vald.Agent.TopologySpreadConstraints = &[]valdv1.TopologySpread{{TopologyKey: "kubernetes.io/hostname", WhenUnsatisfiable: "Never"}}
		}, want: `whenUnsatisfiable: Unsupported value: "Never"`},
		{name: "topology maxSkew negative", mutate: func(v *valdv1.ValdOperatorRelease) {
			v.Spec.VectorEngine.Vald.Indexer.TopologySpreadConstraints = &[]valdv1.TopologySpread{{TopologyKey: "kubernetes.io/hostname", MaxSkew: -1}}
		}, want: "maxSkew in body should be greater than or equal to 1"},
		{name: "ingress annotation key with a space", mutate: func(v *valdv1.ValdOperatorRelease) {
			v.Spec.VectorEngine.Vald.Gateway.Ingress = &valdv1.Ingress{Enabled: true, Annotations: map[string]string{"bad key": "x"}}
		}, want: "ingress.annotations keys must be annotation keys"},
		// Issue 26: placement of every component, in the Vald chart's keys.
		{name: "every placement field", mutate: func(v *valdv1.ValdOperatorRelease) {
			vald := &v.Spec.VectorEngine.Vald
			p := valdv1.Placement{
				Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
					NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "topology.kubernetes.io/zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}}}}}},
				NodeSelector: map[string]valdv1.LabelValue{"disktype": "nvme", "example.com/rack": ""},
				Tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "vald", Effect: corev1.TaintEffectNoSchedule},
					{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](30)}},
				PodPriority:                   &valdv1.PodPriority{Enabled: ptr.To(true), Value: ptr.To[int32](1000000000)},
				TerminationGracePeriodSeconds: ptr.To[int64](86400),
			}
			vald.Agent.Placement, vald.Gateway.Placement, vald.Discoverer.Placement = p, p, p
			vald.Indexer.Manager, vald.Indexer.Placement = true, p
		}},
		{name: "index jobs placement", mutate: func(v *valdv1.ValdOperatorRelease) {
			v.Spec.VectorEngine.Vald.Indexer.Placement = valdv1.Placement{NodeSelector: map[string]valdv1.LabelValue{"disktype": "ssd"},
				Tolerations: []corev1.Toleration{{Key: "batch", Operator: corev1.TolerationOpExists}}}
		}},
		{name: "nodeSelector key with a space", mutate: func(v *valdv1.ValdOperatorRelease) {
			v.Spec.VectorEngine.Vald.Agent.NodeSelector = map[string]valdv1.LabelValue{"disk type": "nvme"}
		}, want: "nodeSelector keys must be node label keys such as topology.kubernetes.io/zone"},
		{name: "nodeSelector value with a slash", mutate: func(v *valdv1.ValdOperatorRelease) {
			v.Spec.VectorEngine.Vald.Gateway.NodeSelector = map[string]valdv1.LabelValue{"disktype": "nvme/ssd"}
		}, want: "nodeSelector values must be label values"},
		{name: "toleration effect", mutate: func(v *valdv1.ValdOperatorRelease) {
			v.Spec.VectorEngine.Vald.Discoverer.Tolerations = []corev1.Toleration{{Key: "a", Operator: corev1.TolerationOpExists, Effect: "NoRun"}}
		}, want: "tolerations[].effect must be NoSchedule, PreferNoSchedule or NoExecute"},
		{name: "toleration operator", mutate: func(v *valdv1.ValdOperatorRelease) {
			v.Spec.VectorEngine.Vald.Agent.Tolerations = []corev1.Toleration{{Key: "a", Operator: "In"}}
		}, want: "tolerations[].operator must be Equal or Exists"},
		{name: "toleration Exists with a value", mutate: func(v *valdv1.ValdOperatorRelease) {
			v.Spec.VectorEngine.Vald.Agent.Tolerations = []corev1.Toleration{{Key: "a", Operator: corev1.TolerationOpExists, Value: "b"}}
		}, want: "tolerations[] with operator Exists must have no value"},
		{name: "toleration without a key nor Exists", mutate: func(v *valdv1.ValdOperatorRelease) {
			v.Spec.VectorEngine.Vald.Agent.Tolerations = []corev1.Toleration{{Value: "b", Effect: corev1.TaintEffectNoSchedule}}
		}, want: "tolerations[] without a key must have operator Exists"},
		{name: "tolerationSeconds without NoExecute", mutate: func(v *valdv1.ValdOperatorRelease) {
			v.Spec.VectorEngine.Vald.Indexer.Tolerations = []corev1.Toleration{{Key: "a", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule, TolerationSeconds: ptr.To[int64](5)}}
		}, want: "tolerations[].tolerationSeconds applies to effect NoExecute only"},
		{name: "priority above the user maximum", mutate: func(v *valdv1.ValdOperatorRelease) {
			v.Spec.VectorEngine.Vald.Agent.PodPriority = &valdv1.PodPriority{Value: ptr.To[int32](1000000001)}
		}, want: "podPriority.value must be at most 1000000000"},
		{name: "empty podPriority", mutate: func(v *valdv1.ValdOperatorRelease) {
			v.Spec.VectorEngine.Vald.Gateway.PodPriority = &valdv1.PodPriority{}
		}, want: "podPriority needs enabled or value"},
		{name: "grace period zero", mutate: func(v *valdv1.ValdOperatorRelease) {
			v.Spec.VectorEngine.Vald.Agent.TerminationGracePeriodSeconds = ptr.To[int64](0)
		}, want: "terminationGracePeriodSeconds must be between 1 and 86400 seconds"},
		{name: "grace period above a day", mutate: func(v *valdv1.ValdOperatorRelease) {
			v.Spec.VectorEngine.Vald.Discoverer.TerminationGracePeriodSeconds = ptr.To[int64](86401)
		}, want: "terminationGracePeriodSeconds must be between 1 and 86400 seconds"},
		{name: "index job priority", mutate: func(v *valdv1.ValdOperatorRelease) {
			v.Spec.VectorEngine.Vald.Indexer.PodPriority = &valdv1.PodPriority{Value: ptr.To[int32](10)}
		}, want: "indexer.podPriority and indexer.terminationGracePeriodSeconds apply to the index manager only"},
		{name: "index job grace period", mutate: func(v *valdv1.ValdOperatorRelease) {
			v.Spec.VectorEngine.Vald.Indexer.TerminationGracePeriodSeconds = ptr.To[int64](10)
		}, want: "indexer.podPriority and indexer.terminationGracePeriodSeconds apply to the index manager only"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			vor := h.release("v-"+rand.String(5), "a=1")
			vor.Spec.Infrastructure[0].NodePools.General.MachineResource = valdv1.MachineResource{CPU: "4", Memory: "16Gi"}
			tc.mutate(vor)
			err := env.Client.Create(context.Background(), vor)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && err == nil:
				t.Errorf("accepted, want %q", tc.want)
			case tc.want != "" && (!apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v, want Invalid with %q", err, tc.want)
			}
		})
	}
}

// TestDefaults checks the server-side defaults of a minimal release.
func TestDefaults(t *testing.T) {
	h := &harness{t: t, ns: newNamespace(t)}
	vor := h.release("minimal", "a=1")
	vor.Spec.Infrastructure[0].Active = nil
	h.create(vor)
	got := h.get("minimal")
	ngt := got.Spec.VectorEngine.Vald.Agent.NGT
	if got.Spec.Infrastructure[0].Active == nil || !*got.Spec.Infrastructure[0].Active || ngt.DistanceType != "l2" || ngt.ObjectType != "float" {
		t.Errorf("defaults: active=%v distanceType=%q objectType=%q", got.Spec.Infrastructure[0].Active, ngt.DistanceType, ngt.ObjectType)
	}
}

// TestPodPriorityValueFixed: Kubernetes refuses to change a PriorityClass's value, so a
// release refuses a new podPriority.value while the chart's class exists, with a message
// saying how to change it: disable the class first (the chart deletes it), then set the
// new value with the class on.
func TestPodPriorityValueFixed(t *testing.T) {
	h := &harness{t: t, ns: newNamespace(t)}
	vor := h.release("prio", "a=1")
	vor.Spec.VectorEngine.Vald.Agent.PodPriority = &valdv1.PodPriority{Value: ptr.To[int32](5000)}
	h.create(vor)
	set := func(p *valdv1.PodPriority) error {
		got := h.get("prio")
		got.Spec.VectorEngine.Vald.Agent.PodPriority = p
		return env.Client.Update(context.Background(), got)
	}
	err := set(&valdv1.PodPriority{Value: ptr.To[int32](6000)})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "podPriority.value cannot change while the class exists") {
		t.Errorf("value changed with the class on: %v", err)
	}
	if err := set(&valdv1.PodPriority{Enabled: ptr.To(false), Value: ptr.To[int32](5000)}); err != nil {
		t.Fatalf("disabling the class: %v", err)
	}
	if err := set(&valdv1.PodPriority{Enabled: ptr.To(true), Value: ptr.To[int32](6000)}); err != nil {
		t.Errorf("a new value once the class was off: %v", err)
	}
}

// TestAdmissionLimits: every count and name of a release has an upper bound the API
// server enforces with a message that names it, and the bound itself is accepted.
func TestAdmissionLimits(t *testing.T) {
	h := &harness{t: t, ns: newNamespace(t)}
	type vor = valdv1.ValdOperatorRelease
	clusters := func(n int) []valdv1.Cluster {
		out := make([]valdv1.Cluster, n)
		for i := range out {
			out[i] = valdv1.Cluster{Name: fmt.Sprintf("c%d", i)}
		}
		return out
	}
	entries := func(perEntry ...int) []valdv1.Infrastructure {
		var out []valdv1.Infrastructure
		for i, n := range perEntry {
			out = append(out, valdv1.Infrastructure{Role: fmt.Sprintf("r%d", i), Clusters: clusters(n)})
		}
		return out
	}
	cases := []struct {
		name   string
		mutate func(*vor)
		want   string // "" accepts
	}{
		{name: "64 clusters over two entries", mutate: func(v *vor) { v.Spec.Infrastructure = entries(32, 32) }},
		{name: "65 clusters over two entries", mutate: func(v *vor) { v.Spec.Infrastructure = entries(32, 33) },
			want: "infrastructure must list at most 64 clusters in all"},
		{name: "cluster name of 61 characters", mutate: func(v *vor) {
			v.Spec.Infrastructure[0].Clusters[0].Name = strings.Repeat("c", valdv1.MaxClusterNameLength)
		}},
		{name: "cluster name of 62 characters", mutate: func(v *vor) {
			v.Spec.Infrastructure[0].Clusters[0].Name = strings.Repeat("c", valdv1.MaxClusterNameLength+1)
		}, want: "cluster name must be at most 61 characters: the ValdRelease is named <namespace>-<name>, which must fit in 63"},
		{name: "creationEdgeSize at the limit", mutate: func(v *vor) { v.Spec.VectorEngine.Vald.Agent.NGT.CreationEdgeSize = valdv1.MaxEdgeSize }},
		{name: "creationEdgeSize above the limit", mutate: func(v *vor) { v.Spec.VectorEngine.Vald.Agent.NGT.CreationEdgeSize = 2000000000 },
			want: "creationEdgeSize must be at most 1000"},
		{name: "searchEdgeSize at the limit", mutate: func(v *vor) { v.Spec.VectorEngine.Vald.Agent.NGT.SearchEdgeSize = valdv1.MaxEdgeSize }},
		{name: "searchEdgeSize above the limit", mutate: func(v *vor) { v.Spec.VectorEngine.Vald.Agent.NGT.SearchEdgeSize = valdv1.MaxEdgeSize + 1 },
			want: "searchEdgeSize must be at most 1000"},
		{name: "concurrency at the limit", mutate: func(v *vor) { v.Spec.VectorEngine.Vald.Indexer.Concurrency = valdv1.MaxConcurrency }},
		{name: "concurrency above the limit", mutate: func(v *vor) { v.Spec.VectorEngine.Vald.Indexer.Concurrency = 2000000000 },
			want: "indexer.concurrency must be at most 10000"},
		{name: "index duration of 33 characters", mutate: func(v *vor) { v.Spec.VectorEngine.Vald.Indexer.IndexDuration = strings.Repeat("1h", 16) + "1" },
			want: "spec.vectorEngine.vald.indexer.indexDuration: Too long: may not be more than 32 bytes"},
		{name: "agents above the limit", mutate: func(v *vor) { v.Spec.Infrastructure[0].NodePools.General.Replicas = 2000000000 },
			want: "replicas in body should be less than or equal to 10000"},
		{name: "dimension above the limit", mutate: func(v *vor) { v.Spec.VectorEngine.Vald.Agent.NGT.Dimension = 65537 },
			want: "dimension in body should be less than or equal to 65536"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := h.release("v-"+rand.String(5), "a=1")
			tc.mutate(v)
			err := env.Client.Create(context.Background(), v)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && err == nil:
				t.Errorf("accepted, want %q", tc.want)
			case tc.want != "" && (!apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v, want Invalid with %q", err, tc.want)
			}
		})
	}
}

// TestLongestNamesFit: a release of the longest accepted name, in a one-character
// namespace, with the longest role and cluster names and the most clusters, is admitted,
// and the ValdReleases the builder derives from it are accepted by the API server (dry
// run): each name <namespace>-<cluster> a 63-character DNS label, each label value fits.
func TestLongestNamesFit(t *testing.T) {
	ctx := context.Background()
	ns := "z" // the shortest namespace leaves the longest cluster name
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	h := &harness{t: t, ns: ns}
	v := h.release(strings.Repeat("v", valdv1.MaxNameLength-5) + rand.String(5))
	v.Spec.Infrastructure = nil
	for e := range 2 {
		infra := valdv1.Infrastructure{Role: fmt.Sprintf("%d", e) + strings.Repeat("r", 62), Active: ptr.To(true),
			NodePools: valdv1.NodePools{General: &valdv1.NodePool{Replicas: 2}}}
		for i := range valdv1.MaxClusters / 2 {
			name := fmt.Sprintf("%d-%02d-", e, i)
			infra.Clusters = append(infra.Clusters, valdv1.Cluster{ID: "id", Name: name + strings.Repeat("c", valdv1.MaxClusterNameLength-len(name))})
		}
		v.Spec.Infrastructure = append(v.Spec.Infrastructure, infra)
	}
	v.Spec.VectorEngine.Name = strings.Repeat("e", 63)
	if err := env.Client.Create(ctx, v); err != nil {
		t.Fatalf("the longest names are refused: %v", err)
	}
	vrs, err := resources.DesiredValdReleases(resources.Input{Release: v}, resources.DefaultConfig())
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	if len(vrs) != valdv1.MaxClusters {
		t.Fatalf("%d ValdReleases, want %d", len(vrs), valdv1.MaxClusters)
	}
	for _, vr := range vrs {
		if len(vr.Name) != 63 {
			t.Errorf("ValdRelease %q is %d characters, want the longest, 63", vr.Name, len(vr.Name))
		}
		if errs := validation.IsDNS1123Label(vr.Name); len(errs) > 0 {
			t.Errorf("ValdRelease %q: %v", vr.Name, errs)
		}
		if err := env.Client.Create(ctx, vr, client.DryRunAll); err != nil {
			t.Errorf("ValdRelease %q refused: %v", vr.Name, err)
		}
	}
}
