package controller_test

import (
	"context"
	"testing"
	"time"

	"github.com/opsuite/suite/services/memgraph-operator/internal/controller"
	"github.com/opsuite/suite/shared/testenv"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestSecretsCachedByNameOnly runs the controller with the operator's manager options. The
// Secrets it watches (by metadata: they are the user's) are in its cache without their
// annotations, where kubectl's last-applied-configuration holds the data in clear; a
// Secret read through the manager's client comes from the API server.
func TestSecretsCachedByNameOnly(t *testing.T) {
	ctx := context.Background()
	ns := testenv.NewNamespace(t, env.Client, "mg-cache-")
	mgr := env.StartManager(t, func(mgr ctrl.Manager) error {
		return controller.Setup(mgr, controller.Config{Registrar: &registrar{answer: healthy}, Sysctls: &sysctls{value: map[string]int64{}, asked: map[string]int{}}})
	}, testenv.InNamespaces(ns), controller.ManagerOptions)
	const applied = `{"apiVersion":"v1","data":{"license":"c2VjcmV0"},"kind":"Secret","metadata":{"name":"memgraph-license"}}`
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "memgraph-license", Namespace: ns,
		Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": applied}},
		StringData: map[string]string{"license": "secret"}}
	if err := env.Client.Create(ctx, s); err != nil {
		t.Fatal(err)
	}

	testenv.Eventually(t, 10*time.Second, "the Secret's metadata in the cache", func() (bool, string) {
		var list metav1.PartialObjectMetadataList
		list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
		if err := mgr.GetCache().List(ctx, &list, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		for _, m := range list.Items {
			if m.Name == s.Name {
				if len(m.Annotations) != 0 || len(m.ManagedFields) != 0 {
					t.Fatalf("cached Secret metadata keeps annotations %v and %d managed fields", m.Annotations, len(m.ManagedFields))
				}
				return true, ""
			}
		}
		return false, "not cached yet"
	})
	var got corev1.Secret
	if err := mgr.GetClient().Get(ctx, client.ObjectKeyFromObject(s), &got); err != nil {
		t.Fatal(err)
	}
	if string(got.Data["license"]) != "secret" {
		t.Errorf("the client read %q, want the Secret's data from the API server", got.Data["license"])
	}
}
