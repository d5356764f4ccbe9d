package controller

import (
	"github.com/opsuite/suite/services/veltrix-operator/internal/resources"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CacheByObject limits the manager's cache to the operator's own pods, Secrets,
// ConfigMaps and volumes (labelled managed-by veltrix-operator), not every one of the
// cluster. The user's admin token Secret, and a Secret of ours whose label was removed
// by hand, are read through the API reader (Config.Reader).
func CacheByObject() map[client.Object]cache.ByObject {
	managed := labels.SelectorFromSet(labels.Set{resources.LabelManagedBy: resources.ManagedBy})
	return map[client.Object]cache.ByObject{
		&corev1.Pod{}:              {Label: managed},
		&corev1.Secret{}:           {Label: managed},
		&corev1.ConfigMap{}:        {Label: managed},
		&corev1.PersistentVolume{}: {Label: managed},
	}
}
