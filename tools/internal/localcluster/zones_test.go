package localcluster

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestNodeZones: the default nodes are dealt into three zones in turn and labelled with
// their zone and region, so zone spreads and pinning have real zones to work with.
func TestNodeZones(t *testing.T) {
	o := InstanceOptions(t.TempDir(), 0)
	o.Nodes = DefaultNodes("default", 3, 2, "127.3.0.")
	var got []string
	for _, n := range o.Nodes {
		l := o.desiredNode(n).Labels
		got = append(got, n.Name+"="+l[corev1.LabelTopologyZone]+"/"+l[corev1.LabelTopologyRegion])
	}
	want := "kwok-general-0=eu-west-1a/eu-west-1 kwok-general-1=eu-west-1b/eu-west-1 kwok-general-2=eu-west-1c/eu-west-1 " +
		"kwok-agent-0=eu-west-1a/eu-west-1 kwok-agent-1=eu-west-1b/eu-west-1"
	if strings.Join(got, " ") != want {
		t.Errorf("zones %s\nwant %s", strings.Join(got, " "), want)
	}
	if err := o.Validate(); err != nil {
		t.Errorf("default options: %v", err)
	}

	// A node without a zone has neither label; a zone that is no label value is refused.
	n := o.Nodes[0]
	n.Zone = ""
	if l := o.desiredNode(n).Labels; l[corev1.LabelTopologyZone] != "" || l[corev1.LabelTopologyRegion] != "" {
		t.Errorf("zoneless node labels %v", l)
	}
	o.Nodes[1].Zone = "eu west"
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), `zone "eu west"`) {
		t.Errorf("invalid zone accepted: %v", err)
	}
}
