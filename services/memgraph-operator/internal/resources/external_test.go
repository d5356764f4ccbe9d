package resources

import (
	"testing"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	corev1 "k8s.io/api/core/v1"
)

func TestExternalServices(t *testing.T) {
	c := minimal()
	if got := ExternalServices(c, 3, 2); got != nil {
		t.Fatalf("without externalAccessConfig: %d Services", len(got))
	}
	c.Spec.ExternalAccessConfig = &memgraphv1.ExternalAccessConfig{
		Coordinator:  &memgraphv1.ExternalAccess{ServiceType: memgraphv1.ExternalLoadBalancer, Annotations: map[string]string{"a": "b"}},
		DataInstance: &memgraphv1.ExternalAccess{ServiceType: memgraphv1.ExternalNodePort},
	}
	got := ExternalServices(c, 3, 2)
	want := map[string]corev1.ServiceType{
		c.Name + "-external":               corev1.ServiceTypeLoadBalancer,
		c.Name + "-coordinator-1-external": corev1.ServiceTypeLoadBalancer, c.Name + "-coordinator-2-external": corev1.ServiceTypeLoadBalancer,
		c.Name + "-coordinator-3-external": corev1.ServiceTypeLoadBalancer,
		c.Name + "-data-0-external":        corev1.ServiceTypeNodePort, c.Name + "-data-1-external": corev1.ServiceTypeNodePort,
	}
	if len(got) != len(want) {
		t.Fatalf("%d Services, want %d", len(got), len(want))
	}
	for _, s := range got {
		ty, ok := want[s.Name]
		if !ok || s.Spec.Type != ty {
			t.Errorf("Service %s of type %s, want %q", s.Name, s.Spec.Type, ty)
		}
		if len(s.Spec.Ports) != 1 || s.Spec.Ports[0].Name != PortBolt || s.Spec.Ports[0].Port != 7687 {
			t.Errorf("Service %s ports %v, want Bolt only", s.Name, s.Spec.Ports)
		}
		if !matches(ClusterLabels(c.Name), s.Labels) {
			t.Errorf("Service %s lacks the cluster labels (it could not be pruned): %v", s.Name, s.Labels)
		}
		role := RoleData
		if s.Spec.Type == corev1.ServiceTypeLoadBalancer {
			role = RoleCoordinator
			if s.Annotations["a"] != "b" {
				t.Errorf("Service %s lacks the coordinator annotations", s.Name)
			}
		}
		if s.Spec.Selector[LabelComponent] != string(role) {
			t.Errorf("Service %s selects %v", s.Name, s.Spec.Selector)
		}
		pod := s.Spec.Selector[LabelPodName]
		if (pod == "") != (s.Name == c.Name+"-external") || (pod != "" && pod+"-external" != s.Name) {
			t.Errorf("Service %s selects pod %q", s.Name, pod)
		}
	}
	// The longest name a 40-character cluster gets is still a DNS label.
	long := "a234567890123456789012345678901234567890"
	if n := MemberExternalServiceName(long, RoleCoordinator, 9); len(n) > 63 {
		t.Errorf("%s: %d characters", n, len(n))
	}
}

func TestExternalAddress(t *testing.T) {
	lb := &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer,
		Ports: []corev1.ServicePort{{Name: PortBolt, Port: 7687, NodePort: 31000}}}}
	if a, why := ExternalAddress(lb, nil); a != "" || why == "" {
		t.Errorf("no ingress yet: %q %q", a, why)
	}
	lb.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{Hostname: "mg.example.com"}}
	if a, _ := ExternalAddress(lb, nil); a != "mg.example.com:7687" {
		t.Errorf("hostname: %q", a)
	}
	lb.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "127.4.0.9"}}
	if a, _ := ExternalAddress(lb, nil); a != "127.4.0.9:7687" {
		t.Errorf("IP: %q", a)
	}
	np := lb.DeepCopy()
	np.Spec.Type = corev1.ServiceTypeNodePort
	if a, why := ExternalAddress(np, nil); a != "" || why == "" {
		t.Errorf("unscheduled: %q %q", a, why)
	}
	node := &corev1.Node{Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: "10.0.0.5"}, {Type: corev1.NodeExternalIP, Address: "203.0.113.5"}}}}
	if a, _ := ExternalAddress(np, node); a != "203.0.113.5:31000" {
		t.Errorf("NodePort: %q", a)
	}
	node.Status.Addresses = node.Status.Addresses[:1]
	if a, _ := ExternalAddress(np, node); a != "10.0.0.5:31000" {
		t.Errorf("NodePort without ExternalIP: %q", a)
	}
	if a, why := ExternalAddress(nil, nil); a != "" || why == "" {
		t.Errorf("no Service: %q %q", a, why)
	}
}

func TestAdvertise(t *testing.T) {
	c := minimal()
	m := DesiredMembership(c, 3, 2)
	got := Advertise(c, m, map[string]string{c.Name + "-coordinator-2": "127.4.0.2:7687", c.Name + "-data-1": "127.4.0.5:7687"})
	for _, k := range got.Coordinators {
		want := k.BoltServer
		if k.ID == 2 {
			want = "127.4.0.2:7687"
		}
		if k.Advertised != want {
			t.Errorf("coordinator %d advertises %q, want %q", k.ID, k.Advertised, want)
		}
	}
	for i, d := range got.Data {
		want := d.BoltServer
		if i == 1 {
			want = "127.4.0.5:7687"
		}
		if d.Advertised != want || d.BoltServer != m.Data[i].BoltServer {
			t.Errorf("%s advertises %q (dialled at %q), want %q", d.Name, d.Advertised, d.BoltServer, want)
		}
	}
	if m.Coordinators[1].Advertised != "" {
		t.Error("Advertise changed its argument")
	}
}
