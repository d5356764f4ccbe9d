package connect

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CacheThenAPI reads an object from cache and, when the cache does not have it, from api
// (the manager's API reader). The manager caches only the Secrets and ConfigMaps that
// carry the operator's label: a user's Secret (a TLS certificate, passwords) is not in
// it, and neither is one of ours whose label was removed by hand, which must be found,
// never taken for missing and generated again. Lists go to the cache.
func CacheThenAPI(cache, api client.Reader) client.Reader {
	return fallback{cache: cache, api: api}
}

type fallback struct{ cache, api client.Reader }

func (f fallback) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := f.cache.Get(ctx, key, obj, opts...)
	if apierrors.IsNotFound(err) {
		return f.api.Get(ctx, key, obj, opts...)
	}
	return err
}

func (f fallback) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return f.cache.List(ctx, list, opts...)
}
