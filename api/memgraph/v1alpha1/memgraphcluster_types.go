package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MemgraphClusterSpec is the desired state of a MemgraphCluster: a Raft group of
// coordinators and the data instances they register, one MAIN and the rest SYNC replicas.
// Every field has a schema default mirrored by a Go constant (defaults.go), so builders
// behave the same on a spec that never passed admission.
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.auth) || has(self.auth)",message="spec.auth cannot be removed: Memgraph keeps the admin user in its data, so the operator must keep logging in; change the Secret's password instead"
// +kubebuilder:validation:XValidation:rule="has(self.tls) == has(oldSelf.tls)",message="spec.tls cannot be added or removed on a live cluster: a Memgraph with Bolt TLS refuses plain Bolt, so the operator could not reach the pods not yet restarted and the roll would stall; delete the MemgraphCluster (its claims are retained by default) and create it with the setting you want, or change spec.tls.bolt.secretName to switch certificates"
// +kubebuilder:validation:XValidation:rule="has(self.secrets) != has(self.license)",message="spec.secrets is required (name, licenseKey, organizationKey of the license Secret); spec.license is its old name, kept only until the operator moves a stored cluster's value to spec.secrets: set spec.secrets and remove spec.license"
// +kubebuilder:validation:XValidation:rule="!has(self.license) || (oldSelf.hasValue() && has(oldSelf.value().license))",message="spec.license was renamed spec.secrets (secretName became name): set spec.secrets instead",optionalOldSelf=true
// +kubebuilder:validation:XValidation:rule="!has(self.replication) || !has(self.coordinatorSettings) || !has(self.replication.mode) || self.replication.mode != 'ASYNC' || !has(self.coordinatorSettings.syncFailoverOnly) || !self.coordinatorSettings.syncFailoverOnly || (has(self.replication.instances) && self.replication.instances.exists(i, i.mode != 'ASYNC'))",message="replication.mode ASYNC with coordinatorSettings.syncFailoverOnly true leaves an automatic failover no replica it may promote (it promotes only SYNC and STRICT_SYNC replicas): set coordinatorSettings.syncFailoverOnly to false, or give one instance SYNC or STRICT_SYNC in replication.instances"
// +kubebuilder:validation:XValidation:rule="has(self.bootstrap) == has(oldSelf.bootstrap)",message="spec.bootstrap is set when a cluster is created and never added or removed: a restore into a cluster that already holds data would overwrite it; create a new MemgraphCluster with spec.bootstrap.backup instead"
// +kubebuilder:validation:XValidation:rule="!has(self.bootstrap) || has(self.backup)",message="spec.bootstrap needs spec.backup.objectStore: the restore reads the backup from that store with its credentials"
// +kubebuilder:validation:XValidation:rule="!has(self.metricsExporter) || !has(self.metricsExporter.port) || !has(self.ports) || !(has(self.ports.bolt) && has(self.ports.management) && has(self.ports.coordinator) && has(self.ports.replication) && has(self.ports.metrics)) || !(self.metricsExporter.port in [self.ports.bolt, self.ports.management, self.ports.coordinator, self.ports.replication, self.ports.metrics])",message="metricsExporter.port must differ from spec.ports (bolt, management, coordinator, replication, metrics): memgraph listens on those in the same pod; choose another port, such as 9115"
// +kubebuilder:validation:XValidation:rule="!has(self.metricsExporter) || !has(self.metricsExporter.port) || !has(self.backup) || !has(self.backup.agentPort) || self.backup.agentPort != self.metricsExporter.port",message="metricsExporter.port must differ from backup.agentPort: both sidecars run in every data-instance pod; choose another port"
type MemgraphClusterSpec struct {
	// Coordinators is the number of coordinators in the Raft group: odd and at least 3,
	// since an even count tolerates no more failures than the odd count below it.
	// At most 9 (MaxCoordinators): every Raft write waits for a majority, so a larger
	// group only slows commits and elections and tolerates failures no real cluster sees.
	// +kubebuilder:validation:XValidation:rule="self >= 3 && self % 2 == 1",message="coordinators must be an odd number of at least 3 (3, 5, 7, ...) so the Raft group keeps a quorum: set spec.coordinators to 3 or another odd count"
	// +kubebuilder:validation:XValidation:rule="self <= 9",message="coordinators must be at most 9: a larger Raft group only slows every commit and election; set spec.coordinators to 3, 5, 7 or 9"
	// +kubebuilder:default=3
	// +optional
	Coordinators int32 `json:"coordinators,omitempty"`

	// DataInstances is the number of data instances: one MAIN, the rest replicas. At most
	// 64 (MaxDataInstances): each holds the whole graph and the MAIN streams every commit to
	// each of them, so real clusters run a handful; the bound keeps what the operator plans
	// and registers (one pod, claim and registration per instance) small.
	// +kubebuilder:validation:XValidation:rule="self >= 1",message="dataInstances must be at least 1: set spec.dataInstances to 1 or more (2 or more for failover)"
	// +kubebuilder:validation:XValidation:rule="self <= 64",message="dataInstances must be at most 64: every data instance holds the whole graph and the MAIN replicates each commit to all of them; set spec.dataInstances to 64 or fewer"
	// +kubebuilder:default=2
	// +optional
	DataInstances int32 `json:"dataInstances,omitempty"`

	// Image of the coordinators and data instances.
	// +kubebuilder:default={}
	// +optional
	Image ImageSpec `json:"image,omitempty"`

	// ImagePullSecrets are Secrets in the cluster's namespace for pulling Image.
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +optional
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`

	// Secrets names the Secret with the enterprise license and organization name, in
	// the HA Helm chart's vocabulary (secrets.name, licenseKey, organizationKey); Memgraph
	// refuses high availability without both.
	// Required: a rule on the spec asks for exactly one of Secrets and the deprecated License.
	// +optional
	Secrets SecretsSpec `json:"secrets,omitzero"`

	// License is Secrets' name before v1alpha1 took the HA chart's vocabulary. Deprecated:
	// it is here only so clusters stored by an earlier operator keep their license Secret
	// (the API server would otherwise drop it on read); the operator moves it to Secrets
	// when it starts and new clusters cannot set it.
	// +optional
	License *LicenseSpec `json:"license,omitempty"`

	// Auth names the Secret with Memgraph's admin user: every pod gets it as
	// MEMGRAPH_USER/MEMGRAPH_PASSWORD and the operator logs in with it. Without it the
	// instances run without Bolt auth.
	// +optional
	Auth *AuthSpec `json:"auth,omitempty"`

	// TLS turns on Bolt over TLS on every pod of both roles, from a Secret of the
	// cluster's namespace; the operator then dials bolt+s and verifies the pods against
	// the Secret's CA. It can be set only when the cluster is created.
	// +optional
	TLS *TLSSpec `json:"tls,omitempty"`

	// Replication is how the MAIN replicates to the data instances (REGISTER INSTANCE's
	// mode) and so what an automatic failover may promote.
	// +kubebuilder:default={}
	// +optional
	Replication ReplicationSpec `json:"replication,omitempty"`

	// CoordinatorSettings are the cluster-wide settings the coordinators keep in Raft
	// (SET COORDINATOR SETTING); the operator sets each one whose value differs from
	// SHOW COORDINATOR SETTINGS.
	// +kubebuilder:default={}
	// +optional
	CoordinatorSettings CoordinatorSettings `json:"coordinatorSettings,omitempty"`

	// Storage is each role's lib and log volumes and what happens to them.
	// +kubebuilder:default={}
	// +optional
	Storage StorageSpec `json:"storage,omitempty"`

	// ClusterDomain is the DNS domain of the Kubernetes cluster, the suffix of every
	// address the operator advertises and registers. Immutable. At most 76 characters
	// (MaxClusterDomainLength): the longest address,
	// <name>-coordinator-<n>.<name>-coordinators.<namespace>.svc.<clusterDomain>, takes 177
	// characters before it and a DNS name holds 253.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.size() <= 76",message="clusterDomain must be at most 76 characters: the pods' addresses <pod>.<service>.<namespace>.svc.<clusterDomain> must stay within the 253 of a DNS name"
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="clusterDomain must be a DNS domain such as cluster.local: lowercase letters, digits, '-' and '.'"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="clusterDomain is immutable: the coordinators' Raft membership and every registration carry addresses under it; create a new cluster to change it"
	// +kubebuilder:default=cluster.local
	// +optional
	ClusterDomain string `json:"clusterDomain,omitempty"`

	// Ports the instances listen on. Immutable, since every registration carries them.
	// +kubebuilder:default={}
	// +optional
	Ports PortsSpec `json:"ports,omitempty"`

	// ExternalAccessConfig exposes Bolt outside Kubernetes (external_types.go); unset,
	// the cluster is reached from inside only, at its Service <name>.
	// +optional
	ExternalAccessConfig *ExternalAccessConfig `json:"externalAccessConfig,omitempty"`

	// ServiceMonitor is the Prometheus Operator ServiceMonitor the operator writes for the
	// members' metrics port (spec.ports.metrics) when the monitoring.coreos.com CRDs are
	// installed. Unset means one is written.
	// +optional
	ServiceMonitor *ServiceMonitorSpec `json:"serviceMonitor,omitempty"`

	// MetricsExporter is the sidecar through which Prometheus reads each member's
	// metrics: Memgraph's metrics port answers a JSON document Prometheus cannot parse, so
	// every coordinator and data instance runs the operator's metrics-exporter beside
	// memgraph, which serves the same numbers as Prometheus text under
	// memgraph/prometheus-exporter's names, and the ServiceMonitor scrapes it. Unset means
	// it runs.
	// +optional
	MetricsExporter *MetricsExporterSpec `json:"metricsExporter,omitempty"`

	// Probes are the timings of each role's TCP probes (data instances on the Bolt port,
	// coordinators on the coordinator port).
	// +kubebuilder:default={}
	// +optional
	Probes RoleProbes `json:"probes,omitempty"`

	// Resources of each role's memgraph container.
	// +optional
	Resources RoleResources `json:"resources,omitempty"`

	// Labels added to each role's pods, StatefulSet and Service. The operator's own labels
	// (those it selects and numbers its pods by) cannot be set.
	// +optional
	Labels RoleLabels `json:"labels,omitempty"`

	// Annotations added to each role's pods (the pod template: a change rolls the role's
	// pods, one at a time, as any template change does). Keys under memgraph.com/ are the
	// operator's and cannot be set.
	// +optional
	Annotations RoleAnnotations `json:"annotations,omitempty"`

	// ExtraEnv adds plain environment variables to each role's container. Values are
	// not secret by construction (no valueFrom); the license and identity are the
	// operator's.
	// +optional
	ExtraEnv RoleEnv `json:"extraEnv,omitempty"`

	// ExtraArgs adds memgraph command-line flags to each role's container, after the
	// operator's. Ports, identity and license are set elsewhere in the spec.
	// +optional
	ExtraArgs RoleArgs `json:"extraArgs,omitempty"`

	// Affinity of each role's pods. Without a podAntiAffinity of its own a role gets the
	// operator's: prefer a node no other member of the role runs on (weight 100 on
	// kubernetes.io/hostname), so one node's failure takes one coordinator and one data
	// instance at most while there are nodes enough, and pods still schedule when there
	// are not. A nodeAffinity or podAffinity set here keeps that default.
	// +optional
	Affinity RoleAffinity `json:"affinity,omitempty"`

	// NodeSelector of each role's pods.
	// +optional
	NodeSelector RoleNodeSelector `json:"nodeSelector,omitempty"`

	// Tolerations of each role's pods (the HA chart's tolerations.coordinators and
	// tolerations.data).
	// +optional
	Tolerations RoleTolerations `json:"tolerations,omitempty"`

	// TopologySpreadConstraints of each role's pods. A constraint without a labelSelector
	// spreads the role's own pods (the operator fills in the role's selector).
	// +optional
	TopologySpreadConstraints RoleTopologySpreadConstraints `json:"topologySpreadConstraints,omitempty"`

	// PriorityClassName of each role's pods.
	// +optional
	PriorityClassName RolePriorityClassName `json:"priorityClassName,omitempty"`

	// TerminationGracePeriodSeconds of each role's pods (the HA chart's
	// container.<role>.terminationGracePeriodSeconds). Data instances default to 1800:
	// Memgraph writes a snapshot of the whole graph on a clean exit
	// (--storage-snapshot-on-exit, on in the image's configuration), and a kill before it
	// finishes leaves the restart to recover from the older snapshot and the WAL. The
	// kubelet waits only while the process runs, so a fast exit is not slowed. Coordinators
	// default to 30: their Raft log is on disk as it is written.
	// +kubebuilder:default={}
	// +optional
	TerminationGracePeriodSeconds RoleTerminationGracePeriod `json:"terminationGracePeriodSeconds,omitempty"`

	// Backup is where MemgraphBackups of this cluster are stored; setting it adds the
	// backup agent sidecar to the data-instance pods (a roll). Not in upstream.
	// +optional
	Backup *BackupConfiguration `json:"backup,omitempty"`

	// Bootstrap starts a new cluster from a backup. Set at creation only.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.bootstrap is immutable: create a new cluster to restore another backup"
	// +optional
	Bootstrap *BootstrapSpec `json:"bootstrap,omitempty"`

	// LostNodes is what happens to a member whose volumes are on a lost Kubernetes node
	// (deleted, or NotReady for longer than gracePeriod): on local volumes pinned to one
	// node its pod can never start anywhere else. Automatic (the default) replaces it
	// once that loses nothing: a data instance only while another one serves as MAIN, a
	// coordinator only while the others keep a Raft quorum without it. Not in upstream.
	// +optional
	LostNodes *LostNodesSpec `json:"lostNodes,omitempty"`
}

// ReplicationMode is REGISTER INSTANCE's replication mode, in Memgraph's words.
// +kubebuilder:validation:Enum=SYNC;ASYNC;STRICT_SYNC
type ReplicationMode string

const (
	// ReplicationSync is SYNC: the MAIN commits, then waits for the replica (Memgraph's default).
	// A failover may lose the last commits a down MAIN did not ship.
	ReplicationSync ReplicationMode = "SYNC"
	// ReplicationAsync is ASYNC: the MAIN does not wait; with syncFailoverOnly (the default) an
	// automatic failover never promotes an ASYNC replica.
	ReplicationAsync ReplicationMode = "ASYNC"
	// ReplicationStrictSync is STRICT_SYNC: two-phase commit, so no failover loses a commit, but the MAIN
	// refuses writes while a STRICT_SYNC replica is down.
	ReplicationStrictSync ReplicationMode = "STRICT_SYNC"
)

// ReplicationSpec is the replication mode of the cluster and of single instances.
// Memgraph refuses a cluster holding both SYNC and STRICT_SYNC replicas; ASYNC mixes with
// either.
// +kubebuilder:validation:XValidation:rule="!has(self.instances) || !((self.mode == 'SYNC' || self.instances.exists(i, i.mode == 'SYNC')) && (self.mode == 'STRICT_SYNC' || self.instances.exists(i, i.mode == 'STRICT_SYNC')))",message="replication mixes SYNC and STRICT_SYNC, which Memgraph refuses in one cluster: make every replication.instances[].mode ASYNC or equal to replication.mode"
type ReplicationSpec struct {
	// Mode of every data instance not named in Instances. Changing it re-registers each
	// replica in turn (UNREGISTER and REGISTER INSTANCE, Memgraph has no other way); a
	// switch between SYNC and STRICT_SYNC goes through ASYNC and moves the MAIN once.
	// +kubebuilder:default=SYNC
	// +optional
	Mode ReplicationMode `json:"mode,omitempty"`

	// Instances override Mode for single data instances, by ordinal (instance
	// <cluster>_data_<ordinal>); an ordinal the cluster does not run is ignored.
	// +kubebuilder:validation:MaxItems=64
	// +listType=map
	// +listMapKey=ordinal
	// +optional
	Instances []InstanceReplication `json:"instances,omitempty"`
}

// InstanceReplication is one data instance's replication mode.
type InstanceReplication struct {
	// Ordinal of the data instance's pod.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=63
	// +required
	Ordinal int32 `json:"ordinal"`
	// Mode of this instance.
	// +required
	Mode ReplicationMode `json:"mode"`
}

// CoordinatorSettings are the coordinator settings the operator keeps, named as
// Memgraph's SET COORDINATOR SETTING names them (instance_down_timeout_sec is
// instanceDownTimeoutSec). Each has Memgraph's default.
// +kubebuilder:validation:XValidation:rule="!has(self.instanceDownTimeoutSec) || !has(self.instanceHealthCheckFrequencySec) || self.instanceDownTimeoutSec >= self.instanceHealthCheckFrequencySec",message="coordinatorSettings.instanceDownTimeoutSec must be at least instanceHealthCheckFrequencySec: an instance is down after a whole timeout without a successful check, so a shorter timeout declares healthy instances down between two checks"
type CoordinatorSettings struct {
	// InstanceDownTimeoutSec is how long a data instance may fail its health checks before
	// the coordinators count it down; a MAIN down that long is failed over.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3600
	// +kubebuilder:default=5
	// +optional
	InstanceDownTimeoutSec int32 `json:"instanceDownTimeoutSec,omitempty"`

	// InstanceHealthCheckFrequencySec is the period of the leader's health checks.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3600
	// +kubebuilder:default=1
	// +optional
	InstanceHealthCheckFrequencySec int32 `json:"instanceHealthCheckFrequencySec,omitempty"`

	// SyncFailoverOnly keeps ASYNC replicas out of an automatic failover, which then
	// promotes only a SYNC or STRICT_SYNC replica (SET INSTANCE TO MAIN is not limited).
	// +kubebuilder:default=true
	// +optional
	SyncFailoverOnly *bool `json:"syncFailoverOnly,omitempty"`
}

// RoleAffinity is both roles' affinity.
type RoleAffinity struct {
	// Coordinators' affinity.
	// +optional
	Coordinators *corev1.Affinity `json:"coordinators,omitempty"`
	// Data instances' affinity.
	// +optional
	Data *corev1.Affinity `json:"data,omitempty"`
}

// RoleNodeSelector is both roles' node selector.
type RoleNodeSelector struct {
	// Coordinators' node selector.
	// +kubebuilder:validation:MaxProperties=64
	// +optional
	Coordinators map[string]LabelValue `json:"coordinators,omitempty"`
	// Data instances' node selector.
	// +kubebuilder:validation:MaxProperties=64
	// +optional
	Data map[string]LabelValue `json:"data,omitempty"`
}

// RoleTolerations is both roles' tolerations.
type RoleTolerations struct {
	// Coordinators' tolerations.
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	// +kubebuilder:validation:XValidation:rule="self.all(t, !has(t.effect) || t.effect in ['NoSchedule', 'PreferNoSchedule', 'NoExecute'])",message="tolerations.coordinators[].effect must be NoSchedule, PreferNoSchedule or NoExecute, or left out to tolerate every effect"
	// +kubebuilder:validation:XValidation:rule="self.all(t, !has(t.operator) || t.operator in ['Exists', 'Equal'])",message="tolerations.coordinators[].operator must be Equal or Exists"
	// +kubebuilder:validation:XValidation:rule="self.all(t, !has(t.operator) || t.operator != 'Exists' || !has(t.value) || t.value == '')",message="tolerations.coordinators[] with operator Exists must have no value: remove the value or use operator Equal"
	// +optional
	Coordinators []corev1.Toleration `json:"coordinators,omitempty"`
	// Data instances' tolerations.
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	// +kubebuilder:validation:XValidation:rule="self.all(t, !has(t.effect) || t.effect in ['NoSchedule', 'PreferNoSchedule', 'NoExecute'])",message="tolerations.data[].effect must be NoSchedule, PreferNoSchedule or NoExecute, or left out to tolerate every effect"
	// +kubebuilder:validation:XValidation:rule="self.all(t, !has(t.operator) || t.operator in ['Exists', 'Equal'])",message="tolerations.data[].operator must be Equal or Exists"
	// +kubebuilder:validation:XValidation:rule="self.all(t, !has(t.operator) || t.operator != 'Exists' || !has(t.value) || t.value == '')",message="tolerations.data[] with operator Exists must have no value: remove the value or use operator Equal"
	// +optional
	Data []corev1.Toleration `json:"data,omitempty"`
}

// RoleTopologySpreadConstraints is both roles' topology spread constraints.
type RoleTopologySpreadConstraints struct {
	// Coordinators' constraints.
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +kubebuilder:validation:XValidation:rule="self.all(c, c.maxSkew >= 1)",message="topologySpreadConstraints.coordinators[].maxSkew must be at least 1"
	// +kubebuilder:validation:XValidation:rule="self.all(c, c.whenUnsatisfiable in ['DoNotSchedule', 'ScheduleAnyway'])",message="topologySpreadConstraints.coordinators[].whenUnsatisfiable must be DoNotSchedule (a hard rule) or ScheduleAnyway (a preference)"
	// +optional
	Coordinators []corev1.TopologySpreadConstraint `json:"coordinators,omitempty"`
	// Data instances' constraints.
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +kubebuilder:validation:XValidation:rule="self.all(c, c.maxSkew >= 1)",message="topologySpreadConstraints.data[].maxSkew must be at least 1"
	// +kubebuilder:validation:XValidation:rule="self.all(c, c.whenUnsatisfiable in ['DoNotSchedule', 'ScheduleAnyway'])",message="topologySpreadConstraints.data[].whenUnsatisfiable must be DoNotSchedule (a hard rule) or ScheduleAnyway (a preference)"
	// +optional
	Data []corev1.TopologySpreadConstraint `json:"data,omitempty"`
}

// RolePriorityClassName is both roles' priority class.
type RolePriorityClassName struct {
	// Coordinators' priority class.
	// +optional
	Coordinators PriorityClassName `json:"coordinators,omitempty"`
	// Data instances' priority class.
	// +optional
	Data PriorityClassName `json:"data,omitempty"`
}

// PriorityClassName names a PriorityClass.
// +kubebuilder:validation:MaxLength=253
// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="priorityClassName must name a PriorityClass: lowercase letters, digits, '-' and '.', such as system-cluster-critical or a class you created"
type PriorityClassName string

// RoleTerminationGracePeriod is both roles' termination grace period.
type RoleTerminationGracePeriod struct {
	// Coordinators' grace period in seconds.
	// +kubebuilder:validation:XValidation:rule="self >= 1 && self <= 86400",message="terminationGracePeriodSeconds.coordinators must be between 1 and 86400 seconds: 0 kills Memgraph without letting it close its Raft log; set 30 or more"
	// +kubebuilder:default=30
	// +optional
	Coordinators *int64 `json:"coordinators,omitempty"`
	// Data instances' grace period in seconds.
	// +kubebuilder:validation:XValidation:rule="self >= 1 && self <= 86400",message="terminationGracePeriodSeconds.data must be between 1 and 86400 seconds: 0 kills Memgraph before it writes its snapshot on exit; set it to how long a snapshot of your graph takes, 1800 by default"
	// +kubebuilder:default=1800
	// +optional
	Data *int64 `json:"data,omitempty"`
}

// ImageSpec is the memgraph image: repository, and a tag or a digest (the digest wins).
type ImageSpec struct {
	// Repository without tag or digest, e.g. memgraph/memgraph or registry:5000/memgraph.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	// +kubebuilder:validation:XValidation:rule="!self.contains('@') && !self.matches(':[^/]*$')",message="image.repository must not carry a tag or digest: move it to image.tag or image.digest"
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]+)?(/[a-z0-9]+([._-]+[a-z0-9]+)*)*$')",message="image.repository must be an image reference such as memgraph/memgraph: lowercase letters, digits, '.', '_', '-', '/' and a registry port"
	// +kubebuilder:default="memgraph/memgraph"
	// +optional
	Repository string `json:"repository,omitempty"`

	// Tag of the image.
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$')",message="image.tag must be a tag such as 3.12.0: letters, digits, '_', '.' and '-', at most 128 characters"
	// +kubebuilder:default="3.12.0"
	// +optional
	Tag string `json:"tag,omitempty"`

	// Digest pins the image (sha256:<64 hex>); it takes precedence over Tag.
	// +kubebuilder:validation:XValidation:rule="self.matches('^sha256:[a-f0-9]{64}$')",message="image.digest must be sha256: followed by 64 lowercase hex digits"
	// +optional
	Digest string `json:"digest,omitempty"`

	// PullPolicy of the image.
	// +kubebuilder:validation:Enum=Always;IfNotPresent;Never
	// +kubebuilder:default=IfNotPresent
	// +optional
	PullPolicy corev1.PullPolicy `json:"pullPolicy,omitempty"`
}

// SecretsSpec names the Secret whose two keys become MEMGRAPH_ENTERPRISE_LICENSE and
// MEMGRAPH_ORGANIZATION_NAME. The operator never reads it; the kubelet injects it.
// +kubebuilder:validation:XValidation:rule="self.licenseKey != self.organizationKey",message="secrets.licenseKey and secrets.organizationKey must name different keys of the Secret: the license and the organization name are two values"
type SecretsSpec struct {
	// Name of the Secret in the cluster's namespace.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="secrets.name must name a Secret: lowercase letters, digits, '-' and '.'"
	// +required
	Name string `json:"name"`

	// LicenseKey is the Secret key holding the enterprise license.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[-._a-zA-Z0-9]+$')",message="secrets.licenseKey must be a Secret key: letters, digits, '-', '_' and '.'"
	// +kubebuilder:default=MEMGRAPH_ENTERPRISE_LICENSE
	// +optional
	LicenseKey string `json:"licenseKey,omitempty"`

	// OrganizationKey is the Secret key holding the organization name the license is for.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[-._a-zA-Z0-9]+$')",message="secrets.organizationKey must be a Secret key: letters, digits, '-', '_' and '.'"
	// +kubebuilder:default=MEMGRAPH_ORGANIZATION_NAME
	// +optional
	OrganizationKey string `json:"organizationKey,omitempty"`
}

// AuthSpec names the Secret whose two keys become MEMGRAPH_USER and MEMGRAPH_PASSWORD
// (the vocabulary of Memgraph's Helm charts: userKey USER, passwordKey PASSWORD). The
// kubelet injects them; the operator reads them each pass, so a changed password is used
// at once and rolls no pod.
// +kubebuilder:validation:XValidation:rule="self.userKey != self.passwordKey",message="auth.userKey and auth.passwordKey must name different keys of the Secret: the username and the password are two values"
type AuthSpec struct {
	// SecretName is the Secret in the cluster's namespace.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="auth.secretName must name a Secret: lowercase letters, digits, '-' and '.'"
	// +required
	SecretName string `json:"secretName"`

	// UserKey is the Secret key holding the admin username.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[-._a-zA-Z0-9]+$')",message="auth.userKey must be a Secret key: letters, digits, '-', '_' and '.'"
	// +kubebuilder:default=USER
	// +optional
	UserKey string `json:"userKey,omitempty"`

	// PasswordKey is the Secret key holding the admin password.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[-._a-zA-Z0-9]+$')",message="auth.passwordKey must be a Secret key: letters, digits, '-', '_' and '.'"
	// +kubebuilder:default=PASSWORD
	// +optional
	PasswordKey string `json:"passwordKey,omitempty"`
}

// TLSSpec is the cluster's TLS. Memgraph encrypts Bolt (--bolt-cert-file,
// --bolt-key-file, on coordinators and data instances alike); once they are set it refuses
// plain Bolt. Replication, the management RPC and Raft are not covered by it.
type TLSSpec struct {
	// Bolt is the certificate every pod serves Bolt with.
	// +required
	Bolt BoltTLSSpec `json:"bolt"`
}

// BoltTLSSpec names the Secret of the Bolt certificate. It holds tls.crt (the certificate
// chain), tls.key (its private key) and ca.crt (the CA the operator verifies the pods
// with): the shape of a kubernetes.io/tls Secret that cert-manager writes for a CA
// issuer. The certificate must name the pods' DNS names,
// *.<cluster>-coordinators.<namespace>.svc.<clusterDomain> and
// *.<cluster>-data.<namespace>.svc.<clusterDomain>, which the operator dials.
//
// The Secret is mounted without subPath, so the kubelet brings a renewed certificate
// into running pods; Memgraph reads it again only on RELOAD BOLT_SERVER TLS, which the
// operator runs on a converged cluster on every member still serving another certificate
// than tls.crt. The operator reads the Secret on every pass, so a new CA is used without
// restarting it; to change CA, put the old and the new CA in ca.crt until every member
// serves the new certificate.
// Naming another Secret changes the pod template and rolls the cluster.
type BoltTLSSpec struct {
	// SecretName is the Secret in the cluster's namespace.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="tls.bolt.secretName must name a Secret: lowercase letters, digits, '-' and '.'"
	// +required
	SecretName string `json:"secretName"`
}

// StorageSpec is the persistent storage of both roles.
type StorageSpec struct {
	// RetentionPolicy says whether the claims outlive the MemgraphCluster (Retain or
	// Delete), and, unless RetentionPolicyWhenScaled says otherwise, the claims of the
	// instances a scale-down retires.
	// The schema also keeps the object {whenDeleted, whenScaled} an earlier operator stored
	// (the API server would otherwise empty it on read); the operator rewrites it to this
	// string when it starts, and new clusters cannot set it.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Enum=Retain;Delete
	// +kubebuilder:default=Retain
	// +optional
	RetentionPolicy RetentionAction `json:"retentionPolicy,omitempty"`

	// RetentionPolicyWhenScaled overrides RetentionPolicy for the claims of retired
	// instances only (e.g. keep everything when the cluster is deleted, but drop a retired
	// replica's copy). Unset, it follows RetentionPolicy.
	// +optional
	RetentionPolicyWhenScaled *RetentionAction `json:"retentionPolicyWhenScaled,omitempty"`

	// Coordinators' volumes (Raft log and snapshots in lib).
	// +kubebuilder:default={}
	// +optional
	Coordinators RoleStorage `json:"coordinators,omitempty"`

	// Data instances' volumes (the graph in lib).
	// +kubebuilder:default={}
	// +optional
	Data RoleStorage `json:"data,omitempty"`
}

// LicenseSpec is SecretsSpec's old shape (spec.license); see MemgraphClusterSpec.License.
type LicenseSpec struct {
	// SecretName is SecretsSpec.Name.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	SecretName string `json:"secretName,omitempty"`
	// LicenseKey is SecretsSpec.LicenseKey.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	LicenseKey string `json:"licenseKey,omitempty"`
	// OrganizationKey is SecretsSpec.OrganizationKey.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	OrganizationKey string `json:"organizationKey,omitempty"`
}

// RetentionAction is what happens to a claim.
// +kubebuilder:validation:Enum=Retain;Delete
type RetentionAction string

const (
	// RetentionRetain keeps the claim and its data.
	RetentionRetain RetentionAction = "Retain"
	// RetentionDelete deletes the claim with its pod or cluster.
	RetentionDelete RetentionAction = "Delete"
)

// RoleStorage is one role's lib (data, Raft state) and log volumes, in the HA Helm
// chart's vocabulary. Class and access mode are fixed once created (a bound claim cannot
// change them); sizes can grow but never shrink.
// +kubebuilder:validation:XValidation:rule="(!has(self.libPVCSize) || quantity(self.libPVCSize).isGreaterThan(quantity('0'))) && (!has(self.logPVCSize) || quantity(self.logPVCSize).isGreaterThan(quantity('0')))",message="libPVCSize and logPVCSize must be positive quantities such as 1Gi"
// +kubebuilder:validation:XValidation:rule="(!has(self.libPVCSize) || !has(oldSelf.libPVCSize) || !quantity(self.libPVCSize).isLessThan(quantity(oldSelf.libPVCSize))) && (!has(self.logPVCSize) || !has(oldSelf.logPVCSize) || !quantity(self.logPVCSize).isLessThan(quantity(oldSelf.logPVCSize)))",message="libPVCSize and logPVCSize can only grow: shrinking a volume would lose data; set the size back to at least its current value"
// +kubebuilder:validation:XValidation:rule="has(self.libStorageClassName) == has(oldSelf.libStorageClassName) && (!has(self.libStorageClassName) || self.libStorageClassName == oldSelf.libStorageClassName) && has(self.logStorageClassName) == has(oldSelf.logStorageClassName) && (!has(self.logStorageClassName) || self.logStorageClassName == oldSelf.logStorageClassName)",message="libStorageClassName and logStorageClassName are immutable: a bound claim cannot change class; set them back to their current values"
// +kubebuilder:validation:XValidation:rule="(!has(self.libStorageAccessMode) || !has(oldSelf.libStorageAccessMode) || self.libStorageAccessMode == oldSelf.libStorageAccessMode) && (!has(self.logStorageAccessMode) || !has(oldSelf.logStorageAccessMode) || self.logStorageAccessMode == oldSelf.logStorageAccessMode)",message="libStorageAccessMode and logStorageAccessMode are immutable: a bound claim cannot change access mode; set them back to their current values"
type RoleStorage struct {
	// LibPVCSize is the size of the lib volume (/var/lib/memgraph).
	// +kubebuilder:default="1Gi"
	// +optional
	LibPVCSize *resource.Quantity `json:"libPVCSize,omitempty"`

	// LibStorageClassName of the lib volume; unset means the namespace's default class.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	LibStorageClassName *string `json:"libStorageClassName,omitempty"`

	// LibStorageAccessMode of the lib volume.
	// +kubebuilder:default=ReadWriteOnce
	// +optional
	LibStorageAccessMode AccessMode `json:"libStorageAccessMode,omitempty"`

	// LogPVCSize is the size of the log volume (/var/log/memgraph).
	// +kubebuilder:default="256Mi"
	// +optional
	LogPVCSize *resource.Quantity `json:"logPVCSize,omitempty"`

	// LogStorageClassName of the log volume; unset means the namespace's default class.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	LogStorageClassName *string `json:"logStorageClassName,omitempty"`

	// LogStorageAccessMode of the log volume.
	// +kubebuilder:default=ReadWriteOnce
	// +optional
	LogStorageAccessMode AccessMode `json:"logStorageAccessMode,omitempty"`
}

// AccessMode is a claim's access mode; one pod writes each volume, so read-only modes
// are not offered.
// +kubebuilder:validation:Enum=ReadWriteOnce;ReadWriteOncePod;ReadWriteMany
type AccessMode string

// PortsSpec are the ports every address the operator registers is built from.
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="ports are immutable: the coordinators' Raft membership and every registration carry them; create a new cluster to change them"
// +kubebuilder:validation:XValidation:rule="!(has(self.bolt) && has(self.management) && has(self.coordinator) && has(self.replication) && has(self.metrics)) || [self.bolt, self.management, self.coordinator, self.replication, self.metrics].all(p, [self.bolt, self.management, self.coordinator, self.replication, self.metrics].filter(q, q == p).size() == 1)",message="ports.bolt, management, coordinator, replication and metrics must be five different ports"
type PortsSpec struct {
	// Bolt is the client and admin query port (--bolt-port).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +kubebuilder:default=7687
	// +optional
	Bolt int32 `json:"bolt,omitempty"`

	// Management is the port coordinators health-check and command instances on
	// (--management-port).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +kubebuilder:default=10000
	// +optional
	Management int32 `json:"management,omitempty"`

	// Coordinator is the Raft port of coordinators (--coordinator-port).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +kubebuilder:default=12000
	// +optional
	Coordinator int32 `json:"coordinator,omitempty"`

	// Replication is the port a replica receives the MAIN's stream on (registered as
	// replication_server).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +kubebuilder:default=20000
	// +optional
	Replication int32 `json:"replication,omitempty"`

	// Metrics is the Prometheus metrics port.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +kubebuilder:default=9091
	// +optional
	Metrics int32 `json:"metrics,omitempty"`
}

// ServiceMonitorSpec is the cluster's ServiceMonitor (the same fields as a ValkeyCluster's
// spec.exporter.serviceMonitor).
type ServiceMonitorSpec struct {
	// Enabled writes the ServiceMonitor; unset means true. False deletes the one the
	// operator wrote.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`

	// Labels are added to the ServiceMonitor's own labels, for a Prometheus whose
	// serviceMonitorSelector asks for some (kube-prometheus-stack's release label, for
	// instance).
	// +kubebuilder:validation:MaxProperties=32
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
}

// MetricsExporterSpec is the metrics-exporter sidecar of every member.
type MetricsExporterSpec struct {
	// Enabled runs the sidecar; unset means true. False removes it (each member's pod is
	// replaced once, as for any template change) and the ServiceMonitor then scrapes
	// memgraph's metrics port itself, which suits only a Memgraph told to serve
	// Prometheus text (spec.extraArgs --metrics-format=OpenMetrics, on releases that have
	// the flag).
	// +optional
	Enabled *bool `json:"enabled,omitempty"`

	// Port the sidecar serves /metrics on (memgraph/prometheus-exporter's 9115 when unset).
	// +kubebuilder:validation:Minimum=1024
	// +kubebuilder:validation:Maximum=65535
	// +optional
	Port int32 `json:"port,omitempty"`
}

// DefaultMetricsExporterPort is the sidecar's port when spec.metricsExporter.port is unset.
const DefaultMetricsExporterPort int32 = 9115

// MetricsExporterEnabled says whether the members run the metrics-exporter sidecar.
func (c *MemgraphCluster) MetricsExporterEnabled() bool {
	e := c.Spec.MetricsExporter
	return e == nil || e.Enabled == nil || *e.Enabled
}

// MetricsExporterPort is the sidecar's port.
func (c *MemgraphCluster) MetricsExporterPort() int32 {
	if e := c.Spec.MetricsExporter; e != nil && e.Port != 0 {
		return e.Port
	}
	return DefaultMetricsExporterPort
}

// ServiceMonitorEnabled says whether the cluster wants its ServiceMonitor.
func (c *MemgraphCluster) ServiceMonitorEnabled() bool {
	return c.Spec.ServiceMonitor == nil || c.Spec.ServiceMonitor.Enabled == nil || *c.Spec.ServiceMonitor.Enabled
}

// RoleProbes are the probe timings of both roles.
type RoleProbes struct {
	// Coordinators' probes.
	// +kubebuilder:default={}
	// +optional
	Coordinators Probes `json:"coordinators,omitempty"`

	// Data instances' probes.
	// +kubebuilder:default={}
	// +optional
	Data Probes `json:"data,omitempty"`
}

// Probes are one role's liveness, readiness and startup probes. A probe left out gets
// the whole default; a field left out of a given probe gets the Go constant.
type Probes struct {
	// Liveness restarts a memgraph that stops answering.
	// +kubebuilder:default={periodSeconds: 5, timeoutSeconds: 10, failureThreshold: 20}
	// +optional
	Liveness *ProbeTimings `json:"liveness,omitempty"`

	// Readiness gates the StatefulSet's rollout and the operator's registration.
	// +kubebuilder:default={periodSeconds: 5, timeoutSeconds: 10, failureThreshold: 20}
	// +optional
	Readiness *ProbeTimings `json:"readiness,omitempty"`

	// Startup covers recovery of a large dataset on start.
	// +kubebuilder:default={periodSeconds: 10, timeoutSeconds: 10, failureThreshold: 1440}
	// +optional
	Startup *ProbeTimings `json:"startup,omitempty"`
}

// ProbeTimings are a TCP probe's timings; what is probed is fixed by the role.
type ProbeTimings struct {
	// InitialDelaySeconds before the first probe.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=3600
	// +optional
	InitialDelaySeconds int32 `json:"initialDelaySeconds,omitempty"`

	// PeriodSeconds between probes.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3600
	// +optional
	PeriodSeconds int32 `json:"periodSeconds,omitempty"`

	// TimeoutSeconds of one probe.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3600
	// +optional
	TimeoutSeconds int32 `json:"timeoutSeconds,omitempty"`

	// FailureThreshold is how many failed probes in a row count as a failure.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	// +optional
	FailureThreshold int32 `json:"failureThreshold,omitempty"`
}

// RoleResources are both roles' container resources.
type RoleResources struct {
	// Coordinators' resources.
	// +kubebuilder:validation:XValidation:rule="['cpu', 'memory'].all(r, !has(self.requests) || !has(self.limits) || !(r in self.requests) || !(r in self.limits) || quantity(string(self.requests[r])).compareTo(quantity(string(self.limits[r]))) <= 0)",message="resources.coordinators.requests must not exceed resources.coordinators.limits for cpu and memory: raise the limit or lower the request"
	// +optional
	Coordinators corev1.ResourceRequirements `json:"coordinators,omitempty"`
	// Data instances' resources.
	// +kubebuilder:validation:XValidation:rule="['cpu', 'memory'].all(r, !has(self.requests) || !has(self.limits) || !(r in self.requests) || !(r in self.limits) || quantity(string(self.requests[r])).compareTo(quantity(string(self.limits[r]))) <= 0)",message="resources.data.requests must not exceed resources.data.limits for cpu and memory: raise the limit or lower the request"
	// +optional
	Data corev1.ResourceRequirements `json:"data,omitempty"`
}

// RoleLabels are both roles' extra labels.
type RoleLabels struct {
	// Coordinators' labels.
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, !(k in ['app.kubernetes.io/name', 'app.kubernetes.io/instance', 'app.kubernetes.io/component', 'app.kubernetes.io/managed-by', 'memgraph.com/cluster', 'apps.kubernetes.io/pod-index', 'statefulset.kubernetes.io/pod-name', 'controller-revision-hash']))",message="labels must not set app.kubernetes.io/name, instance, component or managed-by, memgraph.com/cluster (the operator selects its pods by them) nor apps.kubernetes.io/pod-index, statefulset.kubernetes.io/pod-name or controller-revision-hash (the StatefulSet controller numbers its pods by them, and a coordinator's id is its pod-index): use another key"
	// +optional
	Coordinators map[string]LabelValue `json:"coordinators,omitempty"`
	// Data instances' labels.
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, !(k in ['app.kubernetes.io/name', 'app.kubernetes.io/instance', 'app.kubernetes.io/component', 'app.kubernetes.io/managed-by', 'memgraph.com/cluster', 'apps.kubernetes.io/pod-index', 'statefulset.kubernetes.io/pod-name', 'controller-revision-hash']))",message="labels must not set app.kubernetes.io/name, instance, component or managed-by, memgraph.com/cluster (the operator selects its pods by them) nor apps.kubernetes.io/pod-index, statefulset.kubernetes.io/pod-name or controller-revision-hash (the StatefulSet controller numbers its pods by them, and a coordinator's id is its pod-index): use another key"
	// +optional
	Data map[string]LabelValue `json:"data,omitempty"`
}

// RoleAnnotations are both roles' extra pod annotations.
type RoleAnnotations struct {
	// Coordinators' pod annotations.
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.startsWith('memgraph.com/'))",message="annotations must not use keys under memgraph.com/: they are the operator's own; use another prefix"
	// +optional
	Coordinators map[string]string `json:"coordinators,omitempty"`
	// Data instances' pod annotations.
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.startsWith('memgraph.com/'))",message="annotations must not use keys under memgraph.com/: they are the operator's own; use another prefix"
	// +optional
	Data map[string]string `json:"data,omitempty"`
}

// LabelValue is a label's value; keys are checked by the API server when the operator
// applies the labels (a CEL rule over map keys of unbounded length is too costly).
// +kubebuilder:validation:MaxLength=63
// +kubebuilder:validation:XValidation:rule="self.matches('^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$')",message="label values must be at most 63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit, or empty"
type LabelValue string

// RoleEnv are both roles' extra environment variables.
type RoleEnv struct {
	// Coordinators' variables.
	// +kubebuilder:validation:MaxItems=64
	// +listType=map
	// +listMapKey=name
	// +optional
	Coordinators []EnvVar `json:"coordinators,omitempty"`
	// Data instances' variables.
	// +kubebuilder:validation:MaxItems=64
	// +listType=map
	// +listMapKey=name
	// +optional
	Data []EnvVar `json:"data,omitempty"`
}

// EnvVar is a plain environment variable.
type EnvVar struct {
	// Name of the variable. The license, the ports and the pod's identity are set by the
	// operator and cannot be shadowed.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="self.matches('^[-._a-zA-Z][-._a-zA-Z0-9]*$')",message="extraEnv names must be environment variable names: letters, digits, '_', '-' and '.', not starting with a digit"
	// +kubebuilder:validation:XValidation:rule="!(self in ['MEMGRAPH_ENTERPRISE_LICENSE', 'MEMGRAPH_ORGANIZATION_NAME'])",message="extraEnv must not set MEMGRAPH_ENTERPRISE_LICENSE or MEMGRAPH_ORGANIZATION_NAME: the license comes from the Secret named in spec.license"
	// +kubebuilder:validation:XValidation:rule="!(self in ['MEMGRAPH_USER', 'MEMGRAPH_PASSWORD'])",message="extraEnv must not set MEMGRAPH_USER or MEMGRAPH_PASSWORD: name a Secret in spec.auth instead"
	// +kubebuilder:validation:XValidation:rule="!(self in ['MEMGRAPH_BOLT_PORT', 'MEMGRAPH_MANAGEMENT_PORT', 'MEMGRAPH_COORDINATOR_PORT'])",message="extraEnv must not set MEMGRAPH_BOLT_PORT, MEMGRAPH_MANAGEMENT_PORT or MEMGRAPH_COORDINATOR_PORT: set spec.ports instead"
	// +kubebuilder:validation:XValidation:rule="!(self in ['MEMGRAPH_COORDINATOR_ID', 'MEMGRAPH_COORDINATOR_HOSTNAME', 'MEMGRAPH_HA_CLUSTER_INIT_QUERIES', 'POD_NAME', 'POD_NAMESPACE'])",message="extraEnv must not set MEMGRAPH_COORDINATOR_ID, MEMGRAPH_COORDINATOR_HOSTNAME, MEMGRAPH_HA_CLUSTER_INIT_QUERIES, POD_NAME or POD_NAMESPACE: the operator derives each pod's identity and registration from its ordinal; remove the variable"
	// +required
	Name string `json:"name"`

	// Value of the variable.
	// +kubebuilder:validation:MaxLength=4096
	// +optional
	Value string `json:"value,omitempty"`
}

// RoleArgs are both roles' extra memgraph flags.
type RoleArgs struct {
	// Coordinators' flags.
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	// +optional
	Coordinators []Arg `json:"coordinators,omitempty"`
	// Data instances' flags.
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	// +optional
	Data []Arg `json:"data,omitempty"`
}

// Arg is one memgraph command-line argument, e.g. --log-level=DEBUG.
// +kubebuilder:validation:MaxLength=1024
// +kubebuilder:validation:XValidation:rule="!self.matches('^--?(bolt-port|management-port|coordinator-port)(=|$)')",message="extraArgs must not set --bolt-port, --management-port or --coordinator-port: the registrations are built from spec.ports; set the port there"
// +kubebuilder:validation:XValidation:rule="!self.matches('^--?(coordinator-id|coordinator-hostname|ha-cluster-init-queries)(=|$)')",message="extraArgs must not set --coordinator-id, --coordinator-hostname or --ha-cluster-init-queries: the operator derives each coordinator's identity from its pod ordinal; remove the flag"
// +kubebuilder:validation:XValidation:rule="!self.matches('^--?(license-key|organization-name)(=|$)')",message="extraArgs must not set --license-key or --organization-name: the license comes from the Secret named in spec.license"
// +kubebuilder:validation:XValidation:rule="!self.matches('^--?(bolt-cert-file|bolt-key-file)(=|$)')",message="extraArgs must not set --bolt-cert-file or --bolt-key-file: name a kubernetes.io/tls Secret in spec.tls.bolt.secretName instead"
type Arg string

// MemgraphClusterStatus is the observed state of a MemgraphCluster.
type MemgraphClusterStatus struct {
	// ObservedGeneration is the generation the status was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// State summarizes the conditions; Initializing until the operator first writes status.
	// +kubebuilder:default=Initializing
	// +optional
	State ClusterState `json:"state,omitempty"`

	// Reason is the reason of the condition that decided State.
	// +optional
	Reason string `json:"reason,omitempty"`

	// Coordinators is how many coordinators the leader's SHOW INSTANCES last listed as registered.
	// +optional
	Coordinators int32 `json:"coordinators"`

	// DataInstances is how many data instances the leader's SHOW INSTANCES last listed as registered.
	// +optional
	DataInstances int32 `json:"dataInstances"`

	// ReadyCoordinators is how many coordinator pods are Ready.
	// +optional
	ReadyCoordinators int32 `json:"readyCoordinators,omitempty"`

	// ReadyDataInstances is how many data-instance pods are Ready: running, and given
	// their role by the coordinators (the readiness gate memgraph.com/role-assigned).
	// +optional
	ReadyDataInstances int32 `json:"readyDataInstances,omitempty"`

	// Main is the name of the data instance holding the MAIN role (e.g. instance_0) as
	// the coordinators' leader last reported it, empty when the leader names none. While
	// no leader answers (leader empty) it keeps the last report: the data instances keep
	// their roles without a leader.
	// +optional
	Main string `json:"main,omitempty"`

	// Leader is the name of the Raft leader (e.g. coordinator_1), empty when no
	// coordinator names one.
	// +optional
	Leader string `json:"leader,omitempty"`

	// LastFailoverTime is when the operator last saw the coordinators promote another data
	// instance to MAIN without its asking (a failover after the MAIN was lost; a switchover
	// the operator ran before replacing or retiring the MAIN is not one). Each is a Warning
	// event "Failover" naming the old and new MAIN and is counted in
	// memgraph_operator_failovers_total. Unset until the first.
	// +optional
	LastFailoverTime *metav1.Time `json:"lastFailoverTime,omitempty"`

	// LostNodes are the members found on a lost node (spec.lostNodes) and how far their
	// replacement got; a member's entry goes once its node is back (Ready) or it is on a
	// node that is not lost.
	// +listType=map
	// +listMapKey=member
	// +listMapKey=node
	// +optional
	LostNodes []LostNode `json:"lostNodes,omitempty"`

	// Conditions: Ready, Converged and Updated.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ClusterState is the one-word summary of a MemgraphCluster, in the words every operator
// of the suite uses (shared/conditions.StateOf derives it).
// +kubebuilder:validation:Enum=Initializing;Reconciling;Ready;Degraded;Failed
type ClusterState string

const (
	// StateInitializing means no status written yet.
	StateInitializing ClusterState = "Initializing"
	// StateReconciling means pods starting, registration, a scale, retirement or update in
	// flight (serving or not yet).
	StateReconciling ClusterState = "Reconciling"
	// StateReady means one MAIN, a leader, everything registered, converged and updated.
	StateReady ClusterState = "Ready"
	// StateDegraded means serving in part: no MAIN, no coordinator leader, or the
	// coordinators unreachable (the data instances may serve on); or members whose pods
	// are ready do not answer the operator (MembersUnreachable).
	StateDegraded ClusterState = "Degraded"
	// StateFailed means not ready and nothing under way changes that (the coordinators'
	// TLS cannot be verified): a person has to act.
	StateFailed ClusterState = "Failed"
)

// MemgraphCluster is a highly available Memgraph cluster. Its name is at most
// MaxNameLength characters and a DNS-1035 label: it is the client Service's name, and the
// longest name derived from it, the coordinators' controller-revision-hash label
// <name>-coordinator-<hash of up to 10 characters>, must stay a label value (63).
// The name rules apply on create only (a name never changes), so an object admitted
// before them stays updatable and its finalizer can still be removed.
// +kubebuilder:validation:XValidation:rule="oldSelf.hasValue() || self.metadata.name.size() <= 40",message="metadata.name must be at most 40 characters: the StatefulSet <name>-coordinator labels its pods with controller-revision-hash <name>-coordinator-<hash of up to 10 characters>, which must fit in 63; choose a shorter name",optionalOldSelf=true
// +kubebuilder:validation:XValidation:rule="oldSelf.hasValue() || self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must start with a lowercase letter and hold only lowercase letters, digits and '-' (no '.'): it names the cluster's Services",optionalOldSelf=true
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=mgc,categories=opsuite
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`,description="Summary state"
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.reason`,description="Why the cluster is in that state"
// +kubebuilder:printcolumn:name="Coordinators",type=integer,JSONPath=`.spec.coordinators`,description="Declared coordinators"
// +kubebuilder:printcolumn:name="Data",type=integer,JSONPath=`.spec.dataInstances`,description="Declared data instances"
// +kubebuilder:printcolumn:name="Ready Coordinators",type=integer,JSONPath=`.status.readyCoordinators`,description="Coordinator pods Ready"
// +kubebuilder:printcolumn:name="Ready Data",type=integer,JSONPath=`.status.readyDataInstances`,description="Data-instance pods Ready (running and given their role)"
// +kubebuilder:printcolumn:name="Main",type=string,JSONPath=`.status.main`,description="The data instance holding MAIN"
// +kubebuilder:printcolumn:name="Leader",type=string,JSONPath=`.status.leader`,description="The Raft leader"
// +kubebuilder:printcolumn:name="Last Failover",type=date,JSONPath=`.status.lastFailoverTime`,description="When the coordinators last promoted another MAIN"
// +kubebuilder:printcolumn:name="Registered Coordinators",type=integer,JSONPath=`.status.coordinators`,priority=1,description="Coordinators registered in SHOW INSTANCES"
// +kubebuilder:printcolumn:name="Registered Data",type=integer,JSONPath=`.status.dataInstances`,priority=1,description="Data instances registered in SHOW INSTANCES"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type MemgraphCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec MemgraphClusterSpec `json:"spec"`
	// +kubebuilder:default:={state: "Initializing", coordinators: 0, dataInstances: 0}
	// +optional
	Status MemgraphClusterStatus `json:"status,omitempty"`
}

// MemgraphClusterList is a list of MemgraphCluster.
// +kubebuilder:object:root=true
type MemgraphClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MemgraphCluster `json:"items"`
}
