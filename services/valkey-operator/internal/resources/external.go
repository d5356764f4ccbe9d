package resources

import (
	"fmt"
	"maps"
	"net"
	"strconv"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Config keys the node controller sets live for spec.external. The hostname slot carries
// the address (an IP is a valid announced hostname in Redis 7.0 and Valkey 8.0 alike): it
// is shown to clients only, so the cluster bus and replication keep the pod IP that
// cluster-announce-ip gives, and a node announcing it changes nothing for its peers.
const (
	KeyAnnounceHostname   = "cluster-announce-hostname"
	KeyPreferredEndpoint  = "cluster-preferred-endpoint-type"
	KeyAnnounceClientPort = "cluster-announce-client-port"
)

// ExternalServiceName is a node's own Service for clients outside Kubernetes: a node name
// is at most 52 characters, so this stays a 63-character DNS label.
func ExternalServiceName(node string) string { return node + "-external" }

// ExternalService is n's own Service of the type spec.external.mode names, selecting n's
// pod only (ready, as a load balancer would); nil without spec.external. It carries the
// client port alone: the cluster bus stays pod to pod.
func ExternalService(n *valkeyv1.ValkeyNode) *corev1.Service {
	if n.Spec.External == nil {
		return nil
	}
	labels := NodeLabels(n)
	labels[LabelComponent] = ComponentExternal
	var annotations map[string]string
	if len(n.Spec.External.ServiceAnnotations) > 0 {
		annotations = maps.Clone(n.Spec.External.ServiceAnnotations)
	}
	return &corev1.Service{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{
			Name: ExternalServiceName(n.Name), Namespace: n.Namespace,
			Labels: labels, Annotations: annotations,
		},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceType(n.Spec.External.Mode),
			Selector: map[string]string{
				LabelInstance: n.Spec.ClusterName,
				LabelNode:     n.Name,
			},
			Ports: []corev1.ServicePort{
				{Name: "valkey", Port: ClientPort, TargetPort: intstr.FromString("valkey"), Protocol: corev1.ProtocolTCP},
			},
		},
	}
}

// ExternalAddress is where a client outside Kubernetes reaches n through svc, its own
// Service as the API server returned it: the load balancer's first address (IP, else
// hostname) on the Service port, or for NodePort the address of host (the Kubernetes
// node running the pod; ExternalIP, else InternalIP) on the allocated node port. why says
// what is missing when there is no address yet.
func ExternalAddress(mode valkeyv1.ExternalMode, svc *corev1.Service, host *corev1.Node) (addr string, port int32, why string) {
	if svc == nil {
		return "", 0, "its Service does not exist yet"
	}
	var sp *corev1.ServicePort
	for i := range svc.Spec.Ports {
		if svc.Spec.Ports[i].Name == "valkey" {
			sp = &svc.Spec.Ports[i]
		}
	}
	if sp == nil {
		return "", 0, fmt.Sprintf("Service %s has no port named valkey", svc.Name)
	}
	switch mode {
	case valkeyv1.ExternalModeLoadBalancer:
		for _, in := range svc.Status.LoadBalancer.Ingress {
			switch {
			case in.IP != "":
				return in.IP, sp.Port, ""
			case in.Hostname != "":
				return in.Hostname, sp.Port, ""
			}
		}
		return "", 0, fmt.Sprintf("the load balancer has given Service %s no address yet", svc.Name)
	case valkeyv1.ExternalModeNodePort:
		if sp.NodePort == 0 {
			return "", 0, fmt.Sprintf("Service %s has no node port yet", svc.Name)
		}
		if host == nil {
			return "", 0, "the pod is not scheduled to a Kubernetes node yet"
		}
		for _, t := range []corev1.NodeAddressType{corev1.NodeExternalIP, corev1.NodeInternalIP} {
			for _, a := range host.Status.Addresses {
				if a.Type == t && a.Address != "" {
					return a.Address, sp.NodePort, ""
				}
			}
		}
		return "", 0, fmt.Sprintf("Kubernetes node %s reports no ExternalIP or InternalIP", host.Name)
	}
	return "", 0, fmt.Sprintf("unknown external mode %q", mode)
}

// JoinAddress is host:port as a client dials it (IPv6 in brackets).
func JoinAddress(host string, port int32) string {
	return net.JoinHostPort(host, strconv.Itoa(int(port)))
}

// AnnounceConfig is what a node sets to announce addr:port to clients: the hostname, and
// the client port when it differs from the server's own (NodePort), which only a server
// with cluster-announce-client-port can say. The preferred endpoint type is set apart,
// once the node knows every member's hostname (a node sending clients to a member whose
// hostname it lacks would send them to "?").
func AnnounceConfig(addr string, port int32) [][2]string {
	out := [][2]string{{KeyAnnounceHostname, addr}}
	if port != ClientPort {
		out = append(out, [2]string{KeyAnnounceClientPort, strconv.Itoa(int(port))})
	}
	return out
}

// WithdrawConfig undoes AnnounceConfig and the preferred endpoint type: what a node sets
// when spec.external is removed. clientPort says whether the server has
// cluster-announce-client-port.
func WithdrawConfig(clientPort bool) [][2]string {
	out := [][2]string{{KeyPreferredEndpoint, "ip"}, {KeyAnnounceHostname, ""}}
	if clientPort {
		out = append(out, [2]string{KeyAnnounceClientPort, "0"})
	}
	return out
}
