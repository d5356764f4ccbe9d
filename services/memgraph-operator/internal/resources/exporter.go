package resources

import (
	"fmt"
	"strconv"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/services/memgraph-operator/internal/metricsexporter"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

// The metrics-exporter sidecar of every member (spec.metricsExporter): the operator's
// binary reading memgraph's JSON metrics on the pod's address and serving them as
// Prometheus text, which the ServiceMonitor scrapes.
const (
	// ContainerMetricsExporter is the sidecar.
	ContainerMetricsExporter = "metrics-exporter"
	// PortExporter names its port on the pod and the headless Services.
	PortExporter = "exporter"
	// VolumeExporterCert is spec.tls.bolt's certificate alone (no key), which the sidecar
	// reads Memgraph's HTTPS metrics under, mounted at ExporterCertDir.
	VolumeExporterCert = "exporter-bolt-cert"
	ExporterCertDir    = "/etc/metrics-exporter/bolt"
)

// WithMetricsExporter adds the sidecar to the role's StatefulSet. image is the operator's;
// empty adds nothing (the operator says so at start). It reads memgraph on the pod's own
// address ($(POD_IP)), where memgraph's --metrics-address (0.0.0.0 by default) answers in
// a pod's network namespace as on the local cluster's shared one.
func WithMetricsExporter(sts *appsv1.StatefulSet, c *memgraphv1.MemgraphCluster, image string) {
	if image == "" || !c.MetricsExporterEnabled() {
		return
	}
	port := c.MetricsExporterPort()
	pod := &sts.Spec.Template.Spec
	args := []string{"--listen=:" + strconv.Itoa(int(port)),
		fmt.Sprintf("--memgraph-url=http://$(POD_IP):%d/metrics", Ports(c).Metrics),
		"--instance-name=$(POD_NAME)"}
	var mounts []corev1.VolumeMount
	if c.Spec.TLS != nil {
		// Memgraph gives its metrics server the Bolt SSL context: with spec.tls.bolt the
		// metrics are HTTPS under the Bolt certificate, which the sidecar is given (not
		// the key) and trusts alone.
		args[1] = fmt.Sprintf("--memgraph-url=https://$(POD_IP):%d/metrics", Ports(c).Metrics)
		args = append(args, "--memgraph-cert="+ExporterCertDir+"/"+TLSCertKey)
		pod.Volumes = append(pod.Volumes, corev1.Volume{Name: VolumeExporterCert, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName:  c.Spec.TLS.Bolt.SecretName,
			Items:       []corev1.KeyToPath{{Key: TLSCertKey, Path: TLSCertKey}},
			DefaultMode: ptr.To[int32](0o444),
		}}})
		mounts = []corev1.VolumeMount{{Name: VolumeExporterCert, MountPath: ExporterCertDir, ReadOnly: true}}
	}
	pod.Containers = append(pod.Containers, corev1.Container{
		Name:         ContainerMetricsExporter,
		Image:        image,
		Command:      []string{OperatorEntrypoint, metricsexporter.Command},
		Args:         args,
		VolumeMounts: mounts,
		Env: []corev1.EnvVar{
			{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
			{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		},
		Ports: []corev1.ContainerPort{{Name: PortExporter, ContainerPort: port, Protocol: corev1.ProtocolTCP}},
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}},
		SecurityContext: sidecarSecurity(),
	})
}
