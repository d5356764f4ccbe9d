// Package migrate rewrites MemgraphClusters stored by an earlier operator into the current
// shape of v1alpha1 before the controller reads them: spec.license becomes spec.secrets,
// and an object storage.retentionPolicy {whenDeleted, whenScaled} becomes the string
// retentionPolicy (whenDeleted) plus retentionPolicyWhenScaled (whenScaled, when it
// differs). The CRD still accepts both old shapes on stored objects only, so the API
// server keeps their values until this runs; it works on unstructured objects because the
// typed client cannot decode an object retentionPolicy.
package migrate

import (
	"context"
	"fmt"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// +kubebuilder:rbac:groups=memgraph.com,resources=memgraphclusters,verbs=get;list;update

// Run migrates every MemgraphCluster in the cluster and returns how many it rewrote. An
// object another writer changed meanwhile is read again and retried.
func Run(ctx context.Context, c client.Client) (int, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(memgraphv1.GroupVersion.WithKind("MemgraphClusterList"))
	if err := c.List(ctx, list); err != nil {
		return 0, fmt.Errorf("listing MemgraphClusters: %w", err)
	}
	n := 0
	for i := range list.Items {
		item := &list.Items[i]
		if !Migrate(item) {
			continue
		}
		key := client.ObjectKeyFromObject(item)
		fresh := false
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if fresh {
				if err := c.Get(ctx, key, item); err != nil {
					return err
				}
				if !Migrate(item) {
					return nil
				}
			}
			fresh = true
			return c.Update(ctx, item)
		})
		if err != nil {
			return n, fmt.Errorf("migrating MemgraphCluster %s: %w", key, err)
		}
		n++
	}
	return n, nil
}

// Migrate rewrites u's old shapes in place and says whether it changed anything.
func Migrate(u *unstructured.Unstructured) bool {
	changed := false
	spec, ok := u.Object["spec"].(map[string]any)
	if !ok {
		return false
	}
	if license, ok := spec["license"].(map[string]any); ok {
		if _, has := spec["secrets"]; !has {
			secrets := map[string]any{}
			if v, ok := license["secretName"]; ok {
				secrets["name"] = v
			}
			for _, k := range []string{"licenseKey", "organizationKey"} {
				if v, ok := license[k]; ok {
					secrets[k] = v
				}
			}
			spec["secrets"] = secrets
		}
		delete(spec, "license")
		changed = true
	}
	if storage, ok := spec["storage"].(map[string]any); ok {
		if old, ok := storage["retentionPolicy"].(map[string]any); ok {
			deleted := string(memgraphv1.DefaultRetention)
			if v, ok := old["whenDeleted"].(string); ok && v != "" {
				deleted = v
			}
			storage["retentionPolicy"] = deleted
			if v, ok := old["whenScaled"].(string); ok && v != "" && v != deleted {
				if _, has := storage["retentionPolicyWhenScaled"]; !has {
					storage["retentionPolicyWhenScaled"] = v
				}
			}
			changed = true
		}
	}
	return changed
}
