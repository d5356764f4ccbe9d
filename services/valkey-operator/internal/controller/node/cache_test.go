package node

import (
	"context"
	"testing"

	"github.com/opsuite/suite/services/valkey-operator/internal/resources"
	"github.com/opsuite/suite/shared/testenv"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestSecretCacheHoldsOwnOnly: with CacheByObject the manager caches the Secrets and
// ConfigMaps labelled managed-by valkey-operator and no other (a user's Secret, a Secret
// of the cluster's), through the cache-backed client and through an informer's list.
func TestSecretCacheHoldsOwnOnly(t *testing.T) {
	ctx := context.Background()
	ns := testenv.NewNamespace(t, env.Client, "vkn-secrets-")
	mgr := env.StartManager(t, nil, testenv.InNamespaces(ns), func(o *ctrl.Options) { o.Cache.ByObject = CacheByObject() })
	ours := map[string]string{resources.LabelManagedBy: resources.ManagedBy}
	// The foreign objects first: once ours are in the cache, the watch has delivered the
	// others too, had the cache taken them.
	objs := []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "user-secret", Namespace: ns}, StringData: map[string]string{"k": "v"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "other-operator", Namespace: ns, Labels: map[string]string{resources.LabelManagedBy: "helm"}}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "user-config", Namespace: ns}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "ours", Namespace: ns, Labels: ours}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "ours", Namespace: ns, Labels: ours}},
	}
	for _, o := range objs {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	c := mgr.GetClient()
	testenv.WaitFor(t, "our Secret and ConfigMap in the cache", func() bool {
		return c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ours"}, &corev1.Secret{}) == nil &&
			c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ours"}, &corev1.ConfigMap{}) == nil
	})
	for _, key := range []struct {
		name string
		obj  client.Object
	}{{"user-secret", &corev1.Secret{}}, {"other-operator", &corev1.Secret{}}, {"user-config", &corev1.ConfigMap{}}} {
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: key.name}, key.obj); !apierrors.IsNotFound(err) {
			t.Errorf("cache-backed Get of %T %s: %v, want NotFound (not cached)", key.obj, key.name, err)
		}
	}
	var secrets corev1.SecretList
	if err := mgr.GetCache().List(ctx, &secrets, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range secrets.Items {
		names = append(names, s.Name)
	}
	if len(names) != 1 || names[0] != "ours" {
		t.Errorf("cached Secrets %v, want [ours]", names)
	}
	var cms corev1.ConfigMapList
	if err := mgr.GetCache().List(ctx, &cms, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, cm := range cms.Items {
		if cm.Name != "ours" {
			t.Errorf("cached ConfigMap %s, which is not the operator's", cm.Name)
		}
	}
}
