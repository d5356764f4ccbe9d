package controller

import (
	"context"
	"strings"
	"testing"

	valdv1 "github.com/opsuite/suite/api/vald/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/rand"
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
