package resources

import (
	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// ServiceMonitorGVK is the Prometheus Operator's kind. The operator writes it unstructured,
// so it needs no Prometheus Operator module, and only when its CRD is installed.
var ServiceMonitorGVK = schema.GroupVersionKind{Group: "monitoring.coreos.com", Version: "v1", Kind: "ServiceMonitor"}

// ComponentMetrics labels the cluster's metrics Service.
const ComponentMetrics = "metrics"

// MetricsPortName names the exporter's port in the pods and in the metrics Service.
const MetricsPortName = "metrics"

// MetricsServiceName is the Service listing every member's exporter.
func MetricsServiceName(cluster string) string { return cluster + "-metrics" }

// ServiceMonitorName is the cluster's ServiceMonitor.
func ServiceMonitorName(cluster string) string { return cluster }

// MetricsServiceSelector selects the metrics Service of cluster (and nothing else of it:
// the headless Service has no component label, a node's external Service another one).
func MetricsServiceSelector(cluster string) map[string]string {
	l := ClusterLabels(cluster)
	l[LabelComponent] = ComponentMetrics
	return l
}

// MetricsService lists every member's exporter port, ready or not: a member that is not
// ready (loading, failing) is the one whose metrics matter, and its exporter still answers
// (redis_up 0 when the server does not). Headless: scrapers address the pods, not a VIP.
func MetricsService(c *valkeyv1.ValkeyCluster) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: MetricsServiceName(c.Name), Namespace: c.Namespace, Labels: MetricsServiceSelector(c.Name)},
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			PublishNotReadyAddresses: true,
			Selector:                 PodSelector(c.Name),
			Ports: []corev1.ServicePort{
				{Name: MetricsPortName, Port: ExporterPort, TargetPort: intstr.FromString(MetricsPortName), Protocol: corev1.ProtocolTCP},
			},
		},
	}
}

// ServiceMonitor scrapes every member's exporter through the metrics Service. Each series
// carries the cluster (from the Service) and the member's shard, index and node name (from
// its pod), so a dashboard can group by shard without joining on pod names.
func ServiceMonitor(c *valkeyv1.ValkeyCluster) *unstructured.Unstructured {
	labels := map[string]string{}
	if sm := c.Spec.Exporter.ServiceMonitor; sm != nil {
		for k, v := range sm.Labels {
			labels[k] = v
		}
	}
	for k, v := range ClusterLabels(c.Name) {
		labels[k] = v
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{
			"selector":          map[string]any{"matchLabels": stringsToAny(MetricsServiceSelector(c.Name))},
			"namespaceSelector": map[string]any{"matchNames": []any{c.Namespace}},
			"targetLabels":      []any{LabelCluster},
			"podTargetLabels":   []any{LabelShard, LabelNodeIndex, LabelNode},
			"endpoints": []any{map[string]any{
				"port":   MetricsPortName,
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

func stringsToAny(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
