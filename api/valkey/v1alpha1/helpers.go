package v1alpha1

// The spec accepts a few settings in two places (upstream moved them between releases);
// these helpers are the one place that decides which applies, so the controller never
// reads the raw fields.

// IsEnabled reports whether the user may log in; unset means enabled, as the CRD default.
func (u *UserACLSpec) IsEnabled() bool {
	return u.Enabled == nil || *u.Enabled
}

// EffectiveScheduling is spec.scheduling, or the earlier top-level tolerations,
// nodeSelector and affinity when spec.scheduling is unset (admission refuses both).
func (s *ValkeyClusterSpec) EffectiveScheduling() SchedulingSpec {
	if s.Scheduling != nil {
		return *s.Scheduling.DeepCopy()
	}
	legacy := SchedulingSpec{Tolerations: s.Tolerations, NodeSelector: s.NodeSelector, Affinity: s.Affinity}
	return *legacy.DeepCopy()
}

// TLSSettings is the cluster's TLS, wherever the spec put it.
type TLSSettings struct {
	// Enabled turns TLS on for clients, replication and the cluster bus.
	Enabled bool
	// SecretName is the user's certificate Secret; empty when the operator generates one.
	SecretName string
	// SelfSigned has the operator generate the CA and certificate.
	SelfSigned bool
}

// EffectiveTLS reads spec.tls, or spec.networking.tls (admission refuses both).
func (s *ValkeyClusterSpec) EffectiveTLS() TLSSettings {
	switch {
	case s.TLS != nil:
		return TLSSettings{Enabled: true, SecretName: s.TLS.Certificate.SecretName, SelfSigned: s.TLS.SelfSigned}
	case s.Networking != nil && s.Networking.TLS != nil:
		return TLSSettings{Enabled: true, SecretName: s.Networking.TLS.Certificates.Server.SecretName}
	default:
		return TLSSettings{}
	}
}

// PDBMode is the PodDisruptionBudget policy: Disabled when set so, else Cluster (unset,
// and a mode this version does not know, as upstream's API asks of its clients).
func (s *ValkeyClusterSpec) PDBMode() PDBMode {
	if s.PodDisruptionBudget != nil && s.PodDisruptionBudget.Mode == PDBModeDisabled {
		return PDBModeDisabled
	}
	return PDBModeCluster
}

// PreferredEndpointType is what nodes announce; unset means IP.
func (s *ValkeyClusterSpec) PreferredEndpointType() PreferredEndpointType {
	if s.Networking == nil || s.Networking.Discovery == nil || s.Networking.Discovery.PreferredEndpointType == "" {
		return PreferredEndpointTypeIP
	}
	return s.Networking.Discovery.PreferredEndpointType
}

// ClusterDomain is the DNS suffix of announced hostnames; unset means cluster.local.
func (s *ValkeyClusterSpec) ClusterDomain() string {
	if s.Networking == nil || s.Networking.ClusterDomain == "" {
		return "cluster.local"
	}
	return s.Networking.ClusterDomain
}
