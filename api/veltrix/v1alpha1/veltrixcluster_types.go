package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// VeltrixClusterSpec is the desired state of a VeltrixCluster. Its product issue fills it in.
type VeltrixClusterSpec struct {
	// Replicas is the number of members.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:default=3
	// +optional
	Replicas int32 `json:"replicas,omitempty"`
	// Image is the container image of the data plane.
	// +optional
	Image string `json:"image,omitempty"`
}

// VeltrixClusterStatus is the observed state of a VeltrixCluster.
type VeltrixClusterStatus struct {
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

// VeltrixCluster is a VeltrixDB cluster on NVMe-backed nodes.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=vc,categories=opsuite
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type VeltrixCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   VeltrixClusterSpec   `json:"spec,omitempty"`
	Status VeltrixClusterStatus `json:"status,omitempty"`
}

// VeltrixClusterList is a list of VeltrixCluster.
// +kubebuilder:object:root=true
type VeltrixClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VeltrixCluster `json:"items"`
}
