package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MemgraphClusterSpec is the desired state of a MemgraphCluster. Its product issue fills it in.
type MemgraphClusterSpec struct {
	// Replicas is the number of members.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:default=3
	// +optional
	Replicas int32 `json:"replicas,omitempty"`
	// Image is the container image of the data plane.
	// +optional
	Image string `json:"image,omitempty"`
}

// MemgraphClusterStatus is the observed state of a MemgraphCluster.
type MemgraphClusterStatus struct {
	// ObservedGeneration is the generation the status was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// State summarizes the conditions.
	// +optional
	State string `json:"state,omitempty"`
	// Conditions describe the current state.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// MemgraphCluster is a highly available Memgraph cluster.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=mgc,categories=opsuite
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type MemgraphCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   MemgraphClusterSpec   `json:"spec,omitempty"`
	Status MemgraphClusterStatus `json:"status,omitempty"`
}

// MemgraphClusterList is a list of MemgraphCluster.
// +kubebuilder:object:root=true
type MemgraphClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MemgraphCluster `json:"items"`
}
