package controller_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	veltrixv1 "github.com/opsuite/suite/api/veltrix/v1alpha1"
	"github.com/opsuite/suite/services/veltrix-operator/internal/controller"
	"github.com/opsuite/suite/services/veltrix-operator/internal/resources"
	"github.com/opsuite/suite/shared/testenv"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"
)

// TestGeneratedRBACSuffices runs the controller as a ServiceAccount holding only the
// ClusterRole generated from its markers (deploy/rbac/veltrix-operator/role.yaml, which the
// chart ships) through a cluster's life with reclaim policy Delete: every read and write it
// makes, the finalizer's included, is allowed.
func TestGeneratedRBACSuffices(t *testing.T) {
	ctx := context.Background()
	const sa = "rbac-operator"
	f := startFleet(t, operatorTokens(t, sa, true), 1<<30, []string{"node-b"}, nil)
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, "deploy", "rbac", "veltrix-operator", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.ClusterRole
	if err := yaml.Unmarshal(raw, &role); err != nil {
		t.Fatal(err)
	}
	role.Name = "veltrix-operator-generated"
	must(t, env.Client.Create(ctx, &role))
	must(t, env.Client.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: operatorNS}},
	}))
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(operatorNS).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	asOperator := rest.AnonymousClientConfig(env.Config)
	asOperator.BearerToken = tr.Status.Token

	ns := testenv.NewNamespace(t, env.Client, "vx")
	skip := true
	opts := ctrl.Options{
		Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Cache: cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}},
	}
	opts.Controller.SkipNameValidation = &skip
	mgr, err := ctrl.NewManager(asOperator, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := controller.Setup(mgr, controller.Config{Agents: f.calls, PVRoot: f.pvRoot, Poll: 500 * time.Millisecond, Backoff: 500 * time.Millisecond, CheckpointTimeout: 3 * time.Second}); err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})

	c := newCluster(t, ns, func(c *veltrixv1.VeltrixCluster) {
		c.Spec.Size, c.Spec.ReplicationFactor = 1, 1
		c.Spec.DiskSelector.NVMeOnly = ptr.To(false)
		c.Spec.IndexMapFallback = true
		c.Spec.ReclaimPolicy = veltrixv1.ReclaimDelete
	})
	condition(t, c, veltrixv1.ConditionDisksPrepared, metav1.ConditionTrue, veltrixv1.ReasonPrepared)
	testenv.Eventually(t, 30*time.Second, "the StatefulSet", func() (bool, string) {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "vx"}, &appsv1.StatefulSet{})
		return err == nil, "not there"
	})
	// A claim as the StatefulSet controller would make it, for the finalizer to delete.
	must(t, env.Client.Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data-0-vx-0", Namespace: ns, Labels: resources.SelectorLabels(c)},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resources.ClaimRequest}},
		},
	}))
	if ev := eventReasons(t, c); ev[veltrixv1.ReasonPrepared] == "" {
		t.Errorf("no events recorded as the operator: %v", ev)
	}
	if err := env.Client.Delete(ctx, c); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 60*time.Second, "the cluster gone", func() (bool, string) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(c), &veltrixv1.VeltrixCluster{})
		return apierrors.IsNotFound(err), "still there"
	})
	var pvc corev1.PersistentVolumeClaim
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "data-0-vx-0"}, &pvc); !apierrors.IsNotFound(err) && pvc.DeletionTimestamp.IsZero() {
		t.Errorf("the claim was not deleted: %v", err)
	}
	if p := f.prepared(t, "node-b"); len(p) != 0 {
		t.Errorf("node-b still has %d prepared disks", len(p))
	}
}
