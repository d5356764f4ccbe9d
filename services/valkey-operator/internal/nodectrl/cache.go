package nodectrl

import (
	"github.com/opsuite/suite/services/valkey-operator/internal/resources"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CacheByObject limits the manager's pod cache to the pods of ValkeyNodes (those labelled
// valkey.io/node): the controller watches pods, and every other pod of the cluster would
// only cost memory. Pods are the one kind this is safe for: the controller never creates
// one, so it never needs to see a foreign pod of the same name.
func CacheByObject() map[client.Object]cache.ByObject {
	req, err := labels.NewRequirement(resources.LabelNode, selection.Exists, nil)
	if err != nil {
		panic(err) // a constant, valid label key
	}
	return map[client.Object]cache.ByObject{
		&corev1.Pod{}: {Label: labels.NewSelector().Add(*req)},
	}
}
