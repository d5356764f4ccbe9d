package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ValdOperatorReleaseSpec describes the Vald deployment a user wants across clusters.
// The Vald product issue fills it in.
type ValdOperatorReleaseSpec struct {
	// Infrastructure lists the clusters Vald is released to.
	// +optional
	Infrastructure []Infrastructure `json:"infrastructure,omitempty"`
}

// Infrastructure is one group of clusters sharing a role.
type Infrastructure struct {
	// Role is a free label for this entry, such as green or blue.
	// +kubebuilder:validation:MinLength=1
	Role string `json:"role"`
}

// Progress counts lifecycle phases.
type Progress struct {
	// Total is the number of lifecycle phases.
	Total int32 `json:"total"`
	// Completed is the number of phases that have succeeded.
	Completed int32 `json:"completed"`
}

// ValdOperatorReleaseStatus is the observed state of a ValdOperatorRelease.
type ValdOperatorReleaseStatus struct {
	// ObservedGeneration is the generation the status was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Phase is the type of the lifecycle phase being processed.
	// +optional
	Phase string `json:"phase,omitempty"`
	// State summarizes the conditions: Ready, Progressing, Pending or Failed.
	// +optional
	State string `json:"state,omitempty"`
	// Progress counts the lifecycle phases.
	// +optional
	Progress Progress `json:"progress,omitempty"`
	// ProgressText is Progress as completed/total, for printing.
	// +optional
	ProgressText string `json:"progressText,omitempty"`
	// Conditions holds one condition per lifecycle phase reached.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ValdOperatorRelease generates ValdRelease objects for the Vald Helm Operator.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=vor,categories=opsuite
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Progress",type=string,JSONPath=`.status.progressText`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ValdOperatorRelease struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ValdOperatorReleaseSpec   `json:"spec,omitempty"`
	Status ValdOperatorReleaseStatus `json:"status,omitempty"`
}

// ValdOperatorReleaseList is a list of ValdOperatorRelease.
// +kubebuilder:object:root=true
type ValdOperatorReleaseList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ValdOperatorRelease `json:"items"`
}
