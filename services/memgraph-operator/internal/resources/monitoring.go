package resources

import (
	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ServiceMonitorGVK is the Prometheus Operator's kind. The operator writes it unstructured,
// so it needs no Prometheus Operator module, and only when its CRD is installed.
var ServiceMonitorGVK = schema.GroupVersionKind{Group: "monitoring.coreos.com", Version: "v1", Kind: "ServiceMonitor"}

// ServiceMonitorName is the cluster's ServiceMonitor.
func ServiceMonitorName(cluster string) string { return cluster }

// ServiceMonitor scrapes every member's metrics-exporter sidecar (port exporter,
// spec.metricsExporter), or with the sidecar turned off memgraph's own metrics port
// (spec.ports.metrics, --metrics-port), through the two headless Services, which list
// every pod, ready or not: a member that is starting or failing is the one whose metrics
// matter. It selects the cluster's Services by the cluster's labels; the client Service
// has neither port, so it adds no target. Each series carries the cluster
// (memgraph_com_cluster, from the Service) and the member's role
// (app_kubernetes_io_component: coordinator or data, from its pod).
func ServiceMonitor(c *memgraphv1.MemgraphCluster) *unstructured.Unstructured {
	labels := map[string]string{}
	if sm := c.Spec.ServiceMonitor; sm != nil {
		for k, v := range sm.Labels {
			labels[k] = v
		}
	}
	selector := map[string]any{}
	for k, v := range ClusterLabels(c.Name) {
		labels[k] = v
		selector[k] = v
	}
	port := PortMetrics
	if c.MetricsExporterEnabled() {
		port = PortExporter
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{
			"selector":          map[string]any{"matchLabels": selector},
			"namespaceSelector": map[string]any{"matchNames": []any{c.Namespace}},
			"targetLabels":      []any{LabelCluster},
			"podTargetLabels":   []any{LabelComponent},
			"endpoints": []any{map[string]any{
				"port":   port,
				"path":   "/metrics",
				"scheme": "http",
			}},
		},
	}}
	u.SetGroupVersionKind(ServiceMonitorGVK)
	u.SetName(ServiceMonitorName(c.Name))
	u.SetNamespace(c.Namespace)
	u.SetLabels(labels)
	return u
}
