package chartcheck

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// podMonitor is the part of the prometheus-operator kind the test reads.
type podMonitor struct {
	Metadata struct {
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		NamespaceSelector struct {
			MatchNames []string `json:"matchNames"`
		} `json:"namespaceSelector"`
		Selector struct {
			MatchLabels map[string]string `json:"matchLabels"`
		} `json:"selector"`
		PodMetricsEndpoints []struct {
			Port string `json:"port"`
			Path string `json:"path"`
		} `json:"podMetricsEndpoints"`
	} `json:"spec"`
}

// TestNodeAgentChartMetrics renders the node-agent chart:
//   - the agent listens for metrics on the chart's port (--metrics-bind-address) and the
//     container names that port "metrics";
//   - where the cluster serves monitoring.coreos.com/v1 PodMonitor, a PodMonitor in the
//     release's namespace selects the DaemonSet's pods (and only by its selector labels),
//     scrapes the port by that name, and carries podMonitor.labels;
//   - without the kind, with podMonitor.enabled=false, or with metrics.port=0, none; port 0
//     also drops the flag and the container port.
func TestNodeAgentChartMetrics(t *testing.T) {
	h := newHelm(t)
	const pm = "--api-versions=monitoring.coreos.com/v1/PodMonitor"
	out, err := h.template("na", "charts/node-agent", "--namespace", "nodes", pm, "--set", "podMonitor.labels.release=kube-prometheus-stack")
	if err != nil {
		t.Fatal(err)
	}
	objs := decode(t, out)
	full := "na-node-agent"
	ds := into[appsv1.DaemonSet](t, mustFind(t, objs, "DaemonSet", full))
	c := ds.Spec.Template.Spec.Containers[0]
	if !slices.Contains(c.Args, "--metrics-bind-address=:9102") {
		t.Errorf("args %v lack --metrics-bind-address=:9102", c.Args)
	}
	var port bool
	for _, p := range c.Ports {
		port = port || (p.Name == "metrics" && p.ContainerPort == 9102)
	}
	if !port {
		t.Errorf("ports %v lack metrics 9102", c.Ports)
	}
	o := mustFind(t, objs, "PodMonitor", full)
	var mon podMonitor
	if err := yaml.Unmarshal(o.raw, &mon); err != nil {
		t.Fatal(err)
	}
	if o.Metadata.Namespace != "nodes" || len(mon.Spec.NamespaceSelector.MatchNames) != 1 || mon.Spec.NamespaceSelector.MatchNames[0] != "nodes" {
		t.Errorf("PodMonitor namespace %q, namespaceSelector %v", o.Metadata.Namespace, mon.Spec.NamespaceSelector.MatchNames)
	}
	sel := labels.SelectorFromSet(mon.Spec.Selector.MatchLabels)
	if len(mon.Spec.Selector.MatchLabels) == 0 || !sel.Matches(labels.Set(ds.Spec.Template.Labels)) {
		t.Errorf("PodMonitor selector %v does not select the agent pods %v", mon.Spec.Selector.MatchLabels, ds.Spec.Template.Labels)
	}
	if len(mon.Spec.PodMetricsEndpoints) != 1 || mon.Spec.PodMetricsEndpoints[0].Port != "metrics" || mon.Spec.PodMetricsEndpoints[0].Path != "/metrics" {
		t.Errorf("endpoints %+v, want port metrics path /metrics", mon.Spec.PodMetricsEndpoints)
	}
	if mon.Metadata.Labels["release"] != "kube-prometheus-stack" {
		t.Errorf("PodMonitor labels %v lack podMonitor.labels", mon.Metadata.Labels)
	}

	for name, args := range map[string][]string{
		"no PodMonitor kind": nil,
		"podMonitor off":     {pm, "--set", "podMonitor.enabled=false"},
		"metrics off":        {pm, "--set", "metrics.port=0"},
	} {
		out, err := h.template(append([]string{"na", "charts/node-agent", "--namespace", "nodes"}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		objs := decode(t, out)
		if _, ok := find(objs, "PodMonitor", full); ok {
			t.Errorf("%s: a PodMonitor rendered", name)
		}
		if name == "metrics off" {
			ds := into[appsv1.DaemonSet](t, mustFind(t, objs, "DaemonSet", full))
			if c := ds.Spec.Template.Spec.Containers[0]; strings.Contains(strings.Join(c.Args, " "), "--metrics-bind-address") {
				t.Errorf("metrics.port=0 still passes %v", c.Args)
			}
		}
	}
}
