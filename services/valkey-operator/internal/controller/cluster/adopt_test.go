package cluster_test

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	"github.com/opsuite/suite/services/valkey-operator/internal/resources"
	"github.com/opsuite/suite/shared/testenv"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestGeneratedSecretsAdopted: the internal Secret (the operator's and the replication
// passwords), the exporter's password Secret and the ACL Secret lose their labels by hand, so the operator's cache no
// longer holds them. Passes that follow read them from the API server and adopt them:
// the labels come back, the passwords stay what they were (before, a cache miss
// generated new ones and wrote them over the live Secret), and the ACL Secret is the same.
func TestGeneratedSecretsAdopted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := env.Client
	ns := testenv.NewNamespace(t, c, "vkc-adopt")
	f := newFleet(t, c, ns)
	startController(t, f)
	vc := &valkeyv1.ValkeyCluster{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: ns}, Spec: valkeyv1.ValkeyClusterSpec{Shards: 3}}
	if err := c.Create(ctx, vc); err != nil {
		t.Fatal(err)
	}
	waitReady(t, f, "a", 90*time.Second)

	names := []string{resources.InternalSecretName("a"), resources.ExporterSecretName("a"), resources.ACLSecretName("a")}
	before := map[string]map[string][]byte{}
	for _, name := range names {
		var s corev1.Secret
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &s); err != nil {
			t.Fatal(err)
		}
		before[name] = s.Data
		s.Labels = nil
		if err := c.Update(ctx, &s); err != nil {
			t.Fatalf("removing the labels of %s: %v", name, err)
		}
	}
	// Passes: each annotation change of the cluster runs one.
	for i := range 3 {
		testenv.Eventually(t, 10*time.Second, "annotate the cluster", func() (bool, string) {
			var cur valkeyv1.ValkeyCluster
			if err := c.Get(ctx, client.ObjectKeyFromObject(vc), &cur); err != nil {
				return false, err.Error()
			}
			if cur.Annotations == nil {
				cur.Annotations = map[string]string{}
			}
			cur.Annotations["test/pass"] = fmt.Sprint(i)
			if err := c.Update(ctx, &cur); err != nil {
				return false, err.Error()
			}
			return true, ""
		})
		time.Sleep(500 * time.Millisecond)
	}
	for _, name := range names {
		testenv.Eventually(t, 30*time.Second, name+" adopted", func() (bool, string) {
			var s corev1.Secret
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &s); err != nil {
				return false, err.Error()
			}
			if !maps.EqualFunc(s.Data, before[name], func(a, b []byte) bool { return string(a) == string(b) }) {
				t.Fatalf("Secret %s's data changed after its labels were removed: keys %v -> %v", name, keys(before[name]), keys(s.Data))
			}
			return s.Labels[resources.LabelManagedBy] == resources.ManagedBy, fmt.Sprintf("labels %v", s.Labels)
		})
	}
	wantEvents(t, f, "a", map[string]int{valkeyv1.EventInternalSecretsUpdated: 1})
	waitReady(t, f, "a", 30*time.Second)
}

func keys(m map[string][]byte) []string {
	var out []string
	for k, v := range m {
		out = append(out, fmt.Sprintf("%s(%d bytes)", k, len(v)))
	}
	return out
}
