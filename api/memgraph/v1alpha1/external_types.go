package v1alpha1

// ExternalServiceType is the kind of Service that exposes Bolt outside Kubernetes, in the
// memgraph-high-availability chart's words (externalAccessConfig.<role>.serviceType; its
// IngressNginx needs an ingress controller of the chart's own and is not offered).
// +kubebuilder:validation:Enum=LoadBalancer;NodePort
type ExternalServiceType string

const (
	// ExternalLoadBalancer gives each member a LoadBalancer Service of its own.
	ExternalLoadBalancer ExternalServiceType = "LoadBalancer"
	// ExternalNodePort gives each member a NodePort Service of its own; the address is
	// the Kubernetes node running the pod (ExternalIP, else InternalIP) and the node port.
	ExternalNodePort ExternalServiceType = "NodePort"
)

// ExternalAccessConfig exposes Bolt to clients outside Kubernetes, the HA chart's
// externalAccessConfig: a Service per member, one for the coordinators' routing
// (<cluster>-external, the address a neo4j:// client starts at), and every member
// registered with its Service's address as bolt_server, which is what the coordinators
// put in routing tables. Both roles are needed: a routing table names the coordinators
// and the data instances, and a client outside reaches neither at its pod address.
// +kubebuilder:validation:XValidation:rule="has(self.coordinator) && has(self.dataInstance)",message="externalAccessConfig needs both coordinator and dataInstance: a neo4j:// client from outside gets routing tables naming the coordinators and the data instances, and must reach both; set a serviceType for each, or remove externalAccessConfig"
type ExternalAccessConfig struct {
	// Coordinator is how the coordinators are exposed: LoadBalancer or NodePort, one
	// Service each (the chart's CommonLoadBalancer is the routing Service <cluster>-external,
	// which is always there and of this type). Each coordinator advertises its own Service's
	// address, so the routers a routing table lists are reachable one by one.
	// +optional
	Coordinator *ExternalAccess `json:"coordinator,omitempty"`
	// DataInstance is how the data instances are exposed: LoadBalancer or NodePort, one
	// Service each.
	// +optional
	DataInstance *ExternalAccess `json:"dataInstance,omitempty"`
}

// ExternalAccess is one role's exposure.
type ExternalAccess struct {
	// ServiceType is the Services' kind.
	// +required
	ServiceType ExternalServiceType `json:"serviceType"`
	// Annotations go on the role's external Services (a cloud's load-balancer settings,
	// external-dns names).
	// +kubebuilder:validation:MaxProperties=32
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}
