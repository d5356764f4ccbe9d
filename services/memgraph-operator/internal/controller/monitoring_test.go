package controller_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/services/memgraph-operator/internal/controller"
	"github.com/opsuite/suite/services/memgraph-operator/internal/resources"
	"github.com/opsuite/suite/shared/testenv"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// TestServiceMonitor runs a cluster against an API server without the ServiceMonitor CRD,
// then installs it (the shape of a ValkeyCluster's and a VeltrixCluster's):
//   - without it the cluster is Ready, MetricsMonitored=False (ServiceMonitorCRDMissing),
//     with a Warning event of that reason;
//   - once the CRD exists a later pass writes the ServiceMonitor without a spec change:
//     controlled by the cluster, with spec.serviceMonitor.labels, selecting Services whose
//     exporter ports (the metrics-exporter sidecar both roles' pods run) are every
//     member's (both headless Services; the client Service, which it also selects, has no
//     such port); MetricsMonitored=True;
//   - spec.metricsExporter.enabled=false takes the sidecar out of both StatefulSets and
//     the port out of the Services, and the ServiceMonitor scrapes memgraph's metrics port;
//   - spec.serviceMonitor.enabled=false deletes it and removes the condition.
//
// The CRD is cluster-wide and the package's tests run one at a time; it is removed again.
func TestServiceMonitor(t *testing.T) {
	h := start(t, "mg-monitoring", func(cfg *controller.Config) { cfg.OperatorImage = "registry.example/memgraph-operator:test" })
	ctx := context.Background()
	h.create("mon", 3, 2)
	testenv.EventuallyNil(t, 10*time.Second, "labels for the ServiceMonitor", func() error {
		live := h.cluster("mon")
		live.Spec.ServiceMonitor = &memgraphv1.ServiceMonitorSpec{Labels: map[string]string{"release": "kube-prometheus-stack"}}
		return h.c.Update(ctx, live)
	})
	h.podsRun(resources.StatefulSetName("mon", resources.RoleCoordinator))
	h.podsRun(resources.StatefulSetName("mon", resources.RoleData))
	h.waitCondition("mon", memgraphv1.ConditionReady, metav1.ConditionTrue, memgraphv1.ReasonReady)
	h.waitCondition("mon", memgraphv1.ConditionMetricsMonitored, metav1.ConditionFalse, memgraphv1.ReasonServiceMonitorCRDMissing)
	testenv.Eventually(t, 10*time.Second, "a ServiceMonitorCRDMissing Warning event", func() (bool, string) {
		for _, e := range h.events("mon") {
			if e.Reason == memgraphv1.ReasonServiceMonitorCRDMissing && e.Type == corev1.EventTypeWarning {
				return true, ""
			}
		}
		return false, fmt.Sprint(len(h.events("mon")), " events")
	})

	crds, err := envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{Paths: []string{filepath.Join("testdata", "servicemonitor-crd.yaml")}, ErrorIfPathMissing: true})
	if err != nil {
		t.Fatalf("installing the ServiceMonitor CRD: %v", err)
	}
	t.Cleanup(func() {
		if err := envtest.UninstallCRDs(env.Config, envtest.CRDInstallOptions{CRDs: crds}); err != nil {
			t.Errorf("removing the ServiceMonitor CRD: %v", err)
		}
	})
	got := h.waitCondition("mon", memgraphv1.ConditionMetricsMonitored, metav1.ConditionTrue, memgraphv1.ReasonServiceMonitorApplied)
	if r := meta.FindStatusCondition(got.Status.Conditions, memgraphv1.ConditionReady); r == nil || r.Status != metav1.ConditionTrue {
		t.Errorf("Ready %+v, want True throughout", r)
	}
	sm := &unstructured.Unstructured{}
	sm.SetGroupVersionKind(resources.ServiceMonitorGVK)
	if err := h.c.Get(ctx, client.ObjectKey{Namespace: h.ns, Name: "mon"}, sm); err != nil {
		t.Fatalf("ServiceMonitor: %v", err)
	}
	if owner := metav1.GetControllerOf(sm); owner == nil || owner.UID != got.UID {
		t.Errorf("ServiceMonitor controller %+v, want the cluster", owner)
	}
	if sm.GetLabels()["release"] != "kube-prometheus-stack" {
		t.Errorf("ServiceMonitor labels %v lack spec.serviceMonitor.labels", sm.GetLabels())
	}
	h.wantScraped(sm, resources.PortExporter, memgraphv1.DefaultMetricsExporterPort)
	for _, r := range []resources.Role{resources.RoleCoordinator, resources.RoleData} {
		if !h.hasContainer(resources.StatefulSetName("mon", r), resources.ContainerMetricsExporter) {
			t.Errorf("the %s StatefulSet has no %s sidecar", r, resources.ContainerMetricsExporter)
		}
	}

	// The sidecar off: gone from the pods, the ServiceMonitor reads memgraph's port.
	testenv.EventuallyNil(t, 10*time.Second, "turning the metrics exporter off", func() error {
		live := h.cluster("mon")
		live.Spec.MetricsExporter = &memgraphv1.MetricsExporterSpec{Enabled: ptr.To(false)}
		return h.c.Update(ctx, live)
	})
	testenv.Eventually(t, 30*time.Second, "the sidecar out of both StatefulSets", func() (bool, string) {
		for _, r := range []resources.Role{resources.RoleCoordinator, resources.RoleData} {
			if h.hasContainer(resources.StatefulSetName("mon", r), resources.ContainerMetricsExporter) {
				return false, string(r) + " still has it"
			}
		}
		return true, ""
	})
	testenv.EventuallyNil(t, 30*time.Second, "the ServiceMonitor on memgraph's metrics port", func() error {
		if err := h.c.Get(ctx, client.ObjectKey{Namespace: h.ns, Name: "mon"}, sm); err != nil {
			return err
		}
		eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
		if len(eps) != 1 || eps[0].(map[string]any)["port"] != resources.PortMetrics {
			return fmt.Errorf("endpoints %v", eps)
		}
		return nil
	})
	h.wantScraped(sm, resources.PortMetrics, memgraphv1.DefaultMetricsPort)

	// Switched off: the ServiceMonitor and the condition go.
	testenv.EventuallyNil(t, 10*time.Second, "turning the ServiceMonitor off", func() error {
		live := h.cluster("mon")
		live.Spec.ServiceMonitor = &memgraphv1.ServiceMonitorSpec{Enabled: ptr.To(false)}
		return h.c.Update(ctx, live)
	})
	testenv.Eventually(t, 30*time.Second, "the ServiceMonitor deleted and MetricsMonitored removed", func() (bool, string) {
		err := h.c.Get(ctx, client.ObjectKeyFromObject(sm), sm)
		live := h.cluster("mon")
		cond := meta.FindStatusCondition(live.Status.Conditions, memgraphv1.ConditionMetricsMonitored)
		return apierrors.IsNotFound(err) && cond == nil && live.Status.ObservedGeneration == live.Generation, fmt.Sprintf("get: %v, condition %+v", err, cond)
	})
}

// wantScraped checks that the ServiceMonitor's one endpoint, port, is port number on
// both headless Services, which publish members not ready, and on no other Service.
func (h *harness) wantScraped(sm *unstructured.Unstructured, port string, number int32) {
	h.t.Helper()
	match, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if len(eps) != 1 || eps[0].(map[string]any)["port"] != port {
		h.t.Fatalf("endpoints %v, want one on port %s", eps, port)
	}
	var services corev1.ServiceList
	if err := h.c.List(context.Background(), &services, client.InNamespace(h.ns), client.MatchingLabels(match)); err != nil {
		h.t.Fatal(err)
	}
	scraped := map[string]bool{}
	for _, s := range services.Items {
		for _, p := range s.Spec.Ports {
			if p.Name == port {
				scraped[s.Name] = true
				if p.Port != number {
					h.t.Errorf("Service %s port %s is %d, want %d", s.Name, p.Name, p.Port, number)
				}
				if !s.Spec.PublishNotReadyAddresses {
					h.t.Errorf("Service %s lists ready members only", s.Name)
				}
			}
		}
	}
	want := map[string]bool{resources.HeadlessServiceName("mon", resources.RoleCoordinator): true, resources.HeadlessServiceName("mon", resources.RoleData): true}
	if fmt.Sprint(scraped) != fmt.Sprint(want) {
		h.t.Errorf("the ServiceMonitor scrapes port %v of Services %v, want %v", port, scraped, want)
	}
}

// hasContainer says whether the StatefulSet's pod template runs the container.
func (h *harness) hasContainer(sts, container string) bool {
	h.t.Helper()
	var s appsv1.StatefulSet
	if err := h.c.Get(context.Background(), client.ObjectKey{Namespace: h.ns, Name: sts}, &s); err != nil {
		h.t.Fatal(err)
	}
	return slices.ContainsFunc(s.Spec.Template.Spec.Containers, func(c corev1.Container) bool { return c.Name == container })
}
