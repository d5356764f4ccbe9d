package resources

import (
	"fmt"
	"maps"
	"net"
	"strconv"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/services/memgraph-operator/internal/planner"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LabelPodName is the label the StatefulSet controller puts on each of its pods; a
// member's external Service selects its one pod by it.
const LabelPodName = "statefulset.kubernetes.io/pod-name"

// MemberExternalServiceName is a member's own Service for clients outside Kubernetes:
// <pod>-external (at most 63 characters for a 40-character cluster name).
func MemberExternalServiceName(cluster string, r Role, ordinal int32) string {
	return PodName(cluster, r, ordinal) + "-external"
}

// RoutingServiceName is the coordinators' Service for clients outside Kubernetes, where a
// neo4j:// client starts (the chart's CommonLoadBalancer).
func RoutingServiceName(cluster string) string { return cluster + "-external" }

// externalOf is the role's spec.externalAccessConfig entry, nil when the role is not exposed.
func externalOf(c *memgraphv1.MemgraphCluster, r Role) *memgraphv1.ExternalAccess {
	x := c.Spec.ExternalAccessConfig
	switch {
	case x == nil:
		return nil
	case r == RoleCoordinator:
		return x.Coordinator
	}
	return x.DataInstance
}

// ExternalServices are the Services of spec.externalAccessConfig: one per member of the
// live StatefulSets (coordinators ids 1..coordinators, data ordinals 0..data-1), each
// selecting its one pod and carrying Bolt only, and the coordinators' routing Service;
// nil without externalAccessConfig. Like every load balancer they forward to ready pods
// only, so a data instance the coordinators have not given its role (not Ready, see the
// role gate) is out of reach here too.
func ExternalServices(c *memgraphv1.MemgraphCluster, coordinators, data int32) []*corev1.Service {
	var out []*corev1.Service
	for _, r := range []Role{RoleCoordinator, RoleData} {
		x := externalOf(c, r)
		if x == nil {
			continue
		}
		first, n := int32(0), data
		if r == RoleCoordinator {
			first, n = FirstCoordinatorOrdinal, coordinators
			out = append(out, externalService(c, r, x, RoutingServiceName(c.Name), Selector(c.Name, r)))
		}
		for ordinal := first; ordinal < first+n; ordinal++ {
			sel := Selector(c.Name, r)
			sel[LabelPodName] = PodName(c.Name, r, ordinal)
			out = append(out, externalService(c, r, x, MemberExternalServiceName(c.Name, r, ordinal), sel))
		}
	}
	return out
}

func externalService(c *memgraphv1.MemgraphCluster, r Role, x *memgraphv1.ExternalAccess, name string, selector map[string]string) *corev1.Service {
	labels := RoleLabels(c, r)
	var annotations map[string]string
	if len(x.Annotations) > 0 {
		annotations = maps.Clone(x.Annotations)
	}
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.Namespace, Labels: labels, Annotations: annotations},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceType(x.ServiceType),
			Selector: selector,
			Ports:    []corev1.ServicePort{servicePort(PortBolt, Ports(c).Bolt)},
		},
	}
}

// ExternalAddress is host:port where a client outside Kubernetes reaches the member behind
// svc, its own Service as the API server returned it: the load balancer's first address
// (IP, else hostname) on the Bolt port, or for NodePort the address of host (the
// Kubernetes node running the pod: ExternalIP, else InternalIP) on the node port. why
// says what is missing when there is no address yet.
func ExternalAddress(svc *corev1.Service, host *corev1.Node) (addr, why string) {
	if svc == nil {
		return "", "its Service does not exist yet"
	}
	var sp *corev1.ServicePort
	for i := range svc.Spec.Ports {
		if svc.Spec.Ports[i].Name == PortBolt {
			sp = &svc.Spec.Ports[i]
		}
	}
	if sp == nil {
		return "", fmt.Sprintf("Service %s has no port named %s", svc.Name, PortBolt)
	}
	join := func(h string, port int32) string { return net.JoinHostPort(h, strconv.Itoa(int(port))) }
	switch svc.Spec.Type {
	case corev1.ServiceTypeLoadBalancer:
		for _, in := range svc.Status.LoadBalancer.Ingress {
			switch {
			case in.IP != "":
				return join(in.IP, sp.Port), ""
			case in.Hostname != "":
				return join(in.Hostname, sp.Port), ""
			}
		}
		return "", fmt.Sprintf("the load balancer has given Service %s no address yet", svc.Name)
	case corev1.ServiceTypeNodePort:
		if sp.NodePort == 0 {
			return "", fmt.Sprintf("Service %s has no node port yet", svc.Name)
		}
		if host == nil {
			return "", "the pod is not scheduled to a Kubernetes node yet"
		}
		for _, t := range []corev1.NodeAddressType{corev1.NodeExternalIP, corev1.NodeInternalIP} {
			for _, a := range host.Status.Addresses {
				if a.Type == t && a.Address != "" {
					return join(a.Address, sp.NodePort), ""
				}
			}
		}
		return "", fmt.Sprintf("Kubernetes node %s reports no ExternalIP or InternalIP", host.Name)
	}
	return "", fmt.Sprintf("Service %s is of type %s", svc.Name, svc.Spec.Type)
}

// Advertise sets the bolt_server every member of m is to be registered with: its address
// in external (by pod name) when it has one, else the pod's DNS name, its BoltServer, so
// that a member whose Service has no address yet is registered (and routed to) inside
// the cluster until it has, and a cluster whose externalAccessConfig is removed goes back
// to the pods' names.
func Advertise(c *memgraphv1.MemgraphCluster, m planner.Desired, external map[string]string) planner.Desired {
	m.Coordinators = append([]planner.Coordinator(nil), m.Coordinators...)
	m.Data = append([]planner.DataInstance(nil), m.Data...)
	for i, k := range m.Coordinators {
		m.Coordinators[i].Advertised = k.BoltServer
		if a := external[PodName(c.Name, RoleCoordinator, int32(k.ID))]; a != "" {
			m.Coordinators[i].Advertised = a
		}
	}
	for i := range m.Data {
		m.Data[i].Advertised = m.Data[i].BoltServer
		if a := external[PodName(c.Name, RoleData, int32(i))]; a != "" {
			m.Data[i].Advertised = a
		}
	}
	return m
}
