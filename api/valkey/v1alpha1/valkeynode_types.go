package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ValkeyNodeSpec is the desired state of a ValkeyNode. Its product issue fills it in.
type ValkeyNodeSpec struct {
	// Replicas is the number of members.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:default=3
	// +optional
	Replicas int32 `json:"replicas,omitempty"`
	// Image is the container image of the data plane.
	// +optional
	Image string `json:"image,omitempty"`
}

// ValkeyNodeStatus is the observed state of a ValkeyNode.
type ValkeyNodeStatus struct {
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

// ValkeyNode is one Valkey server of a ValkeyCluster.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=vkn,categories=opsuite
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ValkeyNode struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ValkeyNodeSpec   `json:"spec,omitempty"`
	Status ValkeyNodeStatus `json:"status,omitempty"`
}

// ValkeyNodeList is a list of ValkeyNode.
// +kubebuilder:object:root=true
type ValkeyNodeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ValkeyNode `json:"items"`
}
