// Package v1alpha1 contains the valkey.io/v1alpha1 API types.
// +kubebuilder:object:generate=true
// +groupName=valkey.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of these types.
	GroupVersion = schema.GroupVersion{Group: "valkey.io", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this group/version with a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types of this group/version to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, knownTypes()...)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
