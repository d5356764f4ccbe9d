package resources

import (
	"reflect"
	"slices"
	"testing"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/services/memgraph-operator/internal/metricsexporter"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// TestMetricsExporter: by default both roles' pods run the sidecar (the operator's binary,
// reading memgraph's metrics port on the pod's address, serving on 9115), the headless
// Services carry its port and the ServiceMonitor scrapes it; a tuned metrics port is what
// it reads and spec.metricsExporter.port where it serves. Turned off, or without the
// operator's image, the StatefulSets are the plain ones; off, the Services lose the port
// and the ServiceMonitor scrapes memgraph's own.
func TestMetricsExporter(t *testing.T) {
	c := tuned() // spec.ports.metrics 19091
	c.Spec.MetricsExporter = &memgraphv1.MetricsExporterSpec{Port: 9200}
	for _, r := range []Role{RoleCoordinator, RoleData} {
		sts := StatefulSet(c, r, 3)
		WithMetricsExporter(sts, c, testOperatorImage)
		i := slices.IndexFunc(sts.Spec.Template.Spec.Containers, func(k corev1.Container) bool { return k.Name == ContainerMetricsExporter })
		if i < 0 {
			t.Fatalf("%s: no %s container", r, ContainerMetricsExporter)
		}
		k := sts.Spec.Template.Spec.Containers[i]
		// tuned() has spec.tls.bolt: HTTPS (TestMetricsExporterBoltTLS).
		wantArgs := []string{"--listen=:9200", "--memgraph-url=https://$(POD_IP):19091/metrics", "--instance-name=$(POD_NAME)", "--memgraph-cert=" + ExporterCertDir + "/tls.crt"}
		if k.Image != testOperatorImage || !slices.Equal(k.Command, []string{OperatorEntrypoint, metricsexporter.Command}) || !slices.Equal(k.Args, wantArgs) {
			t.Errorf("%s: image %s command %v args %v, want %s %v %v", r, k.Image, k.Command, k.Args, testOperatorImage, []string{OperatorEntrypoint, metricsexporter.Command}, wantArgs)
		}
		if len(k.Ports) != 1 || k.Ports[0].Name != PortExporter || k.Ports[0].ContainerPort != 9200 {
			t.Errorf("%s: ports %v, want exporter 9200", r, k.Ports)
		}
		env := map[string]string{}
		for _, e := range k.Env {
			if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
				env[e.Name] = e.ValueFrom.FieldRef.FieldPath
			}
		}
		if env["POD_IP"] != "status.podIP" || env["POD_NAME"] != "metadata.name" {
			t.Errorf("%s: env %v, want POD_IP and POD_NAME from the downward API", r, env)
		}
		if sc := k.SecurityContext; sc == nil || !*sc.ReadOnlyRootFilesystem || !*sc.RunAsNonRoot || *sc.AllowPrivilegeEscalation {
			t.Errorf("%s: security context %+v", r, sc)
		}
		if k.ReadinessProbe != nil || k.LivenessProbe != nil {
			t.Errorf("%s: the sidecar must not decide the member's readiness", r)
		}
		if !hasServicePort(HeadlessService(c, r), PortExporter, 9200) {
			t.Errorf("%s: headless Service lacks port exporter 9200", r)
		}
	}
	if got := endpointPort(ServiceMonitor(c)); got != PortExporter {
		t.Errorf("ServiceMonitor scrapes port %q, want %q", got, PortExporter)
	}

	off := tuned()
	off.Spec.MetricsExporter = &memgraphv1.MetricsExporterSpec{Enabled: ptr.To(false)}
	for name, tc := range map[string]struct {
		c     *memgraphv1.MemgraphCluster
		image string
	}{"off": {off, testOperatorImage}, "no image": {tuned(), ""}} {
		for _, r := range []Role{RoleCoordinator, RoleData} {
			plain, got := StatefulSet(tc.c, r, 3), StatefulSet(tc.c, r, 3)
			WithMetricsExporter(got, tc.c, tc.image)
			if !reflect.DeepEqual(plain, got) {
				t.Errorf("%s: the %s StatefulSet changed", name, r)
			}
		}
	}
	for _, r := range []Role{RoleCoordinator, RoleData} {
		if slices.ContainsFunc(HeadlessService(off, r).Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == PortExporter }) {
			t.Errorf("off: the %s headless Service keeps the exporter port", r)
		}
	}
	if got := endpointPort(ServiceMonitor(off)); got != PortMetrics {
		t.Errorf("off: ServiceMonitor scrapes port %q, want memgraph's %q", got, PortMetrics)
	}
}

func hasServicePort(svc *corev1.Service, name string, port int32) bool {
	return slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == name && p.Port == port })
}

func endpointPort(sm interface{ UnstructuredContent() map[string]any }) string {
	eps, _ := sm.UnstructuredContent()["spec"].(map[string]any)["endpoints"].([]any)
	if len(eps) != 1 {
		return ""
	}
	p, _ := eps[0].(map[string]any)["port"].(string)
	return p
}

// TestMetricsExporterBoltTLS: with spec.tls.bolt Memgraph serves its metrics over HTTPS
// under the Bolt certificate, so the sidecar reads https:// and trusts that certificate,
// mounted from the same Secret without its key, in a volume of its own; without it, plain
// http:// and no volume.
func TestMetricsExporterBoltTLS(t *testing.T) {
	exporter := func(c *memgraphv1.MemgraphCluster, r Role) (corev1.Container, []corev1.Volume) {
		t.Helper()
		sts := StatefulSet(c, r, 3)
		WithMetricsExporter(sts, c, testOperatorImage)
		pod := sts.Spec.Template.Spec
		i := slices.IndexFunc(pod.Containers, func(k corev1.Container) bool { return k.Name == ContainerMetricsExporter })
		if i < 0 {
			t.Fatalf("%s: no %s container", r, ContainerMetricsExporter)
		}
		return pod.Containers[i], pod.Volumes
	}
	plain := tuned()
	plain.Spec.TLS = nil
	tls := tuned()
	tls.Spec.TLS = &memgraphv1.TLSSpec{Bolt: memgraphv1.BoltTLSSpec{SecretName: "memgraph-bolt"}}
	for _, r := range []Role{RoleCoordinator, RoleData} {
		k, volumes := exporter(plain, r)
		if want := []string{"--listen=:9115", "--memgraph-url=http://$(POD_IP):19091/metrics", "--instance-name=$(POD_NAME)"}; !slices.Equal(k.Args, want) || len(k.VolumeMounts) != 0 ||
			slices.ContainsFunc(volumes, func(v corev1.Volume) bool { return v.Name == VolumeExporterCert }) {
			t.Errorf("%s without TLS: args %v mounts %v, want %v and no certificate", r, k.Args, k.VolumeMounts, want)
		}

		k, volumes = exporter(tls, r)
		want := []string{"--listen=:9115", "--memgraph-url=https://$(POD_IP):19091/metrics", "--instance-name=$(POD_NAME)",
			"--memgraph-cert=" + ExporterCertDir + "/tls.crt"}
		if !slices.Equal(k.Args, want) {
			t.Errorf("%s: args %v, want %v", r, k.Args, want)
		}
		if len(k.VolumeMounts) != 1 || k.VolumeMounts[0].Name != VolumeExporterCert || k.VolumeMounts[0].MountPath != ExporterCertDir || !k.VolumeMounts[0].ReadOnly {
			t.Errorf("%s: mounts %+v, want %s read-only at %s", r, k.VolumeMounts, VolumeExporterCert, ExporterCertDir)
		}
		v := slices.IndexFunc(volumes, func(v corev1.Volume) bool { return v.Name == VolumeExporterCert })
		if v < 0 || volumes[v].Secret == nil || volumes[v].Secret.SecretName != "memgraph-bolt" ||
			!reflect.DeepEqual(volumes[v].Secret.Items, []corev1.KeyToPath{{Key: "tls.crt", Path: "tls.crt"}}) {
			t.Errorf("%s: volumes %+v, want %s holding memgraph-bolt's tls.crt alone", r, volumes, VolumeExporterCert)
		}
	}
}
