package v1alpha1

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Bounds the CRDs enforce (the validation tests pin each). MaxNodes caps shards ×
// (replicas + 1). MaxClusterNameLength leaves room for the longest node suffix
// -<shard>-<index> (6 characters) and the StatefulSet revision hash (11) in 63;
// MaxNodeNameLength for the revision hash alone.
const (
	MaxNodes             = 1000
	MaxShards            = 1000
	MaxReplicas          = 15
	MaxClusterNameLength = 46
	MaxNodeNameLength    = 52
	// MaxClusterDomainLength keeps *.<cluster>.<namespace>.svc.<domain> within 253.
	MaxClusterDomainLength = 136
)

// ValkeyClusterSpec is the desired state of a sharded Valkey cluster. Its field names and
// shapes are those of valkey-io/valkey-operator's v1alpha1, so a manifest written for that
// operator applies here unchanged; fields it lacks are marked "Not in upstream".
//
// Rules that compare with the stored object protect data: a PVC cannot follow a new
// storage class, and dropping persistence would drop every node's data.
// +kubebuilder:validation:XValidation:rule="self.shards * ((has(self.replicas) ? self.replicas : 0) + 1) <= 1000",message="shards × (replicas + 1) must not exceed 1000 nodes, Valkey's cluster bus does not scale past that: lower shards or replicas"
// +kubebuilder:validation:XValidation:rule="!(has(self.persistence) && has(self.workloadType) && self.workloadType == 'Deployment')",message="persistence needs workloadType StatefulSet: remove workloadType Deployment or remove persistence"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.persistence) || has(self.persistence)",message="persistence cannot be removed once set: every node's data lives on it; create a new cluster instead"
// +kubebuilder:validation:XValidation:rule="has(oldSelf.persistence) || !has(self.persistence)",message="persistence cannot be added to a running cluster: create a new cluster with persistence"
// +kubebuilder:validation:XValidation:rule="!has(self.persistence) || !has(oldSelf.persistence) || quantity(self.persistence.size).compareTo(quantity(oldSelf.persistence.size)) >= 0",message="persistence.size can only grow (a PVC cannot shrink): set it back to at least its previous value"
// +kubebuilder:validation:XValidation:rule="!has(self.persistence) || !has(oldSelf.persistence) || (has(self.persistence.storageClassName) == has(oldSelf.persistence.storageClassName) && (!has(self.persistence.storageClassName) || self.persistence.storageClassName == oldSelf.persistence.storageClassName))",message="persistence.storageClassName is immutable (existing PVCs cannot move to another class): set it back to its previous value"
// +kubebuilder:validation:XValidation:rule="has(self.bootstrap) == has(oldSelf.bootstrap)",message="spec.bootstrap can be set only when the cluster is created (a restore never writes over a running cluster's data): create a new cluster with spec.bootstrap"
// +kubebuilder:validation:XValidation:rule="!has(self.scheduling) || !(has(self.tolerations) || has(self.nodeSelector) || has(self.affinity))",message="scheduling is configured twice: move spec.tolerations, spec.nodeSelector and spec.affinity into spec.scheduling"
// +kubebuilder:validation:XValidation:rule="!has(self.tls) || !has(self.networking) || !has(self.networking.tls)",message="TLS is configured twice: keep either spec.tls or spec.networking.tls, not both"
// +kubebuilder:validation:XValidation:rule="!has(self.networking) || !has(self.networking.discovery) || !has(self.networking.discovery.preferredEndpointType) || self.networking.discovery.preferredEndpointType != 'Hostname' || !has(self.workloadType) || self.workloadType == 'StatefulSet'",message="networking.discovery.preferredEndpointType Hostname needs stable pod names: use workloadType StatefulSet (the default)"
// +kubebuilder:validation:XValidation:rule="!has(self.networking) || !has(self.networking.external) || !has(self.networking.discovery) || !has(self.networking.discovery.preferredEndpointType) || self.networking.discovery.preferredEndpointType != 'Hostname'",message="networking.external announces each node's Service address in the hostname clients are sent to, which networking.discovery.preferredEndpointType Hostname uses for the pod's DNS name: remove networking.discovery or set its preferredEndpointType to IP"
type ValkeyClusterSpec struct {
	// Image is the Valkey server image; empty means the operator's default.
	// +kubebuilder:validation:MaxLength=512
	// +optional
	Image string `json:"image,omitempty"`

	// ImagePullSecrets name Secrets in the cluster's namespace for pulling every image of
	// its pods (server, exporter, extra containers).
	// +kubebuilder:validation:MaxItems=16
	// +optional
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`

	// Shards is the number of primaries the 16384 slots are spread over. Fewer than 3
	// is accepted, but such a cluster cannot fail over by majority, and the operator says
	// so in the ConfigurationWarning condition. At most 1000 (MaxShards), the most nodes
	// a cluster may have in all.
	// +kubebuilder:validation:XValidation:rule="self >= 1",message="shards must be at least 1: every cluster needs a primary to own the slots"
	// +kubebuilder:validation:XValidation:rule="self <= 1000",message="shards must be at most 1000: Valkey's cluster bus does not scale past 1000 nodes; lower shards"
	// +required
	Shards int32 `json:"shards"`

	// Replicas is the number of replicas of each shard's primary. At most 15
	// (MaxReplicas): each replica takes the primary's whole write stream, so a shard gains
	// nothing from more; real clusters run 1 or 2.
	// +kubebuilder:validation:XValidation:rule="self >= 0",message="replicas must be 0 or more (replicas per shard, not counting the primary)"
	// +kubebuilder:validation:XValidation:rule="self <= 15",message="replicas must be at most 15 per shard: each replica takes the primary's whole write stream; lower replicas"
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// Resources of the Valkey server container of every node.
	// +kubebuilder:validation:XValidation:rule="['cpu', 'memory'].all(r, !has(self.requests) || !has(self.limits) || !(r in self.requests) || !(r in self.limits) || quantity(string(self.requests[r])).compareTo(quantity(string(self.limits[r]))) <= 0)",message="resources.requests must not exceed resources.limits for cpu and memory: raise the limit or lower the request"
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// Scheduling is where the nodes' pods may run and how they spread.
	// +optional
	Scheduling *SchedulingSpec `json:"scheduling,omitempty"`

	// Tolerations is upstream's earlier place for scheduling.tolerations; accepted so
	// older manifests apply, but not together with spec.scheduling.
	// +kubebuilder:validation:MaxItems=64
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// NodeSelector is upstream's earlier place for scheduling.nodeSelector.
	// +kubebuilder:validation:MaxProperties=64
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// Affinity is upstream's earlier place for scheduling.affinity.
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`

	// Exporter is the Prometheus exporter sidecar of every node.
	// +kubebuilder:default:={enabled:true}
	// +optional
	Exporter ExporterSpec `json:"exporter,omitempty"`

	// WorkloadType is the kind each ValkeyNode runs its pod with. Fixed at creation.
	// +kubebuilder:default=StatefulSet
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="workloadType is immutable: create a new cluster to change it"
	// +optional
	WorkloadType WorkloadType `json:"workloadType,omitempty"`

	// Persistence gives every node a PVC for its data (RDB/AOF and nodes.conf).
	// +optional
	Persistence *PersistenceSpec `json:"persistence,omitempty"`

	// Users are ACL users created on every node. Names starting with '_' are the
	// operator's own. Besides its own rules, every enabled user may run the read-only
	// commands a cluster client needs to find and follow the slot owners: CLUSTER SLOTS,
	// SHARDS, NODES, INFO and MYID (in no category but @slow, so "@read @write
	// @connection" leaves them out), READONLY, READWRITE and ASKING. One named in
	// commands.deny (or as "-<command>" in permissions) stays denied.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=128
	// +optional
	Users []UserACLSpec `json:"users,omitempty"`

	// Containers are merged by name into the pod's containers ("server",
	// "metrics-exporter"); other names are added as sidecars.
	// +kubebuilder:validation:MaxItems=16
	// +optional
	Containers []corev1.Container `json:"containers,omitempty"`

	// Config holds valkey.conf directives applied to every node. Directives the operator
	// owns (cluster mode, ports, addresses, data directory, TLS files, ACL and replication
	// credentials) are refused: use the dedicated fields.
	// +kubebuilder:validation:MaxProperties=256
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.matches('^[A-Za-z0-9][A-Za-z0-9._-]*$') && size(k) <= 128)",message="config keys are valkey.conf directive names such as maxmemory-policy: letters, digits, '.', '-' and '_' only"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !(k.lowerAscii() in ['cluster-enabled', 'cluster-config-file', 'port', 'cluster-port', 'bind', 'dir', 'daemonize', 'include', 'replicaof', 'slaveof', 'rename-command', 'cluster-announce-ip', 'cluster-announce-port', 'cluster-announce-bus-port', 'cluster-announce-tls-port', 'cluster-announce-hostname', 'cluster-preferred-endpoint-type']))",message="config must not set cluster-enabled, cluster-config-file, port, cluster-port, bind, dir, daemonize, include, replicaof, slaveof, rename-command, cluster-announce-* or cluster-preferred-endpoint-type: the operator sets them to run the node in cluster mode; remove the key"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !(k.lowerAscii() in ['aclfile', 'requirepass', 'masterauth', 'masteruser', 'primaryauth', 'primaryuser']))",message="config must not set aclfile, requirepass, masterauth or masteruser: declare users in spec.users; the operator manages replication credentials"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !(k.lowerAscii() in ['tls-port', 'tls-cert-file', 'tls-key-file', 'tls-ca-cert-file', 'tls-ca-cert-dir', 'tls-client-cert-file', 'tls-client-key-file', 'tls-cluster', 'tls-replication']))",message="config must not set tls-port, tls-*-file, tls-ca-cert-dir, tls-cluster or tls-replication: configure TLS in spec.tls"
	// +optional
	Config map[string]ConfigValue `json:"config,omitempty"`

	// TerminationGracePeriodSeconds is the pods' grace period. A primary hands its shard
	// to a replica on SIGTERM, so it must outlast cluster-manual-failover-timeout; unset,
	// the operator derives a safe value; a shorter one is applied and reported in the
	// ConfigurationWarning condition (GracePeriodTooShort).
	// +kubebuilder:validation:XValidation:rule="self >= 1 && self <= 86400",message="terminationGracePeriodSeconds must be between 1 and 86400 seconds; leave it unset for the operator's safe default"
	// +optional
	TerminationGracePeriodSeconds *int64 `json:"terminationGracePeriodSeconds,omitempty"`

	// TLS turns on TLS for clients, replication and the cluster bus.
	// +optional
	TLS *TLSConfig `json:"tls,omitempty"`

	// Networking is how clients and peers reach the nodes.
	// +optional
	Networking *NetworkingSpec `json:"networking,omitempty"`

	// PodDisruptionBudget is the operator's PodDisruptionBudget for the cluster; unset
	// means mode Cluster.
	// +optional
	PodDisruptionBudget *PodDisruptionBudgetConfig `json:"podDisruptionBudget,omitempty"`

	// PodSecurityContext replaces the operator's default pod security context.
	// +optional
	PodSecurityContext *corev1.PodSecurityContext `json:"podSecurityContext,omitempty"`

	// Rollout tunes how a rolling update replaces outdated nodes: shard by shard, a
	// shard's replicas (each waited for until its sync with the primary finished) before
	// its primary, which first hands its slots to an in-sync replica.
	// +optional
	Rollout *RolloutSpec `json:"rollout,omitempty"`

	// Backup is where ValkeyBackups of this cluster are stored. Not in upstream.
	// +optional
	Backup *BackupConfiguration `json:"backup,omitempty"`

	// Bootstrap starts a new cluster from a backup (bootstrap.recovery); set at creation
	// only, never changed. Not in upstream.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.bootstrap is immutable: it says how the cluster started; create a new cluster to restore another backup"
	// +optional
	Bootstrap *BootstrapConfiguration `json:"bootstrap,omitempty"`

	// LostNodes is what happens to a member whose claim is on a lost Kubernetes node
	// (deleted, or NotReady past the grace period): with spec.persistence its pod can
	// never start anywhere else. Not in upstream.
	// +optional
	LostNodes *LostNodesSpec `json:"lostNodes,omitempty"`
}

// LostNodeReplacement is whether a lost member is replaced by the operator.
// +kubebuilder:validation:Enum=Automatic;Manual
type LostNodeReplacement string

const (
	// LostNodeReplaceAutomatic deletes the member's claim once another member of its
	// shard holds its data; a new claim binds elsewhere and the member rejoins as a
	// replica.
	LostNodeReplaceAutomatic LostNodeReplacement = "Automatic"
	// LostNodeReplaceManual only reports the loss (MemberLost
	// ReplacementManual); deleting the member's claim by hand starts the replacement.
	LostNodeReplaceManual LostNodeReplacement = "Manual"
)

// DefaultLostNodeGracePeriod is how long a member's node may be NotReady before it counts
// as lost: Kubernetes' own default before it evicts the pods of a NotReady node.
const DefaultLostNodeGracePeriod = 5 * time.Minute

// LostNodesSpec is the policy for members whose claim is on a lost node.
type LostNodesSpec struct {
	// Replace is Automatic (the default: the claim is deleted once another member holds
	// the data) or Manual (reported only).
	// +kubebuilder:default=Automatic
	// +optional
	Replace LostNodeReplacement `json:"replace,omitempty"`

	// GracePeriod is how long the node of a member's claim may be NotReady (its Ready
	// condition False or Unknown) before it counts as lost; a deleted node is lost at
	// once. Default 5m.
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('168h')",message="lostNodes.gracePeriod must be a duration between 0s and 168h such as 5m: a node NotReady longer than it counts as lost"
	// +optional
	GracePeriod *metav1.Duration `json:"gracePeriod,omitempty"`
}

// LostNodesPolicy is spec.lostNodes with its defaults: whether replacement is automatic,
// and the grace period.
func (s *ValkeyClusterSpec) LostNodesPolicy() (automatic bool, grace time.Duration) {
	automatic, grace = true, DefaultLostNodeGracePeriod
	if l := s.LostNodes; l != nil {
		automatic = l.Replace != LostNodeReplaceManual
		if l.GracePeriod != nil {
			grace = l.GracePeriod.Duration
		}
	}
	return automatic, grace
}

// RolloutSpec tunes rolling updates.
type RolloutSpec struct {
	// AllowPrimaryWithoutReplica lets a rolling update replace a primary that has no
	// in-sync replica to hand its slots to (spec.replicas 0). Its shard then serves no
	// client until the new pod is up, and without spec.persistence the shard's keys are
	// lost. Unset, such a roll stops before that primary with Progressing reason
	// RollBlocked and a RollBlocked Warning event. With spec.replicas 1 or more the roll
	// waits for an in-sync replica instead and this field changes nothing.
	// +optional
	AllowPrimaryWithoutReplica bool `json:"allowPrimaryWithoutReplica,omitempty"`
}

// PDBMode is how the operator manages PodDisruptionBudgets.
// +kubebuilder:validation:Enum=Cluster;Disabled
type PDBMode string

const (
	// PDBModeCluster is one budget over all the cluster's pods with maxUnavailable 1.
	PDBModeCluster PDBMode = "Cluster"
	// PDBModeDisabled is no budget; an existing one is deleted.
	PDBModeDisabled PDBMode = "Disabled"
)

// PodDisruptionBudgetConfig is the operator-managed PodDisruptionBudget: {mode: ...}, or
// the string of upstream's first API, "Managed" (mode Cluster) or "Disabled", which
// upstream still decodes, so manifests and stored objects in that form keep working (the
// schema therefore has no type; another string or value means mode Cluster).
// +kubebuilder:validation:Type=""
// +kubebuilder:pruning:PreserveUnknownFields
type PodDisruptionBudgetConfig struct {
	// Mode is the budget policy.
	// +kubebuilder:default=Cluster
	// +optional
	Mode PDBMode `json:"mode,omitempty"`
}

// SchedulingSpec is copied onto every node's pod.
type SchedulingSpec struct {
	// Tolerations of the pods.
	// +kubebuilder:validation:MaxItems=64
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// NodeSelector of the pods; Kubernetes ANDs it with affinity.
	// +kubebuilder:validation:MaxProperties=64
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// Affinity of the pods, used as given.
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`

	// TopologySpreadConstraints of the pods, used as given.
	// +kubebuilder:validation:MaxItems=16
	// +optional
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`

	// PriorityClassName names an existing PriorityClass for the pods.
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`

	// Node spreads pods over nodes (kubernetes.io/hostname); unset means the members of a
	// shard prefer different nodes (shard: Preferred), set it to choose otherwise.
	// +optional
	Node *NodeScheduling `json:"node,omitempty"`

	// Zone spreads or pins pods over zones (topology.kubernetes.io/zone).
	// +optional
	Zone *ZoneScheduling `json:"zone,omitempty"`
}

// SpreadMode is how hard a spread is enforced.
// +kubebuilder:validation:Enum=Disabled;Preferred;Required
type SpreadMode string

const (
	// SpreadDisabled adds no constraint.
	SpreadDisabled SpreadMode = "Disabled"
	// SpreadPreferred biases placement but never leaves a pod Pending.
	SpreadPreferred SpreadMode = "Preferred"
	// SpreadRequired leaves a pod Pending rather than break the spread.
	SpreadRequired SpreadMode = "Required"
)

// SpreadConstraint is one spread dimension.
type SpreadConstraint struct {
	// Mode of this dimension; unset means Disabled.
	// +optional
	Mode SpreadMode `json:"mode,omitempty"`
}

// NodeScheduling groups the node-axis constraints.
type NodeScheduling struct {
	// Spread of the cluster's pods over nodes.
	// +optional
	Spread NodeSpread `json:"spread,omitempty"`
}

// NodeSpread says which pods must not share a node.
type NodeSpread struct {
	// Shard keeps the members of one shard on different nodes, so losing a node loses
	// at most one member of each shard.
	// +optional
	Shard SpreadConstraint `json:"shard,omitempty"`
	// Primaries spreads the shards' first members (the intended primaries) over nodes.
	// +optional
	Primaries SpreadConstraint `json:"primaries,omitempty"`
	// Pods spreads all the cluster's pods over nodes.
	// +optional
	Pods SpreadConstraint `json:"pods,omitempty"`
}

// ZoneScheduling groups the zone-axis constraints.
// +kubebuilder:validation:XValidation:rule="!has(self.pinning) || !has(self.spread) || [has(self.spread.shard) && has(self.spread.shard.mode) ? self.spread.shard.mode : 'Disabled', has(self.spread.primaries) && has(self.spread.primaries.mode) ? self.spread.primaries.mode : 'Disabled', has(self.spread.pods) && has(self.spread.pods.mode) ? self.spread.pods.mode : 'Disabled'].all(m, m == 'Disabled')",message="zone.pinning already fixes every pod's zone: set every zone.spread mode to Disabled or remove zone.pinning"
type ZoneScheduling struct {
	// Spread of the cluster's pods over zones.
	// +optional
	Spread ZoneSpread `json:"spread,omitempty"`
	// Pinning assigns each pod a fixed zone instead of spreading.
	// +optional
	Pinning *ZonePinning `json:"pinning,omitempty"`
}

// ZoneSpread says how pods balance over zones.
type ZoneSpread struct {
	// Shard balances the members of each shard over zones.
	// +optional
	Shard SpreadConstraint `json:"shard,omitempty"`
	// Primaries balances the shards' first members over zones.
	// +optional
	Primaries SpreadConstraint `json:"primaries,omitempty"`
	// Pods balances all the cluster's pods over zones.
	// +optional
	Pods SpreadConstraint `json:"pods,omitempty"`
}

// ZonePinning places the pod of shard s, member n in zones[(s+n) % len(zones)], so a
// shard's members walk the list from different starting points.
type ZonePinning struct {
	// Zones in round-robin order; each a label value, listed once.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="self.all(z, self.exists_one(y, y == z))",message="zone.pinning.zones must list each zone once: a repeated zone skews the round-robin"
	// +listType=atomic
	Zones []string `json:"zones"`
}

// NetworkingSpec is how clients and peers reach the nodes.
type NetworkingSpec struct {
	// ClusterDomain is the kubelet's DNS suffix, used in the certificate's names. At most
	// 136 characters (MaxClusterDomainLength): the longest name,
	// *.<cluster>.<namespace>.svc.<clusterDomain>, takes 117 before it and a DNS name
	// holds 253.
	// +kubebuilder:default="cluster.local"
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.size() <= 136",message="networking.clusterDomain must be at most 136 characters: the certificate names *.<cluster>.<namespace>.svc.<clusterDomain> must stay within the 253 of a DNS name"
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +optional
	ClusterDomain string `json:"clusterDomain,omitempty"`

	// Discovery is what nodes announce to clients (MOVED/ASK, CLUSTER SLOTS/SHARDS).
	// +optional
	Discovery *DiscoverySpec `json:"discovery,omitempty"`

	// TLS in upstream's newer place; equivalent to spec.tls, set only one of them.
	// +optional
	TLS *TLSSpec `json:"tls,omitempty"`

	// External gives every node a Service of its own that clients outside Kubernetes
	// reach, and has each node announce that Service's address, so MOVED and ASK send
	// such a client to addresses it can reach. Omitted means in-cluster access only.
	// The path is upstream's (spec.networking.external, valkey-operator #367).
	// +optional
	External *ExternalSpec `json:"external,omitempty"`
}

// ExternalMode is the type of each node's own Service.
// +kubebuilder:validation:Enum=LoadBalancer;NodePort
type ExternalMode string

const (
	// ExternalModeLoadBalancer gives each node a LoadBalancer Service; a node announces
	// the address the load balancer was given, on the client port.
	ExternalModeLoadBalancer ExternalMode = "LoadBalancer"
	// ExternalModeNodePort gives each node a NodePort Service; a node announces the
	// address of the Kubernetes node its pod runs on and the allocated node port. It
	// needs a server that can announce a client port apart from its own
	// (cluster-announce-client-port); the operator reads that from the server.
	ExternalModeNodePort ExternalMode = "NodePort"
)

// ExternalSpec is how clients outside Kubernetes reach the nodes.
type ExternalSpec struct {
	// Mode is the type of the per-node Services.
	// +required
	Mode ExternalMode `json:"mode"`

	// ServiceAnnotations are put on every per-node Service, e.g. for a cloud's load
	// balancer controller or external-dns.
	// +kubebuilder:validation:MaxProperties=64
	// +optional
	ServiceAnnotations map[string]string `json:"serviceAnnotations,omitempty"`
}

// PreferredEndpointType is valkey's cluster-preferred-endpoint-type.
// +kubebuilder:validation:Enum=IP;Hostname
type PreferredEndpointType string

const (
	// PreferredEndpointTypeIP announces pod IPs.
	PreferredEndpointTypeIP PreferredEndpointType = "IP"
	// PreferredEndpointTypeHostname announces each pod's DNS name under the headless
	// Service, which a certificate with DNS SANs can cover.
	PreferredEndpointTypeHostname PreferredEndpointType = "Hostname"
)

// DiscoverySpec is how nodes announce themselves.
type DiscoverySpec struct {
	// PreferredEndpointType is what nodes announce.
	// +kubebuilder:default=IP
	// +optional
	PreferredEndpointType PreferredEndpointType `json:"preferredEndpointType,omitempty"`
}

// ValkeyClusterStatus is the observed state, as the product document describes it.
type ValkeyClusterStatus struct {
	// ObservedGeneration is the generation of the spec the status was computed from, set
	// after a pass that judged all of it.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// State summarizes the conditions: Degraded=True gives Degraded, else Ready=True
	// Ready, else Progressing=True Reconciling, else Failed; Initializing until the
	// operator first writes status.
	// +kubebuilder:default=Initializing
	// +optional
	State ClusterState `json:"state,omitempty"`

	// Reason is the CamelCase reason of the condition that decided State.
	// +optional
	Reason string `json:"reason,omitempty"`

	// Message explains State for people.
	// +optional
	Message string `json:"message,omitempty"`

	// Shards is the number of shards found in the running cluster.
	// +kubebuilder:default=0
	// +optional
	Shards int32 `json:"shards,omitempty"`

	// ReadyShards is the number of shards with a primary and all their replicas.
	// +kubebuilder:default=0
	// +optional
	ReadyShards int32 `json:"readyShards,omitempty"`

	// LastFailoverTime is when the operator last promoted a replica: a takeover of a lost
	// primary, or a completed failover before a primary's pod is replaced (each counted in
	// valkey_operator_failovers_total). Unset until the first.
	// +optional
	LastFailoverTime *metav1.Time `json:"lastFailoverTime,omitempty"`

	// Restore is the progress of spec.bootstrap.recovery.
	// +optional
	Restore *RestoreStatus `json:"restore,omitempty"`

	// Conditions are Ready, Progressing, Degraded, ClusterFormed, SlotsAssigned,
	// Restored (with spec.bootstrap), MemberLost (spec.lostNodes) and
	// ConfigurationWarning (see the Condition* and Reason* constants).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ValkeyCluster is a Valkey cluster in cluster mode: shards × (1 + replicas) nodes, each
// a ValkeyNode the operator creates. Its name is at most MaxClusterNameLength characters
// and a DNS-1035 label: it names the headless Service, and the longest name derived from
// it is the controller-revision-hash label of a node's StatefulSet,
// <name>-<shard>-<index>-<hash of up to 10 characters>, which must stay a label value (63).
// The shard and index take 4 digits at most: shards × (replicas + 1) <= 1000 allows 3
// digits of shard with 1 of index (101 shards × 9) or 2 with 2 (11 × 16), never 5.
// The name rules apply on create only (a name never changes), so an object admitted
// before them stays updatable and its finalizer can still be removed.
// +kubebuilder:validation:XValidation:rule="oldSelf.hasValue() || self.metadata.name.size() <= 46",message="metadata.name must be at most 46 characters: each node's StatefulSet <name>-<shard>-<index> labels its pod with controller-revision-hash <name>-<shard>-<index>-<hash of up to 10 characters>, which must fit in 63; choose a shorter name",optionalOldSelf=true
// +kubebuilder:validation:XValidation:rule="oldSelf.hasValue() || self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must start with a lowercase letter and hold only lowercase letters, digits and '-' (no '.'): it names the cluster's Service",optionalOldSelf=true
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=vkc,categories=opsuite
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`,description="Summary state"
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.reason`,description="Why the cluster is in that state"
// +kubebuilder:printcolumn:name="Shards",type=integer,JSONPath=`.spec.shards`,description="Desired shards"
// +kubebuilder:printcolumn:name="Ready Shards",type=integer,JSONPath=`.status.readyShards`,description="Shards with a primary and all their replicas"
// +kubebuilder:printcolumn:name="Last Failover",type=date,JSONPath=`.status.lastFailoverTime`,description="When the operator last promoted a replica"
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.message`,priority=1,description="What the cluster is doing or waiting for"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ValkeyCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec ValkeyClusterSpec `json:"spec"`
	// +kubebuilder:default:={state: "Initializing", shards: 0, readyShards: 0}
	// +optional
	Status ValkeyClusterStatus `json:"status,omitempty"`
}

// ValkeyClusterList is a list of ValkeyCluster.
// +kubebuilder:object:root=true
type ValkeyClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ValkeyCluster `json:"items"`
}
