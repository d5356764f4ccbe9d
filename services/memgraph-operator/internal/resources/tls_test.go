package resources

import (
	"slices"
	"strings"
	"testing"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	corev1 "k8s.io/api/core/v1"
)

// TestBoltTLS: with spec.tls both roles mount the Secret read-only (cert and key only,
// group-readable for the memgraph user through fsGroup, no subPath so renewals reach the
// pod) and pass Memgraph's two Bolt TLS flags before extraArgs; without it nothing of
// this is there. The probes stay TCP, which a TLS listener accepts.
func TestBoltTLS(t *testing.T) {
	for _, r := range []Role{RoleCoordinator, RoleData} {
		plain := StatefulSet(minimal(), r, 3).Spec.Template.Spec
		if len(plain.Volumes) != 0 || slices.ContainsFunc(plain.Containers[0].Args, func(a string) bool { return strings.HasPrefix(a, "--bolt-cert-file") }) {
			t.Errorf("%s without spec.tls: volumes %v args %v", r, plain.Volumes, plain.Containers[0].Args)
		}

		c := minimal()
		c.Spec.TLS = &memgraphv1.TLSSpec{Bolt: memgraphv1.BoltTLSSpec{SecretName: "bolt-tls"}}
		c.Spec.ExtraArgs = memgraphv1.RoleArgs{Data: []memgraphv1.Arg{"--log-level=DEBUG"}, Coordinators: []memgraphv1.Arg{"--log-level=DEBUG"}}
		pod := StatefulSet(c, r, 3).Spec.Template.Spec
		if len(pod.Volumes) != 1 || pod.Volumes[0].Secret == nil {
			t.Fatalf("%s: volumes %+v, want the Secret", r, pod.Volumes)
		}
		sec := pod.Volumes[0].Secret
		if sec.SecretName != "bolt-tls" || *sec.DefaultMode != 0o440 || sec.Optional != nil {
			t.Errorf("%s: secret volume %+v", r, sec)
		}
		if want := []corev1.KeyToPath{{Key: "tls.crt", Path: "tls.crt"}, {Key: "tls.key", Path: "tls.key"}}; !slices.Equal(sec.Items, want) {
			t.Errorf("%s: items %+v, want %+v", r, sec.Items, want)
		}
		if pod.SecurityContext.FSGroup == nil || *pod.SecurityContext.FSGroup != RunAsGroup || *pod.SecurityContext.RunAsGroup != RunAsGroup {
			t.Errorf("%s: fsGroup/runAsGroup %v, want %d so mode 0440 is readable by the memgraph user", r, pod.SecurityContext, RunAsGroup)
		}
		ctr := pod.Containers[0]
		var mount *corev1.VolumeMount
		for i := range ctr.VolumeMounts {
			if ctr.VolumeMounts[i].Name == VolumeBoltTLS {
				mount = &ctr.VolumeMounts[i]
			}
		}
		if mount == nil || !mount.ReadOnly || mount.SubPath != "" || mount.MountPath != "/etc/memgraph/tls/bolt" {
			t.Errorf("%s: mount %+v, want read-only /etc/memgraph/tls/bolt without subPath", r, mount)
		}
		cert := slices.Index(ctr.Args, "--bolt-cert-file=/etc/memgraph/tls/bolt/tls.crt")
		key := slices.Index(ctr.Args, "--bolt-key-file=/etc/memgraph/tls/bolt/tls.key")
		extra := slices.Index(ctr.Args, "--log-level=DEBUG")
		if cert < 0 || key < 0 || extra < cert || extra < key {
			t.Errorf("%s: args %q, want both Bolt TLS flags before extraArgs", r, ctr.Args)
		}
		for _, p := range []*corev1.Probe{ctr.StartupProbe, ctr.ReadinessProbe, ctr.LivenessProbe} {
			if p.TCPSocket == nil || p.Exec != nil || p.HTTPGet != nil {
				t.Errorf("%s: probe %+v, want TCP (TLS-agnostic)", r, p.ProbeHandler)
			}
		}
	}
}
