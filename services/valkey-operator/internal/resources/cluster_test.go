package resources

import (
	"fmt"
	"testing"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func cluster() *valkeyv1.ValkeyCluster {
	return &valkeyv1.ValkeyCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"},
		Spec:       valkeyv1.ValkeyClusterSpec{Shards: 3, Replicas: 2},
	}
}

func TestPositions(t *testing.T) {
	got := Positions(cluster())
	if len(got) != 9 {
		t.Fatalf("%d positions, want 9", len(got))
	}
	if got[0] != (Position{0, 0}) || got[2] != (Position{0, 2}) || got[3] != (Position{1, 0}) || got[8] != (Position{2, 2}) {
		t.Errorf("positions out of order: %v", got)
	}
}

func TestService(t *testing.T) {
	s := Service(cluster())
	if s.Name != "c" || s.Spec.ClusterIP != corev1.ClusterIPNone || !s.Spec.PublishNotReadyAddresses {
		t.Errorf("service %s clusterIP %q publishNotReady %v", s.Name, s.Spec.ClusterIP, s.Spec.PublishNotReadyAddresses)
	}
	if len(s.Spec.Ports) != 2 || s.Spec.Ports[0].Port != ClientPort || s.Spec.Ports[1].Port != BusPort {
		t.Errorf("ports %v", s.Spec.Ports)
	}
	if s.Spec.Selector[LabelComponent] != ComponentNode || s.Spec.Selector[LabelCluster] != "c" {
		t.Errorf("selector %v does not select the members", s.Spec.Selector)
	}
}

func TestValkeyNodeInherits(t *testing.T) {
	c := cluster()
	c.Spec.Image = "valkey/valkey:9.0"
	c.Spec.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}
	c.Spec.Scheduling = &valkeyv1.SchedulingSpec{NodeSelector: map[string]string{"pool": "valkey"}, PriorityClassName: "high"}
	c.Spec.Persistence = &valkeyv1.PersistenceSpec{Size: resource.MustParse("1Gi")}
	c.Spec.TLS = &valkeyv1.TLSConfig{SelfSigned: true}
	n := ValkeyNode(c, Position{Shard: 1, Index: 0}, "h1")
	if n.Name != "c-1-0" || n.Spec.ClusterName != "c" || n.Spec.ShardIndex != 1 || n.Spec.NodeIndex != 0 || n.Spec.RoleHint != valkeyv1.RolePrimary {
		t.Errorf("identity: %s %+v", n.Name, n.Spec)
	}
	if n.Spec.Image != "valkey/valkey:9.0" || n.Spec.NodeSelector["pool"] != "valkey" || n.Spec.PriorityClassName != "high" {
		t.Errorf("inherited fields: %+v", n.Spec)
	}
	if n.Spec.Persistence == nil || n.Spec.Persistence.Size.String() != "1Gi" || n.Spec.Resources.Limits.Memory().String() != "1Gi" {
		t.Errorf("persistence %v resources %v", n.Spec.Persistence, n.Spec.Resources)
	}
	if n.Spec.TLS == nil || n.Spec.TLS.Certificate.SecretName != "c-tls" {
		t.Errorf("tls %+v, want the self-signed Secret", n.Spec.TLS)
	}
	if n.Spec.ConfigHash != "h1" || n.Labels[LabelShard] != "1" || n.Labels[LabelNode] != "c-1-0" {
		t.Errorf("config hash %q labels %v", n.Spec.ConfigHash, n.Labels)
	}
	if n.Spec.ServerConfigMapName != "c-config" || n.Spec.UsersACLSecretName != "c-acl" {
		t.Errorf("config %s acl %s", n.Spec.ServerConfigMapName, n.Spec.UsersACLSecretName)
	}
	if n.Spec.TerminationGracePeriodSeconds == nil || *n.Spec.TerminationGracePeriodSeconds < MinGracePeriodSeconds(c) {
		t.Errorf("grace period %v below the failover minimum %d", n.Spec.TerminationGracePeriodSeconds, MinGracePeriodSeconds(c))
	}
	// The cluster's spec is never aliased: changing the node leaves the cluster alone.
	n.Spec.Persistence.Size = resource.MustParse("2Gi")
	if c.Spec.Persistence.Size.String() != "1Gi" {
		t.Error("the node shares the cluster's persistence")
	}
	if r := ValkeyNode(c, Position{Shard: 1, Index: 2}, "h1").Spec.RoleHint; r != valkeyv1.RoleReplica {
		t.Errorf("index 2 role hint %s", r)
	}
	if img := ValkeyNode(cluster(), Position{}, "").Spec.Image; img != DefaultImage {
		t.Errorf("default image %s", img)
	}
}

func TestUserTLSSecret(t *testing.T) {
	c := cluster()
	c.Spec.TLS = &valkeyv1.TLSConfig{Certificate: valkeyv1.CertificateRef{SecretName: "mine"}}
	if n := ValkeyNode(c, Position{}, ""); n.Spec.TLS == nil || n.Spec.TLS.Certificate.SecretName != "mine" {
		t.Errorf("tls %+v, want the user's Secret", n.Spec.TLS)
	}
}

func TestPodDisruptionBudget(t *testing.T) {
	p := PodDisruptionBudget(cluster())
	if p.Spec.MaxUnavailable == nil || p.Spec.MaxUnavailable.IntValue() != 1 || p.Spec.MinAvailable != nil {
		t.Errorf("budget %+v", p.Spec)
	}
	if p.Spec.Selector.MatchLabels[LabelComponent] != ComponentNode {
		t.Errorf("selector %v", p.Spec.Selector)
	}
}

func TestAffinity(t *testing.T) {
	pref := valkeyv1.SpreadConstraint{Mode: valkeyv1.SpreadPreferred}
	req := valkeyv1.SpreadConstraint{Mode: valkeyv1.SpreadRequired}
	for _, tc := range []struct {
		name        string
		sched       *valkeyv1.SchedulingSpec
		pos         Position
		preferred   []string // topology key / selector shard label ("" = none) of each preferred term
		required    []string
		zonesPinned bool
	}{
		{name: "default: a shard's members prefer different nodes", pos: Position{1, 1}, preferred: []string{TopologyNode + "/1"}},
		{name: "disabled", sched: &valkeyv1.SchedulingSpec{Node: &valkeyv1.NodeScheduling{}}, pos: Position{1, 0}},
		{name: "required shard, preferred pods, primaries on index 0", pos: Position{2, 0},
			sched:     &valkeyv1.SchedulingSpec{Node: &valkeyv1.NodeScheduling{Spread: valkeyv1.NodeSpread{Shard: req, Pods: pref, Primaries: req}}},
			preferred: []string{TopologyNode + "/"}, required: []string{TopologyNode + "/2", TopologyNode + "/"}},
		{name: "primaries spread leaves replicas alone", pos: Position{2, 1},
			sched: &valkeyv1.SchedulingSpec{Node: &valkeyv1.NodeScheduling{Spread: valkeyv1.NodeSpread{Primaries: req}}}},
		{name: "zones: shard spread and pinning", pos: Position{0, 0},
			sched:     &valkeyv1.SchedulingSpec{Zone: &valkeyv1.ZoneScheduling{Spread: valkeyv1.ZoneSpread{Shard: pref}, Pinning: &valkeyv1.ZonePinning{Zones: []string{"a", "b"}}}},
			preferred: []string{TopologyNode + "/0", TopologyZone + "/0"}, zonesPinned: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cluster()
			c.Spec.Scheduling = tc.sched
			a := ValkeyNode(c, tc.pos, "").Spec.Affinity
			var gotPref, gotReq []string
			if a != nil && a.PodAntiAffinity != nil {
				for _, w := range a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
					gotPref = append(gotPref, w.PodAffinityTerm.TopologyKey+"/"+w.PodAffinityTerm.LabelSelector.MatchLabels[LabelShard])
				}
				for _, r := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
					gotReq = append(gotReq, r.TopologyKey+"/"+r.LabelSelector.MatchLabels[LabelShard])
				}
			}
			if fmt.Sprint(gotPref) != fmt.Sprint(tc.preferred) || fmt.Sprint(gotReq) != fmt.Sprint(tc.required) {
				t.Errorf("preferred %v required %v; want %v and %v", gotPref, gotReq, tc.preferred, tc.required)
			}
			pinned := a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil
			if pinned != tc.zonesPinned {
				t.Errorf("zone pinning %v, want %v", pinned, tc.zonesPinned)
			}
		})
	}
	// The user's own affinity is kept, and every required node term gets the zone.
	c := cluster()
	c.Spec.Scheduling = &valkeyv1.SchedulingSpec{
		Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "pool", Operator: corev1.NodeSelectorOpIn, Values: []string{"v"}}}}, {}}}}},
		Zone: &valkeyv1.ZoneScheduling{Pinning: &valkeyv1.ZonePinning{Zones: []string{"a"}}},
	}
	a := ValkeyNode(c, Position{}, "").Spec.Affinity
	for i, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		if last := term.MatchExpressions[len(term.MatchExpressions)-1]; last.Key != TopologyZone {
			t.Errorf("term %d lacks the zone: %v", i, term.MatchExpressions)
		}
	}
	if c.Spec.Scheduling.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0].Key != "pool" || len(c.Spec.Scheduling.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions) != 1 {
		t.Error("the cluster's own affinity was changed")
	}
}
