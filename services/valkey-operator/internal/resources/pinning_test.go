package resources

import (
	"fmt"
	"strings"
	"testing"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	corev1 "k8s.io/api/core/v1"
)

// TestZonePinningRoundRobin: each member is required in exactly one zone,
// zones[(shard+index) % len(zones)], as the API documents; before, every member was
// allowed in any listed zone, so a shard's members could share one.
func TestZonePinningRoundRobin(t *testing.T) {
	c := cluster()
	c.Spec.Shards, c.Spec.Replicas = 3, 1
	c.Spec.Scheduling = &valkeyv1.SchedulingSpec{Zone: &valkeyv1.ZoneScheduling{Pinning: &valkeyv1.ZonePinning{Zones: []string{"za", "zb", "zc"}}}}
	var got []string
	for _, p := range Positions(c) {
		a := ValkeyNode(c, p, "").Spec.Affinity
		if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
			t.Fatalf("member %v: no required node affinity", p)
		}
		var zones []string
		for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			for _, r := range term.MatchExpressions {
				if r.Key == TopologyZone && r.Operator == corev1.NodeSelectorOpIn {
					zones = append(zones, r.Values...)
				}
			}
		}
		got = append(got, fmt.Sprintf("%d/%d=%s", p.Shard, p.Index, strings.Join(zones, "|")))
		if z := PinnedZone(c, p); len(zones) != 1 || zones[0] != z {
			t.Errorf("member %v: zones %v, PinnedZone %q", p, zones, z)
		}
	}
	if want := "0/0=za 0/1=zb 1/0=zb 1/1=zc 2/0=zc 2/1=za"; strings.Join(got, " ") != want {
		t.Errorf("pinned %s, want %s", strings.Join(got, " "), want)
	}
	c.Spec.Scheduling = nil
	if z := PinnedZone(c, Position{1, 1}); z != "" {
		t.Errorf("without pinning: %q", z)
	}
}
