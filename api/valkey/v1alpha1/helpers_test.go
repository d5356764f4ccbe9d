package v1alpha1

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestEffectiveScheduling(t *testing.T) {
	legacy := ValkeyClusterSpec{
		Tolerations:  []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}},
		NodeSelector: map[string]string{"pool": "valkey"},
	}
	got := legacy.EffectiveScheduling()
	if !reflect.DeepEqual(got.Tolerations, legacy.Tolerations) || got.NodeSelector["pool"] != "valkey" || got.Affinity != nil {
		t.Errorf("legacy fields: got %+v", got)
	}
	got.NodeSelector["pool"] = "changed"
	if legacy.NodeSelector["pool"] != "valkey" {
		t.Error("EffectiveScheduling returned the spec's own map; a caller's edit changed the spec")
	}

	grouped := ValkeyClusterSpec{Scheduling: &SchedulingSpec{PriorityClassName: "high", NodeSelector: map[string]string{"pool": "b"}}}
	if got := grouped.EffectiveScheduling(); got.PriorityClassName != "high" || got.NodeSelector["pool"] != "b" {
		t.Errorf("spec.scheduling: got %+v", got)
	}
}

func TestEffectiveTLS(t *testing.T) {
	cases := []struct {
		name string
		spec ValkeyClusterSpec
		want TLSSettings
	}{
		{name: "off", want: TLSSettings{}},
		{name: "spec.tls secret", spec: ValkeyClusterSpec{TLS: &TLSConfig{Certificate: CertificateRef{SecretName: "a"}}},
			want: TLSSettings{Enabled: true, SecretName: "a"}},
		{name: "spec.tls self-signed", spec: ValkeyClusterSpec{TLS: &TLSConfig{SelfSigned: true}},
			want: TLSSettings{Enabled: true, SelfSigned: true}},
		{name: "networking.tls", spec: ValkeyClusterSpec{Networking: &NetworkingSpec{TLS: &TLSSpec{Certificates: TLSCertificates{Server: CertificateSource{SecretName: "b"}}}}},
			want: TLSSettings{Enabled: true, SecretName: "b"}},
		{name: "networking without tls", spec: ValkeyClusterSpec{Networking: &NetworkingSpec{ClusterDomain: "x"}}, want: TLSSettings{}},
	}
	for _, tc := range cases {
		if got := tc.spec.EffectiveTLS(); got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestDefaultsOfOptionalFields(t *testing.T) {
	var empty ValkeyClusterSpec
	if empty.PDBMode() != PDBModeCluster || empty.PreferredEndpointType() != PreferredEndpointTypeIP || empty.ClusterDomain() != "cluster.local" {
		t.Errorf("defaults: pdb %q, endpoint %q, domain %q", empty.PDBMode(), empty.PreferredEndpointType(), empty.ClusterDomain())
	}
	set := ValkeyClusterSpec{
		PodDisruptionBudget: &PodDisruptionBudgetConfig{Mode: PDBModeDisabled},
		Networking:          &NetworkingSpec{ClusterDomain: "corp.local", Discovery: &DiscoverySpec{PreferredEndpointType: PreferredEndpointTypeHostname}},
	}
	if set.PDBMode() != PDBModeDisabled || set.PreferredEndpointType() != PreferredEndpointTypeHostname || set.ClusterDomain() != "corp.local" {
		t.Errorf("set: pdb %q, endpoint %q, domain %q", set.PDBMode(), set.PreferredEndpointType(), set.ClusterDomain())
	}
	f := false
	if (&UserACLSpec{}).IsEnabled() != true || (&UserACLSpec{Enabled: &f}).IsEnabled() != false {
		t.Error("IsEnabled: unset must mean enabled, false disabled")
	}
}
