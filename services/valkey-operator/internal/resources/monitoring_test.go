package resources

import (
	"reflect"
	"testing"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
)

// TestMetricsService: the metrics Service selects exactly the members' pods, names the
// exporter's container port, and is the only Service of the cluster the ServiceMonitor's
// selector matches (not the headless one, not a node's external one).
func TestMetricsService(t *testing.T) {
	c := cluster()
	c.Spec.Exporter.Enabled = true
	s := MetricsService(c)
	if s.Name != "c-metrics" || s.Namespace != "ns" || s.Spec.ClusterIP != corev1.ClusterIPNone || !s.Spec.PublishNotReadyAddresses {
		t.Errorf("service %s/%s clusterIP %q publishNotReady %v", s.Namespace, s.Name, s.Spec.ClusterIP, s.Spec.PublishNotReadyAddresses)
	}
	if !reflect.DeepEqual(s.Spec.Selector, PodSelector("c")) {
		t.Errorf("selector %v, want the members' %v", s.Spec.Selector, PodSelector("c"))
	}
	if len(s.Spec.Ports) != 1 || s.Spec.Ports[0].Name != MetricsPortName || s.Spec.Ports[0].Port != ExporterPort || s.Spec.Ports[0].TargetPort.StrVal != MetricsPortName {
		t.Errorf("ports %v", s.Spec.Ports)
	}
	// The exporter container's port has the name the Service targets.
	n := ValkeyNode(c, Position{0, 0}, "h")
	var named bool
	for _, ctr := range NodeWorkload(n, NodeOptions{}).StatefulSet.Spec.Template.Spec.Containers {
		for _, p := range ctr.Ports {
			named = named || (ctr.Name == ExporterContainer && p.Name == MetricsPortName && p.ContainerPort == ExporterPort)
		}
	}
	if !named {
		t.Errorf("no exporter container port named %q", MetricsPortName)
	}

	sel := labels.SelectorFromSet(selectorOf(t, ServiceMonitor(c)))
	if !sel.Matches(labels.Set(s.Labels)) {
		t.Errorf("the ServiceMonitor's selector %v does not match the metrics Service's labels %v", sel, s.Labels)
	}
	if sel.Matches(labels.Set(Service(c).Labels)) {
		t.Errorf("the ServiceMonitor's selector %v matches the headless Service too (its members would be scraped twice)", sel)
	}
	if sel.Matches(labels.Set(MetricsService(&valkeyv1.ValkeyCluster{}).Labels)) {
		t.Errorf("the ServiceMonitor's selector %v matches another cluster's metrics Service", sel)
	}
}

// TestServiceMonitor pins the ServiceMonitor: kind, name, labels (the user's
// under the operator's), the endpoint on the exporter's port and the labels each series
// carries.
func TestServiceMonitor(t *testing.T) {
	c := cluster()
	c.Spec.Exporter.Enabled = true
	c.Spec.Exporter.ServiceMonitor = &valkeyv1.ServiceMonitorSpec{Labels: map[string]string{
		"release":     "kube-prometheus-stack",
		LabelInstance: "not-the-cluster", // the operator's label wins
	}}
	sm := ServiceMonitor(c)
	if sm.GetAPIVersion() != "monitoring.coreos.com/v1" || sm.GetKind() != "ServiceMonitor" || sm.GetName() != "c" || sm.GetNamespace() != "ns" {
		t.Errorf("%s %s %s/%s", sm.GetAPIVersion(), sm.GetKind(), sm.GetNamespace(), sm.GetName())
	}
	l := sm.GetLabels()
	if l["release"] != "kube-prometheus-stack" || l[LabelInstance] != "c" || l[LabelCluster] != "c" || l[LabelManagedBy] != ManagedBy {
		t.Errorf("labels %v", l)
	}
	eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	want := []any{map[string]any{"port": MetricsPortName, "path": "/metrics", "scheme": "http"}}
	if !reflect.DeepEqual(eps, want) {
		t.Errorf("endpoints %v, want %v", eps, want)
	}
	ns, _, _ := unstructured.NestedStringSlice(sm.Object, "spec", "namespaceSelector", "matchNames")
	tl, _, _ := unstructured.NestedStringSlice(sm.Object, "spec", "targetLabels")
	ptl, _, _ := unstructured.NestedStringSlice(sm.Object, "spec", "podTargetLabels")
	if !reflect.DeepEqual(ns, []string{"ns"}) || !reflect.DeepEqual(tl, []string{LabelCluster}) || !reflect.DeepEqual(ptl, []string{LabelShard, LabelNodeIndex, LabelNode}) {
		t.Errorf("namespaces %v targetLabels %v podTargetLabels %v", ns, tl, ptl)
	}
	// The user's labels are only on the ServiceMonitor, not on the nodes (a change of
	// them must not rewrite every ValkeyNode).
	if n := ValkeyNode(c, Position{0, 0}, "h"); n.Spec.Exporter.ServiceMonitor != nil || !n.Spec.Exporter.Enabled {
		t.Errorf("node exporter %+v", n.Spec.Exporter)
	}
}

// TestServiceMonitorEnabled: wanted while the exporter runs, unless switched off.
func TestServiceMonitorEnabled(t *testing.T) {
	for _, tc := range []struct {
		e    valkeyv1.ExporterSpec
		want bool
	}{
		{valkeyv1.ExporterSpec{}, false},
		{valkeyv1.ExporterSpec{Enabled: true}, true},
		{valkeyv1.ExporterSpec{Enabled: true, ServiceMonitor: &valkeyv1.ServiceMonitorSpec{}}, true},
		{valkeyv1.ExporterSpec{Enabled: true, ServiceMonitor: &valkeyv1.ServiceMonitorSpec{Enabled: ptr.To(true)}}, true},
		{valkeyv1.ExporterSpec{Enabled: true, ServiceMonitor: &valkeyv1.ServiceMonitorSpec{Enabled: ptr.To(false)}}, false},
		{valkeyv1.ExporterSpec{ServiceMonitor: &valkeyv1.ServiceMonitorSpec{Enabled: ptr.To(true)}}, false},
	} {
		if got := tc.e.ServiceMonitorEnabled(); got != tc.want {
			t.Errorf("%+v: %v, want %v", tc.e, got, tc.want)
		}
	}
}

func selectorOf(t *testing.T, sm *unstructured.Unstructured) map[string]string {
	t.Helper()
	m, ok, err := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	if !ok || err != nil {
		t.Fatalf("no spec.selector.matchLabels: %v", err)
	}
	return m
}
