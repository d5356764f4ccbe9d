package resources

import (
	"reflect"
	"testing"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

// hardened is the container securityContext of upstream's read-only root filesystem
// samples (our own values).
func hardened(uid int64) *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		RunAsNonRoot:             ptr.To(true),
		RunAsUser:                ptr.To(uid),
		RunAsGroup:               ptr.To(uid),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

func TestContainerFor(t *testing.T) {
	for name, want := range map[string]string{
		"server": ServerContainer, "metrics-exporter": ExporterContainer,
		ServerContainer: ServerContainer, ExporterContainer: ExporterContainer, "sidecar": "sidecar",
	} {
		if got := ContainerFor(name); got != want {
			t.Errorf("ContainerFor(%q) = %q, want %q", name, got, want)
		}
	}
}

// TestContainersMergeByName: spec.containers entries under the operator's names or
// upstream's ("server", "metrics-exporter") are laid over the operator's containers, which
// keep their names, image, command and mounts; only new names are added, after them.
func TestContainersMergeByName(t *testing.T) {
	for _, tc := range []struct {
		name      string
		exporter  bool
		extra     []corev1.Container
		wantNames []string
		check     func(t *testing.T, pod corev1.PodSpec)
	}{
		{
			// The shape of upstream's read-only root filesystem sample: before, "server"
			// became a third container without an image, which the API server refuses.
			name: "upstream's server entry", exporter: true,
			extra:     []corev1.Container{{Name: "server", SecurityContext: hardened(56849)}},
			wantNames: []string{ServerContainer, ExporterContainer},
			check: func(t *testing.T, pod corev1.PodSpec) {
				v := container(t, pod, ServerContainer)
				if !reflect.DeepEqual(v.SecurityContext, hardened(56849)) {
					t.Errorf("server securityContext %+v", v.SecurityContext)
				}
				if v.Image != "valkey/valkey:8.1" || len(v.Command) != 1 || v.Command[0] != "valkey-server" || len(v.VolumeMounts) != 3 || v.ReadinessProbe == nil {
					t.Errorf("server container lost its own fields: %+v", v)
				}
			},
		},
		{
			name: "upstream's metrics-exporter entry", exporter: true,
			extra: []corev1.Container{{Name: "metrics-exporter", SecurityContext: hardened(56850),
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}}}},
			wantNames: []string{ServerContainer, ExporterContainer},
			check: func(t *testing.T, pod corev1.PodSpec) {
				e := container(t, pod, ExporterContainer)
				if e.Image != DefaultExporterImage || !reflect.DeepEqual(e.SecurityContext, hardened(56850)) || e.Resources.Limits.Memory().String() != "64Mi" {
					t.Errorf("exporter %+v", e)
				}
			},
		},
		{
			name: "our names, and a new sidecar after them", exporter: true,
			extra: []corev1.Container{
				{Name: "sidecar", Image: "busybox"},
				{Name: ServerContainer, Env: []corev1.EnvVar{{Name: "EXTRA", Value: "1"}}},
				{Name: ExporterContainer, Args: []string{"--include-system-metrics"}},
			},
			wantNames: []string{ServerContainer, ExporterContainer, "sidecar"},
			check: func(t *testing.T, pod corev1.PodSpec) {
				if v := container(t, pod, ServerContainer); len(v.Env) != 2 || v.Env[1].Name != "EXTRA" {
					t.Errorf("server env %+v", v.Env)
				}
				if e := container(t, pod, ExporterContainer); len(e.Args) != 1 {
					t.Errorf("exporter args %v", e.Args)
				}
			},
		},
		{
			// Without the exporter there is nothing to merge into: the entry is a container
			// of its own, as upstream adds it (the API server then says what it lacks).
			name: "metrics-exporter without the exporter", exporter: false,
			extra:     []corev1.Container{{Name: "metrics-exporter", Image: "my/exporter:1"}},
			wantNames: []string{ServerContainer, "metrics-exporter"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := testNode(func(n *valkeyv1.ValkeyNode) {
				n.Spec.Exporter = valkeyv1.ExporterSpec{Enabled: tc.exporter, SecurityContext: hardened(1)}
				n.Spec.Containers = tc.extra
			})
			before := n.DeepCopy()
			for _, objs := range []NodeObjects{NodeWorkload(n, NodeOptions{}), NodeWorkload(withDeployment(n), NodeOptions{})} {
				var pod corev1.PodSpec
				if objs.StatefulSet != nil {
					pod = objs.StatefulSet.Spec.Template.Spec
				} else {
					pod = objs.Deployment.Spec.Template.Spec
				}
				var names []string
				for _, c := range pod.Containers {
					names = append(names, c.Name)
					if c.Image == "" {
						t.Errorf("container %s has no image", c.Name)
					}
				}
				if !reflect.DeepEqual(names, tc.wantNames) {
					t.Fatalf("containers %v, want %v", names, tc.wantNames)
				}
				if tc.check != nil {
					tc.check(t, pod)
				}
			}
			if !reflect.DeepEqual(before, n) {
				t.Error("the builder changed its input")
			}
		})
	}
}

func withDeployment(n *valkeyv1.ValkeyNode) *valkeyv1.ValkeyNode {
	d := n.DeepCopy()
	d.Spec.WorkloadType = valkeyv1.WorkloadTypeDeployment
	return d
}
