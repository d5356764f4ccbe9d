package node

import (
	"github.com/opsuite/suite/services/valkey-operator/internal/resources"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CacheByObject limits what the manager caches to what the operator owns:
//
//   - the pods of ValkeyNodes (those labelled valkey.io/node): the controller watches
//     pods, and every other pod of the cluster would only cost memory. Pods are safe to
//     filter: the controller never creates one, so it never needs to see a foreign pod of
//     the same name;
//   - the Secrets and ConfigMaps the operator writes (managed-by valkey-operator), never
//     every Secret of the cluster. Those it must read without its label (a user's
//     passwords or certificate, or one of its own whose label was removed by hand) are
//     read from the API server (connect.CacheThenAPI), and the users' Secrets are watched
//     by metadata only, in a cache of their own.
func CacheByObject() map[client.Object]cache.ByObject {
	req, err := labels.NewRequirement(resources.LabelNode, selection.Exists, nil)
	if err != nil {
		panic(err) // a constant, valid label key
	}
	owned := labels.SelectorFromSet(labels.Set{resources.LabelManagedBy: resources.ManagedBy})
	return map[client.Object]cache.ByObject{
		&corev1.Pod{}:       {Label: labels.NewSelector().Add(*req)},
		&corev1.Secret{}:    {Label: owned},
		&corev1.ConfigMap{}: {Label: owned},
	}
}
