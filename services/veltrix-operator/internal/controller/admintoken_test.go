package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	veltrixv1 "github.com/opsuite/suite/api/veltrix/v1alpha1"
	"github.com/opsuite/suite/services/veltrix-operator/internal/controller"
	"github.com/opsuite/suite/services/veltrix-operator/internal/resources"
	"github.com/opsuite/suite/shared/testenv"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestAdminTokenNeverRegenerated runs the controller with the operator's cache (its own
// labelled Secrets only). The generated admin token Secret loses its labels by hand: the
// passes that follow find it through the API server and adopt it, labels restored and
// token kept (before, the cache miss generated a new token over the live one, which the
// pods do not have: every admin call then fails with 401). A Secret of that name the
// cluster does not control is reported (ChildrenFailed) and never written over, and so is
// an unlabelled ConfigMap under a cluster's engine ConfigMap name (the cache holds our
// labelled ConfigMaps only: it is found through the API reader, never applied over).
func TestAdminTokenNeverRegenerated(t *testing.T) {
	ctx := context.Background()
	f := startFleet(t, operatorTokens(t, "operator", true), 1<<30, []string{"node-a", "node-b", "node-c"}, nil) // the nodes every test shares (nodes outlive tests)
	ns := testenv.NewNamespace(t, env.Client, "vx-token")
	env.StartManager(t, func(mgr ctrl.Manager) error {
		return controller.Setup(mgr, controller.Config{Agents: f.calls, PVRoot: f.pvRoot, Poll: 500 * time.Millisecond, Backoff: 500 * time.Millisecond, MaxBackoff: 2 * time.Second, CheckpointTimeout: 3 * time.Second})
	}, testenv.InNamespaces(ns), func(o *ctrl.Options) { o.Cache.ByObject = controller.CacheByObject() })

	// A foreign Secret under the name the second cluster would generate, and a foreign
	// ConfigMap under the third's engine ConfigMap name.
	foreign := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "other-admin-token", Namespace: ns}, StringData: map[string]string{resources.AdminTokenKey: "users-own"}}
	must(t, env.Client.Create(ctx, foreign))
	foreignCM := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "third-env", Namespace: ns}, Data: map[string]string{"mine": "yes"}}
	must(t, env.Client.Create(ctx, foreignCM))

	spec := func(c *veltrixv1.VeltrixCluster) {
		c.Spec.Size, c.Spec.ReplicationFactor = 1, 1
		c.Spec.DiskSelector.NVMeOnly = ptr.To(false)
		c.Spec.IndexMapFallback = true
		c.Spec.ReclaimPolicy = veltrixv1.ReclaimDelete
	}
	c := newCluster(t, ns, spec)
	key := client.ObjectKey{Namespace: ns, Name: resources.GeneratedAdminTokenSecretName(c)}
	if key.Name == foreign.Name {
		t.Fatalf("the foreign Secret's name %s is the first cluster's", key.Name)
	}
	var token string
	testenv.Eventually(t, 60*time.Second, "the generated admin token Secret", func() (bool, string) {
		var s corev1.Secret
		if err := env.Client.Get(ctx, key, &s); err != nil {
			return false, err.Error()
		}
		token = string(s.Data[resources.AdminTokenKey])
		return token != "", "no token yet"
	})

	var s corev1.Secret
	must(t, env.Client.Get(ctx, key, &s))
	s.Labels = nil
	must(t, env.Client.Update(ctx, &s))
	// Passes keep coming (the cluster waits for its pods, polling); a spec change adds one.
	testenv.Eventually(t, 10*time.Second, "a spec change", func() (bool, string) {
		var cur veltrixv1.VeltrixCluster
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(c), &cur); err != nil {
			return false, err.Error()
		}
		if cur.Annotations == nil {
			cur.Annotations = map[string]string{}
		}
		cur.Annotations["test/pass"] = "1"
		if err := env.Client.Update(ctx, &cur); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	deadline := time.Now().Add(5 * time.Second)
	testenv.Eventually(t, 30*time.Second, "the admin token Secret adopted", func() (bool, string) {
		var s corev1.Secret
		if err := env.Client.Get(ctx, key, &s); err != nil {
			return false, err.Error()
		}
		if got := string(s.Data[resources.AdminTokenKey]); got != token {
			t.Fatalf("the admin token changed after its Secret's labels were removed")
		}
		// Some passes after the adoption, to see the token stay.
		return s.Labels[resources.LabelManagedBy] == resources.ManagedBy && time.Now().After(deadline), fmt.Sprintf("labels %v", s.Labels)
	})

	// The second cluster's generated name is taken by the foreign Secret.
	other := &veltrixv1.VeltrixCluster{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: ns}}
	spec(other)
	must(t, env.Client.Create(ctx, other))
	if n := resources.GeneratedAdminTokenSecretName(other); n != foreign.Name {
		t.Fatalf("generated name %s, the test expects %s", n, foreign.Name)
	}
	cond := condition(t, other, veltrixv1.ConditionReady, metav1.ConditionFalse, veltrixv1.ReasonChildrenFailed)
	if !strings.Contains(cond.Message, foreign.Name) {
		t.Errorf("Ready message %q does not name the Secret", cond.Message)
	}

	// The third cluster's engine ConfigMap name is taken by the foreign ConfigMap, which
	// the cache (our labelled ConfigMaps only) does not hold.
	third := &veltrixv1.VeltrixCluster{ObjectMeta: metav1.ObjectMeta{Name: "third", Namespace: ns}}
	spec(third)
	must(t, env.Client.Create(ctx, third))
	if n := resources.ConfigMapName(third); n != foreignCM.Name {
		t.Fatalf("ConfigMap name %s, the test expects %s", n, foreignCM.Name)
	}
	cond = condition(t, third, veltrixv1.ConditionReady, metav1.ConditionFalse, veltrixv1.ReasonChildrenFailed)
	if !strings.Contains(cond.Message, foreignCM.Name) {
		t.Errorf("Ready message %q does not name the ConfigMap", cond.Message)
	}

	time.Sleep(2 * time.Second)
	var got corev1.Secret
	must(t, env.Client.Get(ctx, client.ObjectKeyFromObject(foreign), &got))
	if string(got.Data[resources.AdminTokenKey]) != "users-own" || len(got.Labels) != 0 || len(got.OwnerReferences) != 0 {
		t.Errorf("the foreign Secret was written: data %q labels %v owners %v", got.Data[resources.AdminTokenKey], got.Labels, got.OwnerReferences)
	}
	var gotCM corev1.ConfigMap
	must(t, env.Client.Get(ctx, client.ObjectKeyFromObject(foreignCM), &gotCM))
	if gotCM.Data["mine"] != "yes" || len(gotCM.Data) != 1 || len(gotCM.Labels) != 0 || len(gotCM.OwnerReferences) != 0 {
		t.Errorf("the foreign ConfigMap was written: data %v labels %v owners %v", gotCM.Data, gotCM.Labels, gotCM.OwnerReferences)
	}
}
