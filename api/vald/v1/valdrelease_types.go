package v1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ValdRelease is the Vald Helm Operator's resource: its spec holds Vald Helm chart values.
// We only write it; this minimal type serves as its CRD in tests and for clients.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=vr;vrs,categories=opsuite
// +kubebuilder:printcolumn:name="Deployed",type=string,JSONPath=`.status.conditions[?(@.type=="Deployed")].status`,description="The Vald Helm Operator's Deployed condition"
// +kubebuilder:printcolumn:name="Release",type=string,JSONPath=`.status.deployedRelease.name`,priority=1,description="The Helm release the Vald Helm Operator installed"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ValdRelease struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec holds Vald Helm chart values (defaults, gateway, agent, discoverer, manager).
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +optional
	Spec *apiextensionsv1.JSON `json:"spec,omitempty"`
	// Status is written by the Vald Helm Operator.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +optional
	Status *apiextensionsv1.JSON `json:"status,omitempty"`
}

// ValdReleaseList is a list of ValdRelease.
// +kubebuilder:object:root=true
type ValdReleaseList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ValdRelease `json:"items"`
}
