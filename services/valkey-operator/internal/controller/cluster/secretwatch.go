package cluster

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// The users' password Secrets are watched by metadata only, in a cache of their own: the
// manager's cache holds only the Secrets with the operator's label (CacheByObject), and
// a metadata informer of the same kind in it would share that selector and miss the
// users' Secrets. This cache keeps names, labels and versions, no data and no
// annotations (kubectl's last-applied annotation holds a Secret's data); each pass reads
// the Secrets it needs from the API server.
// +kubebuilder:rbac:groups="",resources=secrets,verbs=list;watch

// secretMetadata is the source of the users' Secrets' changes for the controller.
func secretMetadata(mgr ctrl.Manager, namespaces []string, h handler.TypedEventHandler[*metav1.PartialObjectMetadata, ctrl.Request]) (source.TypedSource[ctrl.Request], error) {
	o := cache.Options{
		Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(), HTTPClient: mgr.GetHTTPClient(),
		DefaultTransform: metadataOnly,
	}
	if len(namespaces) > 0 {
		o.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range namespaces {
			o.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	c, err := cache.New(mgr.GetConfig(), o)
	if err != nil {
		return nil, fmt.Errorf("the Secrets' metadata cache: %w", err)
	}
	if err := mgr.Add(c); err != nil {
		return nil, err
	}
	secret := &metav1.PartialObjectMetadata{}
	secret.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	return source.Kind(c, secret, h), nil
}

// metadataOnly keeps what the watch needs: the name and namespace, labels, versions.
func metadataOnly(in any) (any, error) {
	if o, ok := in.(client.Object); ok {
		o.SetAnnotations(nil)
		o.SetManagedFields(nil)
	}
	return in, nil
}
