package resources

import (
	"slices"
	"testing"
	"time"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	"k8s.io/utils/ptr"
)

// TestNodeWorkloadHandover: with the operator's image known, the pod installs the
// operator's binary into an emptyDir with an init container and runs it as the server
// container's preStop hook, bounded by the grace period, over TLS when the node uses it;
// without the image the pod has no hook.
func TestNodeWorkloadHandover(t *testing.T) {
	o := NodeOptions{HandoverImage: "ghcr.io/opsuite/valkey-operator:1.2.3"}
	for _, tc := range []struct {
		name  string
		grace *int64
		tls   bool
		want  []string
	}{
		{"default grace", nil, false, []string{"/opt/valkey-operator/valkey-operator", "handover", "--timeout=20s"}},
		{"longer grace, TLS", ptr.To[int64](60), true, []string{"/opt/valkey-operator/valkey-operator", "handover", "--timeout=50s", "--tls-dir=/etc/valkey/tls"}},
		{"short grace", ptr.To[int64](8), false, []string{"/opt/valkey-operator/valkey-operator", "handover", "--timeout=4s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := testNode(func(n *valkeyv1.ValkeyNode) {
				n.Spec.TerminationGracePeriodSeconds = tc.grace
				if tc.tls {
					n.Spec.TLS = &valkeyv1.TLSConfig{}
				}
			})
			pod := NodeWorkload(n, o).StatefulSet.Spec.Template.Spec
			if len(pod.InitContainers) != 1 {
				t.Fatalf("init containers %+v, want the hook's installer", pod.InitContainers)
			}
			init := pod.InitContainers[0]
			if init.Image != o.HandoverImage || !slices.Equal(init.Command, []string{"/valkey-operator", "install-handover", "/opt/valkey-operator/valkey-operator"}) {
				t.Errorf("installer %s %q", init.Image, init.Command)
			}
			if sc := init.SecurityContext; sc == nil || !*sc.ReadOnlyRootFilesystem || *sc.AllowPrivilegeEscalation {
				t.Errorf("installer security context %+v", sc)
			}
			if v := volume(t, pod, "handover"); v.EmptyDir == nil {
				t.Errorf("volume handover %+v, want an emptyDir", v)
			}
			server := container(t, pod, ServerContainer)
			if mountPaths(server)[HandoverDir] != "handover" || mountPaths(init)[HandoverDir] != "handover" {
				t.Errorf("mounts: server %v, installer %v", server.VolumeMounts, init.VolumeMounts)
			}
			if l := server.Lifecycle; l == nil || l.PreStop == nil || l.PreStop.Exec == nil || !slices.Equal(l.PreStop.Exec.Command, tc.want) {
				t.Errorf("preStop %+v, want exec %q", l, tc.want)
			}
		})
	}
	pod := NodeWorkload(testNode(nil), NodeOptions{}).StatefulSet.Spec.Template.Spec
	if len(pod.InitContainers) != 0 || container(t, pod, ServerContainer).Lifecycle != nil {
		t.Errorf("without the operator's image: init containers %+v, lifecycle %+v", pod.InitContainers, container(t, pod, ServerContainer).Lifecycle)
	}
}

func TestHandoverTimeout(t *testing.T) {
	for grace, want := range map[int64]time.Duration{30: 20 * time.Second, 21: 11 * time.Second, 20: 10 * time.Second, 15: 7500 * time.Millisecond, 1: time.Second, 0: time.Second} {
		if got := HandoverTimeout(grace); got != want {
			t.Errorf("HandoverTimeout(%d) = %s, want %s", grace, got, want)
		}
	}
}
