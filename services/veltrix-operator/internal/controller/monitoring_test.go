package controller_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	veltrixv1 "github.com/opsuite/suite/api/veltrix/v1alpha1"
	"github.com/opsuite/suite/services/veltrix-operator/internal/resources"
	"github.com/opsuite/suite/shared/conditions"
	"github.com/opsuite/suite/shared/testenv"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// TestMetricsMonitored runs a cluster against an API server without the ServiceMonitor
// CRD, then installs it (the same shape as a ValkeyCluster's):
//   - without it MetricsMonitored=False (ServiceMonitorCRDMissing), and no ServiceMonitor
//     condition of the older operator is left;
//   - once the CRD exists the next pass writes the ServiceMonitor without a spec change:
//     controlled by the cluster, selecting the headless Service alone (the client Service
//     has the same metrics port), on a port that Service has; MetricsMonitored=True.
//
// The CRD is cluster-wide and the package's tests run one at a time; it is removed again.
func TestMetricsMonitored(t *testing.T) {
	ctx := context.Background()
	f := startFleet(t, operatorTokens(t, "operator", true), 1<<30, []string{"node-a"}, nil)
	ns := testenv.NewNamespace(t, env.Client, "vx-mon")
	startController(t, f, ns)
	// Two members on one node: the cluster stays short of nodes, so passes keep coming
	// (back-off of at most 4 s here) as they do every 30 s on a settled cluster.
	c := newCluster(t, ns, func(c *veltrixv1.VeltrixCluster) {
		c.Spec.Size, c.Spec.ReplicationFactor = 2, 2
		c.Spec.DiskSelector.NVMeOnly = ptr.To(false)
		c.Spec.IndexMapFallback = true
		c.Spec.ReclaimPolicy = veltrixv1.ReclaimDelete
	})
	condition(t, c, veltrixv1.ConditionMetricsMonitored, metav1.ConditionFalse, veltrixv1.ReasonServiceMonitorCRDMissing)

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
	sm.SetAPIVersion("monitoring.coreos.com/v1")
	sm.SetKind("ServiceMonitor")
	var live veltrixv1.VeltrixCluster
	testenv.Eventually(t, 60*time.Second, "the ServiceMonitor written and MetricsMonitored=True", func() (bool, string) {
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: c.Name}, sm); err != nil {
			return false, "ServiceMonitor: " + err.Error()
		}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(c), &live); err != nil {
			return false, err.Error()
		}
		got := conditions.Get(live.Status.Conditions, veltrixv1.ConditionMetricsMonitored)
		return got != nil && got.Status == metav1.ConditionTrue && got.Reason == veltrixv1.ReasonServiceMonitorApplied, fmt.Sprintf("condition %+v", got)
	})
	if old := conditions.Get(live.Status.Conditions, veltrixv1.ConditionServiceMonitor); old != nil {
		t.Errorf("the older ServiceMonitor condition is still there: %+v", old)
	}
	if owner := metav1.GetControllerOf(sm); owner == nil || owner.UID != live.UID {
		t.Errorf("ServiceMonitor controller %+v, want the cluster", owner)
	}
	match, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	var services corev1.ServiceList
	if err := env.Client.List(ctx, &services, client.InNamespace(ns), client.MatchingLabels(match)); err != nil {
		t.Fatal(err)
	}
	if len(services.Items) != 1 || services.Items[0].Name != resources.HeadlessServiceName(c) {
		var names []string
		for _, s := range services.Items {
			names = append(names, s.Name)
		}
		t.Fatalf("the ServiceMonitor selects Services %v, want %s alone", names, resources.HeadlessServiceName(c))
	}
	if !labels.SelectorFromSet(match).Matches(labels.Set(services.Items[0].Labels)) {
		t.Errorf("selector %v", match)
	}
	eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	var port bool
	for _, p := range services.Items[0].Spec.Ports {
		port = port || (len(eps) == 1 && eps[0].(map[string]any)["port"] == p.Name)
	}
	if !port {
		t.Errorf("endpoints %v name no port of %v", eps, services.Items[0].Spec.Ports)
	}
}
