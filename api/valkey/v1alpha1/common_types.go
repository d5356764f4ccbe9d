package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// WorkloadType is the kind of workload a ValkeyNode runs its single pod with.
// +kubebuilder:validation:Enum=StatefulSet;Deployment
type WorkloadType string

const (
	// WorkloadTypeStatefulSet gives the pod a stable name and allows persistence.
	WorkloadTypeStatefulSet WorkloadType = "StatefulSet"
	// WorkloadTypeDeployment is for cache-only clusters without persistence.
	WorkloadTypeDeployment WorkloadType = "Deployment"
)

// PersistenceSpec is the PVC each node keeps its data on.
// +kubebuilder:validation:XValidation:rule="quantity(self.size).isGreaterThan(quantity('0'))",message="persistence.size must be a positive quantity such as 1Gi"
type PersistenceSpec struct {
	// Size requested for each node's PVC; it can grow (the PVC is expanded) but never
	// shrink.
	// +required
	Size resource.Quantity `json:"size"`

	// StorageClassName of the PVCs; unset means the namespace's default class. Fixed once
	// set, since a bound PVC cannot change class.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	StorageClassName *string `json:"storageClassName,omitempty"`

	// ReclaimPolicy says whether a node's PVC outlives its ValkeyNode (Retain) or goes
	// with it (Delete).
	// +kubebuilder:validation:Enum=Retain;Delete
	// +kubebuilder:default=Retain
	// +optional
	ReclaimPolicy PersistentVolumeClaimReclaimPolicy `json:"reclaimPolicy,omitempty"`
}

// PersistentVolumeClaimReclaimPolicy is what happens to a node's PVC when its ValkeyNode is
// deleted.
type PersistentVolumeClaimReclaimPolicy string

const (
	// ReclaimRetain keeps the PVC.
	ReclaimRetain PersistentVolumeClaimReclaimPolicy = "Retain"
	// ReclaimDelete deletes the PVC with its ValkeyNode.
	ReclaimDelete PersistentVolumeClaimReclaimPolicy = "Delete"
)

// TLSConfig turns on TLS with a certificate from a Secret the user names, or one the
// operator generates (selfSigned, not in upstream).
// +kubebuilder:validation:XValidation:rule="(has(self.certificate) && has(self.certificate.secretName) && size(self.certificate.secretName) > 0) != (has(self.selfSigned) && self.selfSigned)",message="tls needs exactly one certificate source: name the Secret holding ca.crt, tls.crt and tls.key in tls.certificate.secretName, or set tls.selfSigned: true for the operator to generate one"
type TLSConfig struct {
	// Certificate names the Secret with ca.crt (the CA clients and peers trust), tls.crt
	// (the node certificate or chain) and tls.key.
	// +optional
	Certificate CertificateRef `json:"certificate,omitempty"`

	// SelfSigned has the operator generate a CA and node certificate into a Secret it owns.
	// Not in upstream.
	// +optional
	SelfSigned bool `json:"selfSigned,omitempty"`
}

// CertificateRef names a Secret in the cluster's namespace.
type CertificateRef struct {
	// SecretName is the Secret's name.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="size(self) == 0 || self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="tls.certificate.secretName must be a Secret name: lowercase letters, digits, '-' and '.'"
	// +optional
	SecretName string `json:"secretName,omitempty"`
}

// TLSSpec is TLS in upstream's newer networking.tls shape.
type TLSSpec struct {
	// Certificates are the certificate slots; today only the server's.
	// +required
	Certificates TLSCertificates `json:"certificates"`
}

// TLSCertificates holds the certificate slots.
type TLSCertificates struct {
	// Server is the node identity shown to clients and peers, and their trust root.
	// +required
	Server CertificateSource `json:"server"`
}

// CertificateSource is where a certificate and its key come from.
type CertificateSource struct {
	// SecretName names a Secret with ca.crt, tls.crt and tls.key.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="networking.tls.certificates.server.secretName must name a Secret: lowercase letters, digits, '-' and '.'"
	// +required
	SecretName string `json:"secretName"`
}

// ExporterSpec is the Prometheus exporter sidecar.
type ExporterSpec struct {
	// Image of the exporter; empty means the operator's default.
	// +kubebuilder:validation:MaxLength=512
	// +optional
	Image string `json:"image,omitempty"`

	// Resources of the exporter container.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// Enabled runs the sidecar.
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// SecurityContext replaces the exporter container's default one.
	// +optional
	SecurityContext *corev1.SecurityContext `json:"securityContext,omitempty"`

	// Args are extra command-line arguments of the exporter; the exporter has a few dozen
	// flags, so 64 is plenty.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=1024
	// +optional
	Args []string `json:"args,omitempty"`

	// ServiceMonitor is the Prometheus Operator ServiceMonitor the operator writes for the
	// cluster while the exporter runs. Unset means one is written (when the
	// monitoring.coreos.com CRDs are installed). Read on ValkeyClusters only.
	// +optional
	ServiceMonitor *ServiceMonitorSpec `json:"serviceMonitor,omitempty"`
}

// ServiceMonitorSpec is the ServiceMonitor of a cluster whose exporter runs.
type ServiceMonitorSpec struct {
	// Enabled writes the ServiceMonitor; unset means true. False deletes the one the
	// operator wrote.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`

	// Labels are added to the ServiceMonitor's own labels, for a Prometheus whose
	// serviceMonitorSelector asks for some (kube-prometheus-stack's release label, for
	// example). The operator's labels win over these.
	// +kubebuilder:validation:MaxProperties=32
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
}

// ServiceMonitorEnabled says whether the cluster's ServiceMonitor is wanted: the exporter
// runs and spec.exporter.serviceMonitor.enabled is not false.
func (e ExporterSpec) ServiceMonitorEnabled() bool {
	return e.Enabled && (e.ServiceMonitor == nil || e.ServiceMonitor.Enabled == nil || *e.ServiceMonitor.Enabled)
}

// UserACLSpec is one ACL user, created on every node.
// +kubebuilder:validation:XValidation:rule="!(has(self.nopass) && self.nopass && has(self.passwordSecret) && has(self.passwordSecret.keys) && size(self.passwordSecret.keys) > 0)",message="a user has either nopass: true or passwordSecret.keys, not both: remove one"
type UserACLSpec struct {
	// Name of the user.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('_')",message="user names starting with '_' are reserved for the operator's internal users: rename the user"
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Za-z0-9_][A-Za-z0-9._@-]*$')",message="user names may contain only letters, digits, '.', '-', '_' and '@' (no spaces): rename the user"
	// +kubebuilder:validation:XValidation:rule="!(self in ['valkey-operator', 'valkey-replication', 'valkey-exporter'])",message="user names valkey-operator, valkey-replication and valkey-exporter are reserved for the operator's own users: rename the user"
	// +required
	Name string `json:"name"`

	// Enabled lets the user log in ("on"); false keeps its rules but refuses logins.
	// A pointer, so that a Go client can send false (a bool false would be omitted and
	// defaulted back to true).
	// +kubebuilder:default=true
	// +optional
	Enabled *bool `json:"enabled,omitempty"`

	// PasswordSecret is where the user's passwords are; several keys allow rotation.
	// +optional
	PasswordSecret PasswordSecretSpec `json:"passwordSecret,omitempty"`

	// NoPassword lets the user log in with any password ("nopass").
	// +optional
	NoPassword bool `json:"nopass,omitempty"`

	// ResetPassword clears the user's passwords before applying the others ("resetpass").
	// +optional
	ResetPassword bool `json:"resetpass,omitempty"`

	// Commands the user may and may not run.
	// +optional
	Commands CommandsACLSpec `json:"commands,omitempty"`

	// Keys the user may access.
	// +optional
	Keys KeysACLSpec `json:"keys,omitempty"`

	// Channels the user may publish and subscribe to.
	// +optional
	Channels ChannelsACLSpec `json:"channels,omitempty"`

	// RawACL is appended to the generated rules as written, e.g. "+@all -@admin ~* &*".
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:XValidation:rule="!self.contains('\\n') && !self.contains('\\r')",message="permissions must be a single line: a newline would start another ACL rule"
	// +optional
	RawACL string `json:"permissions,omitempty"`
}

// PasswordSecretSpec is a Secret holding a user's passwords.
type PasswordSecretSpec struct {
	// Name of the Secret; empty means <cluster>-users.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="passwordSecret.name must be a Secret name: lowercase letters, digits, '-' and '.'"
	// +optional
	Name string `json:"name,omitempty"`

	// Keys of the Secret holding passwords; empty means the user's name.
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:Pattern=`^[-._a-zA-Z0-9]+$`
	// +optional
	Keys []string `json:"keys,omitempty"`
}

// CommandsACLSpec lists commands (get), subcommands (client|setname) and categories
// (@read), written without the + or - prefix.
type CommandsACLSpec struct {
	// Allow is what the user may run ("+").
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.all(c, c.matches('^@?[A-Za-z0-9][A-Za-z0-9._-]*(\\\\|[A-Za-z0-9._-]+)?$'))",message="commands.allow entries are a command (get), a subcommand (client|setname) or a category (@read), without + or -"
	// +optional
	Allow []string `json:"allow,omitempty"`

	// Deny is what the user may not run ("-").
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.all(c, c.matches('^@?[A-Za-z0-9][A-Za-z0-9._-]*(\\\\|[A-Za-z0-9._-]+)?$'))",message="commands.deny entries are a command (flushall), a subcommand (config|set) or a category (@admin), without + or -"
	// +optional
	Deny []string `json:"deny,omitempty"`
}

// KeysACLSpec lists key glob patterns by access.
type KeysACLSpec struct {
	// ReadWrite patterns ("~pattern").
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=512
	// +kubebuilder:validation:items:Pattern=`^\S+$`
	// +optional
	ReadWrite []string `json:"readWrite,omitempty"`

	// ReadOnly patterns ("%R~pattern").
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=512
	// +kubebuilder:validation:items:Pattern=`^\S+$`
	// +optional
	ReadOnly []string `json:"readOnly,omitempty"`

	// WriteOnly patterns ("%W~pattern").
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=512
	// +kubebuilder:validation:items:Pattern=`^\S+$`
	// +optional
	WriteOnly []string `json:"writeOnly,omitempty"`
}

// ChannelsACLSpec lists Pub/Sub channel patterns.
type ChannelsACLSpec struct {
	// Patterns of channels ("&pattern").
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=512
	// +kubebuilder:validation:items:Pattern=`^\S+$`
	// +optional
	Patterns []string `json:"patterns,omitempty"`
}

// ConfigValue is the value of one valkey.conf directive.
// +kubebuilder:validation:MaxLength=4096
// +kubebuilder:validation:XValidation:rule="!self.contains('\\n') && !self.contains('\\r')",message="config values must be a single line: a newline would add another directive"
type ConfigValue string
