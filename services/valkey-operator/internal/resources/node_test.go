package resources

import (
	"reflect"
	"testing"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func testNode(mutate func(*valkeyv1.ValkeyNode)) *valkeyv1.ValkeyNode {
	n := &valkeyv1.ValkeyNode{
		ObjectMeta: metav1.ObjectMeta{Name: "c-1-0", Namespace: "ns",
			Annotations: map[string]string{"other": "x"}},
		Spec: valkeyv1.ValkeyNodeSpec{
			ClusterName: "c", ShardIndex: 1, NodeIndex: 0, RoleHint: valkeyv1.RolePrimary,
			Image: "valkey/valkey:8.1", WorkloadType: valkeyv1.WorkloadTypeStatefulSet,
			ServerConfigMapName: "c-config", UsersACLSecretName: "c-acl", ConfigHash: "abc",
		},
	}
	if mutate != nil {
		mutate(n)
	}
	return n
}

func volume(t *testing.T, pod corev1.PodSpec, name string) corev1.Volume {
	t.Helper()
	for _, v := range pod.Volumes {
		if v.Name == name {
			return v
		}
	}
	t.Fatalf("no volume %s in %+v", name, pod.Volumes)
	return corev1.Volume{}
}

func container(t *testing.T, pod corev1.PodSpec, name string) corev1.Container {
	t.Helper()
	for _, c := range pod.Containers {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no container %s", name)
	return corev1.Container{}
}

func mountPaths(c corev1.Container) map[string]string {
	out := map[string]string{}
	for _, m := range c.VolumeMounts {
		out[m.MountPath] = m.Name
	}
	return out
}

func TestNodeWorkloadStatefulSet(t *testing.T) {
	o := NodeWorkload(testNode(nil), NodeOptions{})
	if o.Deployment != nil || o.PVC != nil {
		t.Fatalf("want only a StatefulSet, got deployment %v pvc %v", o.Deployment != nil, o.PVC != nil)
	}
	s := o.StatefulSet
	if s.Name != "c-1-0" || s.Namespace != "ns" || *s.Spec.Replicas != 1 || s.Spec.ServiceName != "c" {
		t.Errorf("statefulset %s/%s replicas %d service %s", s.Namespace, s.Name, *s.Spec.Replicas, s.Spec.ServiceName)
	}
	if len(s.Spec.VolumeClaimTemplates) != 0 {
		t.Error("the PVC must not be a volumeClaimTemplate")
	}
	want := map[string]string{
		LabelName: "valkey", LabelInstance: "c", LabelManagedBy: ManagedBy, LabelCluster: "c",
		LabelComponent: ComponentNode, LabelShard: "1", LabelNodeIndex: "0", LabelNode: "c-1-0",
	}
	if !reflect.DeepEqual(s.Labels, want) || !reflect.DeepEqual(s.Spec.Template.Labels, want) {
		t.Errorf("labels %v / template %v, want %v", s.Labels, s.Spec.Template.Labels, want)
	}
	for k, v := range s.Spec.Selector.MatchLabels {
		if s.Spec.Template.Labels[k] != v {
			t.Errorf("selector %s=%s does not match the template", k, v)
		}
	}
	if got := s.Spec.Template.Annotations; !reflect.DeepEqual(got, map[string]string{AnnotationRestartHash: "abc"}) {
		t.Errorf("template annotations %v: want only the restart hash", got)
	}
	pod := s.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("containers %d, want 1 without exporter", len(pod.Containers))
	}
	v := container(t, pod, "valkey")
	if v.Image != "valkey/valkey:8.1" || !reflect.DeepEqual(v.Command, []string{"valkey-server"}) ||
		!reflect.DeepEqual(v.Args, []string{"/etc/valkey/conf/valkey.conf", "--cluster-announce-ip", "$(POD_IP)", "--cluster-announce-hostname", "c-1-0-0.c.ns.svc"}) {
		t.Errorf("server container image %s command %v args %v", v.Image, v.Command, v.Args)
	}
	if len(v.Env) != 1 || v.Env[0].Name != "POD_IP" || v.Env[0].ValueFrom.FieldRef.FieldPath != "status.podIP" {
		t.Errorf("env %+v", v.Env)
	}
	if len(v.Ports) != 2 || v.Ports[0].ContainerPort != 6379 || v.Ports[0].Name != "valkey" ||
		v.Ports[1].ContainerPort != 16379 || v.Ports[1].Name != "cluster-bus" {
		t.Errorf("ports %+v", v.Ports)
	}
	for _, p := range []*corev1.Probe{v.ReadinessProbe, v.LivenessProbe} {
		if p == nil || p.TCPSocket == nil || p.TCPSocket.Port.IntValue() != 6379 || p.Exec != nil {
			t.Errorf("probe %+v, want tcpSocket 6379", p)
		}
	}
	if got := mountPaths(v); !reflect.DeepEqual(got, map[string]string{"/etc/valkey/conf": "config", "/etc/valkey/acl": "acl", "/data": "data"}) {
		t.Errorf("mounts %v", got)
	}
	if cm := volume(t, pod, "config").ConfigMap; cm == nil || cm.Name != "c-config" {
		t.Errorf("config volume %+v", cm)
	}
	if sec := volume(t, pod, "acl").Secret; sec == nil || sec.SecretName != "c-acl" {
		t.Errorf("acl volume %+v", sec)
	}
	if volume(t, pod, "data").EmptyDir == nil {
		t.Error("without persistence /data is an emptyDir")
	}
	if len(pod.Volumes) != 3 {
		t.Errorf("volumes %d, want 3 without TLS", len(pod.Volumes))
	}
}

func TestNodeWorkloadVariants(t *testing.T) {
	size := resource.MustParse("2Gi")
	for _, tc := range []struct {
		name   string
		mutate func(*valkeyv1.ValkeyNode)
		check  func(t *testing.T, o NodeObjects)
	}{
		{
			name: "deployment recreates",
			mutate: func(n *valkeyv1.ValkeyNode) {
				n.Spec.WorkloadType = valkeyv1.WorkloadTypeDeployment
			},
			check: func(t *testing.T, o NodeObjects) {
				if o.StatefulSet != nil || o.Deployment == nil {
					t.Fatal("want only a Deployment")
				}
				d := o.Deployment
				if d.Name != "c-1-0" || *d.Spec.Replicas != 1 || d.Spec.Strategy.Type != "Recreate" {
					t.Errorf("deployment %s replicas %d strategy %s", d.Name, *d.Spec.Replicas, d.Spec.Strategy.Type)
				}
			},
		},
		{
			name: "persistence mounts the PVC by claim name",
			mutate: func(n *valkeyv1.ValkeyNode) {
				n.Spec.Persistence = &valkeyv1.PersistenceSpec{Size: size, StorageClassName: ptr.To("fast")}
			},
			check: func(t *testing.T, o NodeObjects) {
				p := o.PVC
				if p == nil || p.Name != "c-1-0-data" || p.Namespace != "ns" || p.Labels[LabelNode] != "c-1-0" {
					t.Fatalf("pvc %+v", p)
				}
				if q := p.Spec.Resources.Requests[corev1.ResourceStorage]; q.Cmp(size) != 0 || *p.Spec.StorageClassName != "fast" ||
					!reflect.DeepEqual(p.Spec.AccessModes, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}) {
					t.Errorf("pvc spec %+v", p.Spec)
				}
				v := volume(t, o.StatefulSet.Spec.Template.Spec, "data")
				if v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != "c-1-0-data" || v.EmptyDir != nil {
					t.Errorf("data volume %+v", v)
				}
			},
		},
		{
			name: "tls mounts the resolved secret",
			mutate: func(n *valkeyv1.ValkeyNode) {
				n.Spec.TLS = &valkeyv1.TLSConfig{Certificate: valkeyv1.CertificateRef{SecretName: "my-cert"}}
			},
			check: func(t *testing.T, o NodeObjects) {
				pod := o.StatefulSet.Spec.Template.Spec
				if s := volume(t, pod, "tls").Secret; s == nil || s.SecretName != "my-cert" {
					t.Errorf("tls volume %+v", s)
				}
				if mountPaths(container(t, pod, "valkey"))["/etc/valkey/tls"] != "tls" {
					t.Error("tls not mounted at /etc/valkey/tls")
				}
			},
		},
		{
			name: "self-signed tls without a resolved name uses the cluster's secret",
			mutate: func(n *valkeyv1.ValkeyNode) {
				n.Spec.TLS = &valkeyv1.TLSConfig{SelfSigned: true}
			},
			check: func(t *testing.T, o NodeObjects) {
				if s := volume(t, o.StatefulSet.Spec.Template.Spec, "tls").Secret; s == nil || s.SecretName != "c-tls" {
					t.Errorf("tls volume %+v", s)
				}
			},
		},
		{
			name: "pod settings come from the node",
			mutate: func(n *valkeyv1.ValkeyNode) {
				n.Spec.Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}
				n.Spec.NodeSelector = map[string]string{"pool": "a"}
				n.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{}}
				n.Spec.Tolerations = []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists}}
				n.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "zone"}}
				n.Spec.PriorityClassName = "high"
				n.Spec.PodSecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](999)}
				n.Spec.TerminationGracePeriodSeconds = ptr.To[int64](60)
				n.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "pull"}}
			},
			check: func(t *testing.T, o NodeObjects) {
				pod := o.StatefulSet.Spec.Template.Spec
				if q := container(t, pod, "valkey").Resources.Limits[corev1.ResourceMemory]; q.String() != "1Gi" {
					t.Errorf("memory limit %s", q.String())
				}
				if pod.NodeSelector["pool"] != "a" || pod.Affinity == nil || pod.Affinity.NodeAffinity == nil ||
					len(pod.Tolerations) != 1 || len(pod.TopologySpreadConstraints) != 1 || pod.PriorityClassName != "high" ||
					*pod.SecurityContext.RunAsUser != 999 || *pod.TerminationGracePeriodSeconds != 60 ||
					len(pod.ImagePullSecrets) != 1 || pod.ImagePullSecrets[0].Name != "pull" {
					t.Errorf("pod spec %+v", pod)
				}
			},
		},
		{
			name: "exporter sidecar",
			mutate: func(n *valkeyv1.ValkeyNode) {
				n.Spec.Exporter = valkeyv1.ExporterSpec{Enabled: true, Args: []string{"--is-cluster"}}
			},
			check: func(t *testing.T, o NodeObjects) {
				e := container(t, o.StatefulSet.Spec.Template.Spec, "exporter")
				if e.Image != DefaultExporterImage || len(e.Ports) != 1 || e.Ports[0].ContainerPort != 9121 ||
					!reflect.DeepEqual(e.Args, []string{"--is-cluster"}) {
					t.Errorf("exporter %+v", e)
				}
				var pw *corev1.SecretKeySelector
				for _, v := range e.Env {
					if v.Name == "REDIS_PASSWORD" {
						pw = v.ValueFrom.SecretKeyRef
					}
					if v.Name == "REDIS_USER" && v.Value != "valkey-exporter" {
						t.Errorf("exporter logs in as %q, want its own user valkey-exporter", v.Value)
					}
				}
				// Its own Secret: the exporter never reads the operator's password.
				if pw == nil || pw.Name != "c-exporter" || pw.Key != "password" {
					t.Errorf("exporter password from %+v", pw)
				}
			},
		},
		{
			name: "exporter image from the spec, with tls",
			mutate: func(n *valkeyv1.ValkeyNode) {
				n.Spec.Exporter = valkeyv1.ExporterSpec{Enabled: true, Image: "my/exporter:1"}
				n.Spec.TLS = &valkeyv1.TLSConfig{Certificate: valkeyv1.CertificateRef{SecretName: "cert"}}
			},
			check: func(t *testing.T, o NodeObjects) {
				e := container(t, o.StatefulSet.Spec.Template.Spec, "exporter")
				if e.Image != "my/exporter:1" || mountPaths(e)["/etc/valkey/tls"] != "tls" || e.Env[0].Value != "rediss://localhost:6379" {
					t.Errorf("exporter %+v", e)
				}
			},
		},
		{
			name: "extra containers merge by name",
			mutate: func(n *valkeyv1.ValkeyNode) {
				n.Spec.Containers = []corev1.Container{
					{Name: "valkey", Env: []corev1.EnvVar{{Name: "EXTRA", Value: "1"}},
						VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data", SubPath: "v"}}},
					{Name: "sidecar", Image: "busybox"},
				}
			},
			check: func(t *testing.T, o NodeObjects) {
				pod := o.StatefulSet.Spec.Template.Spec
				if len(pod.Containers) != 2 || pod.Containers[1].Name != "sidecar" {
					t.Fatalf("containers %+v", pod.Containers)
				}
				v := container(t, pod, "valkey")
				if v.Image != "valkey/valkey:8.1" || len(v.Env) != 2 || v.Env[0].Name != "POD_IP" || v.Env[1].Name != "EXTRA" {
					t.Errorf("merged server container image %s env %+v", v.Image, v.Env)
				}
				if len(v.VolumeMounts) != 3 || v.VolumeMounts[2].SubPath != "v" {
					t.Errorf("merged mounts %+v", v.VolumeMounts)
				}
			},
		},
		{
			name: "no config hash, no annotations",
			mutate: func(n *valkeyv1.ValkeyNode) {
				n.Spec.ConfigHash = ""
			},
			check: func(t *testing.T, o NodeObjects) {
				if a := o.StatefulSet.Spec.Template.Annotations; a != nil {
					t.Errorf("annotations %v", a)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := testNode(tc.mutate)
			before := n.DeepCopy()
			tc.check(t, NodeWorkload(n, NodeOptions{}))
			if !reflect.DeepEqual(before, n) {
				t.Error("the builder changed its input")
			}
		})
	}
}
