package resources

import (
	"reflect"
	"testing"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func externalCluster(mode valkeyv1.ExternalMode) *valkeyv1.ValkeyCluster {
	return &valkeyv1.ValkeyCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "vk", Namespace: "ns"},
		Spec: valkeyv1.ValkeyClusterSpec{Shards: 3, Networking: &valkeyv1.NetworkingSpec{
			External: &valkeyv1.ExternalSpec{Mode: mode, ServiceAnnotations: map[string]string{"lb.example/internal": "false"}},
		}},
	}
}

func TestExternalServicePerNode(t *testing.T) {
	n := ValkeyNode(externalCluster(valkeyv1.ExternalModeLoadBalancer), Position{Shard: 2, Index: 1}, "h")
	if n.Spec.External == nil || n.Spec.External.Mode != valkeyv1.ExternalModeLoadBalancer {
		t.Fatalf("node external = %+v, want the cluster's", n.Spec.External)
	}
	svc := ExternalService(n)
	if svc.Name != "vk-2-1-external" || svc.Namespace != "ns" || svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		t.Fatalf("service = %s/%s type %s", svc.Namespace, svc.Name, svc.Spec.Type)
	}
	// Exactly this node's pod: the StatefulSet's selector labels, never the shard's.
	if want := map[string]string{LabelInstance: "vk", LabelNode: "vk-2-1"}; !reflect.DeepEqual(svc.Spec.Selector, want) {
		t.Fatalf("selector = %v, want %v", svc.Spec.Selector, want)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != ClientPort || svc.Spec.Ports[0].TargetPort.StrVal != "valkey" {
		t.Fatalf("ports = %+v, want the client port alone (the bus stays pod to pod)", svc.Spec.Ports)
	}
	if svc.Annotations["lb.example/internal"] != "false" || svc.Labels[LabelComponent] != ComponentExternal || svc.Labels[LabelNode] != "vk-2-1" {
		t.Fatalf("metadata = %v %v", svc.Annotations, svc.Labels)
	}
	// The pod template carries the selector's labels.
	pod := NodeWorkload(n, NodeOptions{}).StatefulSet.Spec.Template.Labels
	for k, v := range svc.Spec.Selector {
		if pod[k] != v {
			t.Fatalf("pod label %s = %q, the Service selects %q", k, pod[k], v)
		}
	}

	plain := ValkeyNode(&valkeyv1.ValkeyCluster{ObjectMeta: metav1.ObjectMeta{Name: "vk"}, Spec: valkeyv1.ValkeyClusterSpec{Shards: 3}}, Position{}, "h")
	if plain.Spec.External != nil || ExternalService(plain) != nil {
		t.Fatal("a cluster without networking.external got a per-node Service")
	}
	if ExternalService(ValkeyNode(externalCluster(valkeyv1.ExternalModeNodePort), Position{}, "h")).Spec.Type != corev1.ServiceTypeNodePort {
		t.Fatal("NodePort mode: wrong Service type")
	}
}

func TestExternalAddress(t *testing.T) {
	svc := func(nodePort int32, ingress ...corev1.LoadBalancerIngress) *corev1.Service {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "vk-0-0-external"}}
		s.Spec.Ports = []corev1.ServicePort{{Name: "valkey", Port: ClientPort, NodePort: nodePort}}
		s.Status.LoadBalancer.Ingress = ingress
		return s
	}
	host := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
		{Type: corev1.NodeHostName, Address: "n1"}, {Type: corev1.NodeInternalIP, Address: "10.0.0.5"}}}}
	hostExt := host.DeepCopy()
	hostExt.Status.Addresses = append(hostExt.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "203.0.113.5"})
	lb, np := valkeyv1.ExternalModeLoadBalancer, valkeyv1.ExternalModeNodePort
	for _, tc := range []struct {
		name     string
		mode     valkeyv1.ExternalMode
		svc      *corev1.Service
		host     *corev1.Node
		addr     string
		port     int32
		pendingT bool
	}{
		{"no service", lb, nil, nil, "", 0, true},
		{"lb pending", lb, svc(0), nil, "", 0, true},
		{"lb ip", lb, svc(0, corev1.LoadBalancerIngress{IP: "127.4.0.7"}), nil, "127.4.0.7", ClientPort, false},
		{"lb hostname", lb, svc(0, corev1.LoadBalancerIngress{Hostname: "a.elb.example"}), nil, "a.elb.example", ClientPort, false},
		{"nodeport unallocated", np, svc(0), host, "", 0, true},
		{"nodeport unscheduled", np, svc(31000), nil, "", 0, true},
		{"nodeport internal", np, svc(31000), host, "10.0.0.5", 31000, false},
		{"nodeport external first", np, svc(31000), hostExt, "203.0.113.5", 31000, false},
	} {
		addr, port, why := ExternalAddress(tc.mode, tc.svc, tc.host)
		if addr != tc.addr || port != tc.port || (why != "") != tc.pendingT {
			t.Errorf("%s: got %q %d (%q), want %q %d pending=%v", tc.name, addr, port, why, tc.addr, tc.port, tc.pendingT)
		}
	}
}

func TestAnnounceConfig(t *testing.T) {
	if got := AnnounceConfig("127.4.0.7", ClientPort); !reflect.DeepEqual(got, [][2]string{{KeyAnnounceHostname, "127.4.0.7"}}) {
		t.Errorf("load balancer: %v", got)
	}
	if got := AnnounceConfig("10.0.0.5", 31000); !reflect.DeepEqual(got, [][2]string{{KeyAnnounceHostname, "10.0.0.5"}, {KeyAnnounceClientPort, "31000"}}) {
		t.Errorf("node port: %v", got)
	}
	if got := WithdrawConfig(false); !reflect.DeepEqual(got, [][2]string{{KeyPreferredEndpoint, "ip"}, {KeyAnnounceHostname, ""}}) {
		t.Errorf("withdraw: %v", got)
	}
	if got := len(WithdrawConfig(true)); got != 3 {
		t.Errorf("withdraw with client port: %d pairs", got)
	}
}
