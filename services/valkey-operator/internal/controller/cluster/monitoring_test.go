package cluster_test

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	clustercontroller "github.com/opsuite/suite/services/valkey-operator/internal/controller/cluster"
	nodecontroller "github.com/opsuite/suite/services/valkey-operator/internal/controller/node"
	"github.com/opsuite/suite/services/valkey-operator/internal/resources"
	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
	"github.com/opsuite/suite/shared/conditions"
	"github.com/opsuite/suite/shared/testenv"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// TestServiceMonitor runs a cluster with the exporter on against an API server without
// the ServiceMonitor CRD, then installs the CRD:
//   - without it the cluster is Ready, MetricsMonitored=False (ServiceMonitorCRDMissing)
//     with one Warning event, and the metrics Service lists the exporters;
//   - once the CRD exists the controller finds it by itself (the recheck, no spec change)
//     and writes the ServiceMonitor: controlled by the cluster, selecting the metrics
//     Service only, scraping the exporter's port; MetricsMonitored=True;
//   - spec.exporter.serviceMonitor.enabled=false deletes it and the condition goes.
//
// Not parallel: the CRD is cluster-wide, and it is removed again at the end.
func TestServiceMonitor(t *testing.T) {
	ctx := context.Background()
	ns := testenv.NewNamespace(t, env.Client, "vkc-mon")
	f := newFleet(t, env.Client, ns)
	env.StartManager(t, func(mgr ctrl.Manager) error {
		return clustercontroller.Setup(mgr, clustercontroller.Config{
			Addr:           f.addr,
			BusPort:        f.busPort,
			Options:        func(context.Context, *valkeyv1.ValkeyCluster) (valkey.Options, error) { return valkey.Options{}, nil },
			Poll:           300 * time.Millisecond,
			MonitorRecheck: time.Second,
			Namespaces:     []string{ns},
		})
	}, testenv.InNamespaces(ns), func(o *ctrl.Options) { o.Cache.ByObject = nodecontroller.CacheByObject() })
	vc := &valkeyv1.ValkeyCluster{ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: ns},
		Spec: valkeyv1.ValkeyClusterSpec{Shards: 1, Exporter: valkeyv1.ExporterSpec{Enabled: true}}}
	if err := env.Client.Create(ctx, vc); err != nil {
		t.Fatal(err)
	}

	// Without the CRD.
	got := waitReady(t, f, "m", 60*time.Second)
	wantCondition(t, got, valkeyv1.ConditionMetricsMonitored, metav1.ConditionFalse, valkeyv1.ReasonServiceMonitorCRDMissing)
	wantEvents(t, f, "m", map[string]int{valkeyv1.EventServiceMonitorCRDMissing: 1})
	var svc corev1.Service
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: resources.MetricsServiceName("m")}, &svc); err != nil {
		t.Fatalf("metrics Service: %v", err)
	}
	if !reflect.DeepEqual(svc.Spec.Selector, resources.PodSelector("m")) || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != resources.ExporterPort {
		t.Errorf("metrics Service selector %v ports %v", svc.Spec.Selector, svc.Spec.Ports)
	}

	// The CRD appears.
	crds, err := envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{Paths: []string{filepath.Join("testdata", "servicemonitor-crd.yaml")}, ErrorIfPathMissing: true})
	if err != nil {
		t.Fatalf("installing the ServiceMonitor CRD: %v", err)
	}
	t.Cleanup(func() {
		if err := envtest.UninstallCRDs(env.Config, envtest.CRDInstallOptions{CRDs: crds}); err != nil {
			t.Errorf("removing the ServiceMonitor CRD: %v", err)
		}
	})
	sm := &unstructured.Unstructured{}
	sm.SetGroupVersionKind(resources.ServiceMonitorGVK)
	testenv.Eventually(t, 30*time.Second, "the ServiceMonitor written and MetricsMonitored=True", func() (bool, string) {
		f.sync(ctx)
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "m"}, sm); err != nil {
			return false, "ServiceMonitor: " + err.Error()
		}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(vc), got); err != nil {
			return false, err.Error()
		}
		c := conditions.Get(got.Status.Conditions, valkeyv1.ConditionMetricsMonitored)
		return c != nil && c.Status == metav1.ConditionTrue, fmt.Sprintf("condition %+v", c)
	})
	wantCondition(t, got, valkeyv1.ConditionMetricsMonitored, metav1.ConditionTrue, valkeyv1.ReasonServiceMonitorApplied)
	wantCondition(t, got, valkeyv1.ConditionReady, metav1.ConditionTrue, valkeyv1.ReasonClusterHealthy)
	if owner := metav1.GetControllerOf(sm); owner == nil || owner.UID != got.UID {
		t.Errorf("ServiceMonitor controller %+v, want the cluster", owner)
	}
	match, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	if sel := labels.SelectorFromSet(match); !sel.Matches(labels.Set(svc.Labels)) {
		t.Errorf("ServiceMonitor selector %v does not select the metrics Service (labels %v)", match, svc.Labels)
	}
	var services corev1.ServiceList
	if err := env.Client.List(ctx, &services, client.InNamespace(ns), client.MatchingLabels(match)); err != nil {
		t.Fatal(err)
	}
	if len(services.Items) != 1 {
		t.Errorf("the ServiceMonitor selects %d Services, want the metrics Service alone", len(services.Items))
	}
	eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if len(eps) != 1 || eps[0].(map[string]any)["port"] != svc.Spec.Ports[0].Name {
		t.Errorf("endpoints %v, want one on port %q", eps, svc.Spec.Ports[0].Name)
	}
	if sm.GetLabels()[resources.LabelCluster] != "m" {
		t.Errorf("ServiceMonitor labels %v", sm.GetLabels())
	}

	// Switched off: the ServiceMonitor and the condition go, the metrics Service stays.
	testenv.EventuallyNil(t, 10*time.Second, "turning the ServiceMonitor off", func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(vc), vc); err != nil {
			return err
		}
		vc.Spec.Exporter.ServiceMonitor = &valkeyv1.ServiceMonitorSpec{Enabled: ptr.To(false)}
		return env.Client.Update(ctx, vc)
	})
	testenv.Eventually(t, 30*time.Second, "the ServiceMonitor deleted", func() (bool, string) {
		f.sync(ctx)
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "m"}, sm)
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(vc), got); err != nil {
			return false, err.Error()
		}
		c := conditions.Get(got.Status.Conditions, valkeyv1.ConditionMetricsMonitored)
		return apierrors.IsNotFound(err) && c == nil && got.Status.ObservedGeneration == got.Generation, fmt.Sprintf("get: %v, condition %+v", err, c)
	})
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(&svc), &svc); err != nil {
		t.Errorf("metrics Service after the ServiceMonitor was switched off: %v", err)
	}
}
