package resources

import (
	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// HeadlessService gives each of the role's pods its DNS name, the address it is
// registered under. Not-ready pods are published: a coordinator must resolve its peers
// (and the operator its members) before they pass their probes.
func HeadlessService(c *memgraphv1.MemgraphCluster, r Role) *corev1.Service {
	p := Ports(c)
	ports := []corev1.ServicePort{servicePort(PortBolt, p.Bolt), servicePort(PortManagement, p.Management)}
	if r == RoleCoordinator {
		ports = append(ports, servicePort(PortCoordinator, p.Coordinator))
	} else {
		ports = append(ports, servicePort(PortReplication, p.Replication))
	}
	ports = append(ports, servicePort(PortMetrics, p.Metrics))
	if c.MetricsExporterEnabled() {
		ports = append(ports, servicePort(PortExporter, c.MetricsExporterPort()))
	}
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: HeadlessServiceName(c.Name, r), Namespace: c.Namespace, Labels: RoleLabels(c, r)},
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			PublishNotReadyAddresses: true,
			Selector:                 Selector(c.Name, r),
			Ports:                    ports,
		},
	}
}

// ClientService is where applications connect: Bolt on the ready coordinators, which
// answer ROUTE with the MAIN for writes and the replicas for reads (neo4j:// URIs).
func ClientService(c *memgraphv1.MemgraphCluster) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: ClientServiceName(c.Name), Namespace: c.Namespace, Labels: RoleLabels(c, RoleCoordinator)},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: Selector(c.Name, RoleCoordinator),
			Ports:    []corev1.ServicePort{servicePort(PortBolt, Ports(c).Bolt)},
		},
	}
}

func servicePort(name string, port int32) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Port: port, TargetPort: intstr.FromString(name), Protocol: corev1.ProtocolTCP}
}

// PodDisruptionBudget lets one pod of the role be evicted at a time: coordinators keep
// their Raft quorum (3 and more, odd, tolerate one), and data instances keep a MAIN or a
// replica the coordinators can fail over to.
func PodDisruptionBudget(c *memgraphv1.MemgraphCluster, r Role) *policyv1.PodDisruptionBudget {
	one := intstr.FromInt32(1)
	return &policyv1.PodDisruptionBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		ObjectMeta: metav1.ObjectMeta{Name: PDBName(c.Name, r), Namespace: c.Namespace, Labels: RoleLabels(c, r)},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: &one,
			Selector:       &metav1.LabelSelector{MatchLabels: Selector(c.Name, r)},
		},
	}
}
