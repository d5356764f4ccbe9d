package podrunner

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// localhost names the pod's own address, as it reaches the pod's containers in a network
// namespace of its own; before the pod has an address, the host's loopback.
func TestHostsFileLocalhostIsThePod(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "demo-0", Namespace: "ns"}, Status: corev1.PodStatus{PodIP: "127.1.0.9"}}
	lines := strings.Split(string(hostsFile(pod, "cluster.local", nil)), "\n")
	var localhost []string
	for _, l := range lines {
		f := strings.Fields(l)
		for _, name := range f[min(1, len(f)):] {
			if name == "localhost" {
				localhost = append(localhost, f[0])
			}
		}
	}
	if len(localhost) != 1 || localhost[0] != "127.1.0.9" {
		t.Errorf("localhost resolves to %v, want the pod's address 127.1.0.9 alone:\n%s", localhost, strings.Join(lines, "\n"))
	}
	pod.Status.PodIP = ""
	if got := string(hostsFile(pod, "cluster.local", nil)); !strings.Contains(got, "127.0.0.1\tlocalhost\n") {
		t.Errorf("without a pod address, localhost is not 127.0.0.1:\n%s", got)
	}
}
