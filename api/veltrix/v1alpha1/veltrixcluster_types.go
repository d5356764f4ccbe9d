package v1alpha1

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Defaults of the spec. The CRD's schema applies them (+kubebuilder:default); these
// constants mirror them for the reconciler, and a test pins both against the generated CRD.
const (
	DefaultSize                          int32 = 3
	DefaultReplicationFactor             int32 = 3
	DefaultImage                               = "ghcr.io/veltrixdb/veltrixdb"
	DefaultVersion                             = "1.17.0"
	DefaultStorageClassName                    = "local-nvme"
	DefaultDisksPerNode                  int32 = 1
	DefaultServerPort                    int32 = 9000
	DefaultMetricsPort                   int32 = 2112
	DefaultGossipPort                    int32 = 7946
	DefaultXFSPartitionPercent           int32 = 20
	DefaultPodAntiAffinityTopologyKey          = "kubernetes.io/hostname"
	DefaultMode                                = ModeReplicated
	DefaultNet                                 = NetGo
	DefaultReclaimPolicy                       = ReclaimRetain
	DefaultNVMeOnly                            = true
	DefaultURingBridge                         = URingBridgeDisabled
	DefaultLostNodeReplace                     = LostNodeReplaceManual
	DefaultTerminationGracePeriodSeconds int64 = 60
)

// MinVersion is the oldest server version the operator runs: online membership (--join,
// --advertise-addr, /admin/cluster/members) is new after v1.16 and ships in 1.17.0. (The
// native index's vm.max_map_count need, new in v1.6, is older still.)
const MinVersion = "1.17.0"

// Bounds the CRD enforces. MaxNameLength is the longest metadata.name whose derived names
// all fit: the StatefulSet's controller-revision-hash label <name>-<10-character hash>.
const (
	MaxSize              int32 = 256
	MaxReplicationFactor int32 = 16
	MaxDisksPerNode      int32 = 32
	MaxCacheMaxSizeMB    int64 = 16777216
	MaxNameLength              = 52
)

// Mode is the server's -mode.
// +kubebuilder:validation:Enum=standalone;raft;replicated
type Mode string

const (
	// ModeStandalone is one member, no replication.
	ModeStandalone Mode = "standalone"
	// ModeRaft replicates through a raft log per partition.
	ModeRaft Mode = "raft"
	// ModeReplicated copies every key to replicationFactor owners.
	ModeReplicated Mode = "replicated"
)

// Net is the server's -net front end.
// +kubebuilder:validation:Enum=go;cpp;uring;poll
type Net string

const (
	// NetGo is the default Go network front end; the only one multi-node and auth work with.
	NetGo Net = "go"
	// NetCPP is the experimental C++ front end.
	NetCPP Net = "cpp"
	// NetURing is the C++ front end on io_uring.
	NetURing Net = "uring"
	// NetPoll is the C++ front end on poll(2).
	NetPoll Net = "poll"
)

// URingBridge is the io_uring VLog write bridge (the server's VELTRIXDB_URING_BRIDGE). The
// values are not the server's on/off: YAML reads an unquoted on or off as a boolean.
// +kubebuilder:validation:Enum=Disabled;Enabled;SQPoll
type URingBridge string

const (
	// URingBridgeDisabled writes the VLog with pwrite (the server's default, off).
	URingBridgeDisabled URingBridge = "Disabled"
	// URingBridgeEnabled writes the VLog through io_uring (VELTRIXDB_URING_BRIDGE=on).
	URingBridgeEnabled URingBridge = "Enabled"
	// URingBridgeSQPoll adds a kernel submission-queue polling thread
	// (VELTRIXDB_URING_BRIDGE=sqpoll).
	URingBridgeSQPoll URingBridge = "SQPoll"
)

// ReclaimPolicy says what happens to the local PersistentVolumes and prepared disks when
// the cluster is deleted.
// +kubebuilder:validation:Enum=Retain;Delete
type ReclaimPolicy string

const (
	// ReclaimRetain keeps the PVs and the disks' data.
	ReclaimRetain ReclaimPolicy = "Retain"
	// ReclaimDelete deletes the PVs and releases the disks through the node agent.
	ReclaimDelete ReclaimPolicy = "Delete"
)

// VeltrixClusterSpec is the desired state of a VeltrixCluster. Its fields are those of the
// product document's sample, plus mode, net, auth, the disk selector and the reclaim
// policy. Rules that compare with the stored object protect data: the disks' layout and
// the volumes' class cannot change under a running cluster.
// +kubebuilder:validation:XValidation:rule="self.size >= self.replicationFactor",message="size must be at least replicationFactor (every key needs replicationFactor members to live on): raise size or lower replicationFactor"
// +kubebuilder:validation:XValidation:rule="self.mode != 'standalone' || (self.size == 1 && self.replicationFactor == 1)",message="mode standalone runs one member without replication: set size and replicationFactor to 1, or use mode replicated or raft"
// +kubebuilder:validation:XValidation:rule="self.net == 'go' || self.mode == 'standalone'",message="net cpp, uring and poll are refused by the server in mode raft and replicated: set net to go, or use mode standalone"
// +kubebuilder:validation:XValidation:rule="self.net == 'go' || !has(self.authConfig)",message="net cpp, uring and poll are refused by the server with an auth config: set net to go, or remove authConfig"
// +kubebuilder:validation:XValidation:rule="self.serverPort != self.metricsPort && self.serverPort != self.gossipPort && self.metricsPort != self.gossipPort",message="serverPort, metricsPort and gossipPort must all differ: give each its own port"
// +kubebuilder:validation:XValidation:rule="self.mode == oldSelf.mode",message="mode is fixed at creation (the data on the disks is laid out for it): set it back, or create a new cluster"
// +kubebuilder:validation:XValidation:rule="self.storageClassName == oldSelf.storageClassName",message="storageClassName is immutable (existing PersistentVolumes cannot move to another class): set it back to its previous value"
// +kubebuilder:validation:XValidation:rule="self.disksPerNode == oldSelf.disksPerNode",message="disksPerNode is immutable (the data is spread over the prepared disks): set it back to its previous value, or create a new cluster"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.diskSize) || (has(self.diskSize) && quantity(string(self.diskSize)).compareTo(quantity(string(oldSelf.diskSize))) >= 0)",message="diskSize can only grow (a shrunk volume would lose data): set it back to at least its previous value"
// +kubebuilder:validation:XValidation:rule="(self.uringBridge == 'Disabled' && self.net != 'uring') || has(self.seccompProfile)",message="uringBridge and net uring use io_uring, which the default seccomp profile (RuntimeDefault) blocks: set seccompProfile.type to Unconfined, or to Localhost with a profile that allows io_uring_setup, io_uring_enter and io_uring_register"
// +kubebuilder:validation:XValidation:rule="!has(self.seccompProfile) || self.seccompProfile.type != 'RuntimeDefault' || (!(has(self.rawVLog.enabled) && self.rawVLog.enabled) && self.uringBridge == 'Disabled' && self.net != 'uring')",message="seccompProfile RuntimeDefault blocks io_uring, which rawVLog, uringBridge and net uring use: set seccompProfile.type to Unconfined or Localhost (a profile that allows io_uring_setup, io_uring_enter and io_uring_register), or remove seccompProfile when only rawVLog is on"
// +kubebuilder:validation:XValidation:rule="!has(self.affinity) || !has(self.affinity.podAntiAffinity) || self.podAntiAffinityTopologyKey == 'kubernetes.io/hostname'",message="affinity.podAntiAffinity replaces the operator's anti-affinity, the only use of podAntiAffinityTopologyKey: put that key in a term of your own and leave podAntiAffinityTopologyKey at kubernetes.io/hostname, or remove affinity.podAntiAffinity"
// +kubebuilder:validation:XValidation:rule="self.rawVLog == oldSelf.rawVLog",message="rawVLog is immutable (changing it repartitions the disks and erases them): set it back, or create a new cluster"
type VeltrixClusterSpec struct {
	// Size is the number of members (pods). Never lowered below replicationFactor. At most
	// 256: every member gossips with every other and the operator prepares disks and
	// PersistentVolumes per member.
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=256
	// +optional
	Size int32 `json:"size,omitempty"`

	// Version is the server version, the image's tag; changing it rolls the pods one at a
	// time. A version that reads as MAJOR.MINOR[.PATCH] (with an optional leading v and
	// -pre suffix) must be at least 1.17.0 (MinVersion): the operator scales through online
	// membership (--join, --advertise-addr, /admin/cluster/members), new after v1.16. Other
	// tags (latest, a branch name) cannot be compared and are taken as they are.
	// +kubebuilder:default="1.17.0"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_][A-Za-z0-9._-]*$`
	// +kubebuilder:validation:XValidation:rule="!self.matches('^v?[0-9]+[.][0-9]+([.+-].*)?$') || self.matches('^v?0*([2-9]|[1-9][0-9]+)[.]') || self.matches('^v?0*1[.]0*(1[7-9]|[2-9][0-9]|[1-9][0-9][0-9]+)([.+-]|$)')",message="version must be 1.17.0 or later: the operator adds and removes members online (--join, --advertise-addr, /admin/cluster/members), which VeltrixDB has only since 1.17.0; set version to 1.17.0 or later"
	// +optional
	Version string `json:"version,omitempty"`

	// Image is the server image repository, without a tag (the tag is version).
	// +kubebuilder:default="ghcr.io/veltrixdb/veltrixdb"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="!self.contains('@') && !self.matches(':[^/]*$')",message="image is a repository without a tag or digest, such as ghcr.io/veltrixdb/veltrixdb: put the tag in version"
	// +optional
	Image string `json:"image,omitempty"`

	// ReplicationFactor is how many members hold each key; at most 16, since every write
	// waits on them.
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=16
	// +optional
	ReplicationFactor int32 `json:"replicationFactor,omitempty"`

	// CacheMaxSizeMB is the per-member LIRS cache size; unset leaves the server's default.
	// At most 16777216 (16 TiB), more memory than any node has.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:XValidation:rule="self <= 16777216",message="cacheMaxSizeMB must be at most 16777216 (16 TiB): the cache lives in the member's memory; set it below the memory limit of the pod"
	// +optional
	CacheMaxSizeMB *int64 `json:"cacheMaxSizeMB,omitempty"`

	// StorageClassName is the class of the local PersistentVolumes the operator creates
	// from the disks the node agent prepared. Immutable.
	// +kubebuilder:default="local-nvme"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +optional
	StorageClassName string `json:"storageClassName,omitempty"`

	// DisksPerNode is how many disks the node agent prepares on each member's node, one
	// PersistentVolume (and one data dir) each. Immutable. At most 32 (more NVMe slots than
	// a server has).
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=32
	// +optional
	DisksPerNode int32 `json:"disksPerNode,omitempty"`

	// DiskSize is the capacity each PersistentVolume declares; unset means the prepared
	// disk's (or XFS partition's) own size. It can grow, never shrink.
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).isGreaterThan(quantity('0'))",message="diskSize must be a positive quantity such as 375Gi: set it, or leave it unset for the whole disk"
	// +optional
	DiskSize *resource.Quantity `json:"diskSize,omitempty"`

	// DiskSelector picks the devices the node agent prepares on each node.
	// +kubebuilder:default={nvmeOnly:true}
	// +optional
	DiskSelector DiskSelector `json:"diskSelector,omitempty"`

	// ReclaimPolicy says whether the PersistentVolumes and prepared disks outlive the
	// cluster: Retain keeps them, Delete releases them through the node agent.
	// +kubebuilder:default=Retain
	// +optional
	ReclaimPolicy ReclaimPolicy `json:"reclaimPolicy,omitempty"`

	// Resources of the server container.
	// +kubebuilder:validation:XValidation:rule="['cpu', 'memory'].all(r, !has(self.requests) || !has(self.limits) || !(r in self.requests) || !(r in self.limits) || quantity(string(self.requests[r])).compareTo(quantity(string(self.limits[r]))) <= 0)",message="resources.requests must not exceed resources.limits for cpu and memory: raise the limit or lower the request"
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// ServerPort is the text protocol's port (--addr).
	// +kubebuilder:default=9000
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	ServerPort int32 `json:"serverPort,omitempty"`

	// MetricsPort is the HTTP port of /healthz, /readyz, /metrics and /admin (--metrics-addr).
	// +kubebuilder:default=2112
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	MetricsPort int32 `json:"metricsPort,omitempty"`

	// GossipPort is the members' gossip port.
	// +kubebuilder:default=7946
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	GossipPort int32 `json:"gossipPort,omitempty"`

	// RawVLog writes the value log straight to a raw partition of each disk. Immutable.
	// +kubebuilder:default={enabled:false}
	// +optional
	RawVLog RawVLogSpec `json:"rawVLog,omitempty"`

	// URingBridge turns on the io_uring VLog write bridge (VELTRIXDB_URING_BRIDGE=on, or
	// sqpoll for SQPoll). RuntimeDefault seccomp blocks io_uring_setup (the server would
	// fall back to pwrite without a word), so the bridge needs seccompProfile set to
	// Unconfined or to a Localhost profile that allows io_uring. Changing it rolls the pods.
	// +kubebuilder:default=Disabled
	// +optional
	URingBridge URingBridge `json:"uringBridge,omitempty"`

	// SeccompProfile is the members' seccomp profile. Unset, it is RuntimeDefault, or
	// Unconfined with rawVLog (the raw partition path calls io_uring_setup, which
	// RuntimeDefault blocks). io_uring (rawVLog, uringBridge, net uring) works under
	// Unconfined or under a Localhost profile that allows io_uring_setup, io_uring_enter
	// and io_uring_register (e.g. one installed by the Security Profiles Operator), never
	// under RuntimeDefault. Changing it rolls the pods.
	// +optional
	SeccompProfile *SeccompProfile `json:"seccompProfile,omitempty"`

	// PodAntiAffinityTopologyKey keeps members apart: at most one per value of this node
	// label.
	// +kubebuilder:default="kubernetes.io/hostname"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=316
	// +optional
	PodAntiAffinityTopologyKey string `json:"podAntiAffinityTopologyKey,omitempty"`

	// NodeSelector of the pods; it also picks the nodes whose disks are prepared.
	// +kubebuilder:validation:MaxProperties=64
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// Tolerations of the pods.
	// +kubebuilder:validation:MaxItems=64
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// Affinity of the pods. Without a podAntiAffinity of its own the cluster gets the
	// operator's: at most one member per value of podAntiAffinityTopologyKey (required).
	// The required terms of a nodeAffinity also pick the nodes whose disks are prepared, as
	// nodeSelector does, and nodes its preferred terms weigh more are prepared first; the
	// prepared nodes are spread over the topologyKey of each required podAntiAffinity term,
	// so that every member finds a node with disks the term allows. A required podAffinity
	// is refused: it follows other pods, which do not decide where disks are prepared, so
	// members could wait for ever on nodes without disks.
	// +kubebuilder:validation:XValidation:rule="!has(self.podAffinity) || !has(self.podAffinity.requiredDuringSchedulingIgnoredDuringExecution) || size(self.podAffinity.requiredDuringSchedulingIgnoredDuringExecution) == 0",message="affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution is refused: members run only on the nodes whose disks the operator prepared, which it picks by nodeSelector, nodeAffinity and tolerations, never by where other pods run; use podAffinity.preferredDuringSchedulingIgnoredDuringExecution, or a nodeAffinity"
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`

	// TopologySpreadConstraints of the pods. A constraint without a labelSelector spreads
	// the cluster's own members (the operator fills in their selector). The nodes whose
	// disks are prepared are picked spread over each constraint's topologyKey, fewest
	// prepared nodes first, so that the scheduler finds prepared nodes in the domains the
	// constraint asks for; a node without the topologyKey label of a DoNotSchedule
	// constraint is not prepared (the scheduler would never put a member there).
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +kubebuilder:validation:XValidation:rule="self.all(c, c.maxSkew >= 1)",message="topologySpreadConstraints[].maxSkew must be at least 1"
	// +kubebuilder:validation:XValidation:rule="self.all(c, c.whenUnsatisfiable in ['DoNotSchedule', 'ScheduleAnyway'])",message="topologySpreadConstraints[].whenUnsatisfiable must be DoNotSchedule (a hard rule) or ScheduleAnyway (a preference)"
	// +optional
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`

	// PriorityClassName of the pods: a PriorityClass that exists (the API server refuses a
	// pod naming one that does not, and the StatefulSet then makes none). A member runs
	// only on the node of its disks: a class that keeps it from being preempted there keeps
	// it serving. Changing it rolls the pods.
	// +optional
	PriorityClassName PriorityClassName `json:"priorityClassName,omitempty"`

	// TerminationGracePeriodSeconds is how long a stopping member has after SIGTERM: a
	// clean shutdown writes a compacted WAL checkpoint, and a member killed before it ends
	// replays its WAL on the next start. Between 1 and 86400; 60 by default. The kubelet
	// waits only while the server runs, so a fast exit is not slowed. Changing it rolls the
	// pods.
	// +kubebuilder:default=60
	// +kubebuilder:validation:XValidation:rule="self >= 1 && self <= 86400",message="terminationGracePeriodSeconds must be between 1 and 86400 seconds: 0 kills the server before it writes its checkpoint; set it to how long a checkpoint of your data takes, 60 by default"
	// +optional
	TerminationGracePeriodSeconds *int64 `json:"terminationGracePeriodSeconds,omitempty"`

	// Mode is the server's -mode. Fixed at creation.
	// +kubebuilder:default=replicated
	// +optional
	Mode Mode `json:"mode,omitempty"`

	// Net is the server's -net front end; cpp, uring and poll only in mode standalone
	// without authConfig, as the server refuses them otherwise.
	// +kubebuilder:default=go
	// +optional
	Net Net `json:"net,omitempty"`

	// AuthConfig is a Secret key holding the server's --auth-config file.
	// +optional
	AuthConfig *SecretKeyRef `json:"authConfig,omitempty"`

	// AdminTokenSecret is a Secret key holding the admin API's bearer token
	// (VELTRIX_ADMIN_TOKEN); the operator uses it for membership and checkpoints. Unset,
	// the operator creates one.
	// +optional
	AdminTokenSecret *SecretKeyRef `json:"adminTokenSecret,omitempty"`

	// IndexMapFallback allows VELTRIXDB_INDEX=map on pods whose node has vm.max_map_count
	// below 262144 and the node agent may not raise it; unset, such nodes are reported and
	// not used.
	// +optional
	IndexMapFallback bool `json:"indexMapFallback,omitempty"`

	// LostNodes says what happens to a member whose node is lost: deleted, or NotReady for
	// longer than gracePeriod, while it holds the member's local volumes. Manual (the
	// default) reports it and waits for the annotation veltrix.io/replace-member=<pod>;
	// Automatic replaces the member on another prepared node, its data copied from the
	// other replicas.
	// +kubebuilder:default={replace:Manual}
	// +optional
	LostNodes LostNodesSpec `json:"lostNodes,omitempty"`
}

// PriorityClassName names a PriorityClass.
// +kubebuilder:validation:MaxLength=253
// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="priorityClassName must name a PriorityClass: lowercase letters, digits, '-' and '.', such as system-cluster-critical or a class you created"
type PriorityClassName string

// LostNodeReplacement says whether a member of a lost node is replaced without a person.
// +kubebuilder:validation:Enum=Manual;Automatic
type LostNodeReplacement string

const (
	// LostNodeReplaceManual reports the lost member (condition MemberLost) and replaces it
	// once the cluster carries the annotation veltrix.io/replace-member=<pod>.
	LostNodeReplaceManual LostNodeReplacement = "Manual"
	// LostNodeReplaceAutomatic replaces the lost member as soon as it is safe.
	LostNodeReplaceAutomatic LostNodeReplacement = "Automatic"
)

// DefaultLostNodeGracePeriod is how long a member's node may be NotReady before it is lost.
const DefaultLostNodeGracePeriod = 10 * time.Minute

// LostNodesSpec is the policy for members whose node is lost.
type LostNodesSpec struct {
	// Replace is Manual (report, replace on the annotation veltrix.io/replace-member) or
	// Automatic (replace once the node is lost and the other members serve).
	// +kubebuilder:default=Manual
	// +optional
	Replace LostNodeReplacement `json:"replace,omitempty"`

	// GracePeriod is how long a member's node may be NotReady (its Ready condition False
	// or Unknown) before it counts as lost; a deleted node is lost at once. Default 10m.
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('168h')",message="lostNodes.gracePeriod must be a duration between 0s and 168h such as 10m: a node NotReady longer than it counts as lost"
	// +optional
	GracePeriod *metav1.Duration `json:"gracePeriod,omitempty"`
}

// GracePeriodOrDefault is GracePeriod, or DefaultLostNodeGracePeriod when unset.
func (l *LostNodesSpec) GracePeriodOrDefault() time.Duration {
	if l.GracePeriod == nil {
		return DefaultLostNodeGracePeriod
	}
	return l.GracePeriod.Duration
}

// RawVLogSpec splits each disk into an XFS partition (keys and WAL) and a raw one (values).
type RawVLogSpec struct {
	// Enabled turns the split on; the pods then run with seccomp Unconfined, unless
	// seccompProfile names a Localhost profile.
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// XFSPartitionPercent is the XFS partition's share of each disk.
	// +kubebuilder:default=20
	// +kubebuilder:validation:XValidation:rule="self >= 1 && self <= 99",message="rawVLog.xfsPartitionPercent must be between 1 and 99 (the rest of the disk is the raw VLog): the document's split is 20"
	// +optional
	XFSPartitionPercent int32 `json:"xfsPartitionPercent,omitempty"`
}

// SeccompProfile is a pod seccomp profile, as the pod's securityContext.seccompProfile.
// +kubebuilder:validation:XValidation:rule="self.type == 'Localhost' ? has(self.localhostProfile) : !has(self.localhostProfile)",message="seccompProfile.localhostProfile goes with type Localhost, and only with it: name the profile file (relative to the kubelet's seccomp directory) with type Localhost, or remove localhostProfile"
type SeccompProfile struct {
	// Type is RuntimeDefault, Unconfined or Localhost.
	// +kubebuilder:validation:Enum=RuntimeDefault;Unconfined;Localhost
	Type corev1.SeccompProfileType `json:"type"`

	// LocalhostProfile is the profile's file, relative to the kubelet's seccomp
	// directory; only with type Localhost.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +optional
	LocalhostProfile *string `json:"localhostProfile,omitempty"`
}

// DiskSelector filters the devices the node agent may prepare on a node.
// +kubebuilder:validation:XValidation:rule="!has(self.minSize) || !has(self.maxSize) || quantity(string(self.minSize)).compareTo(quantity(string(self.maxSize))) <= 0",message="diskSelector.minSize must not exceed diskSelector.maxSize: lower minSize or raise maxSize"
type DiskSelector struct {
	// Model, when set, must equal the device's model as sysfs reports it.
	// +kubebuilder:validation:MaxLength=128
	// +optional
	Model string `json:"model,omitempty"`

	// MinSize is the smallest acceptable device.
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).isGreaterThan(quantity('0'))",message="diskSelector.minSize must be a positive quantity such as 100Gi, or unset"
	// +optional
	MinSize *resource.Quantity `json:"minSize,omitempty"`

	// MaxSize is the largest acceptable device.
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).isGreaterThan(quantity('0'))",message="diskSelector.maxSize must be a positive quantity such as 4Ti, or unset"
	// +optional
	MaxSize *resource.Quantity `json:"maxSize,omitempty"`

	// NVMeOnly keeps NVMe devices only.
	// +kubebuilder:default=true
	// +optional
	NVMeOnly *bool `json:"nvmeOnly,omitempty"`
}

// SecretKeyRef names a key of a Secret in the cluster's namespace.
type SecretKeyRef struct {
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="name must be a Secret name: lowercase letters, digits, '-' and '.'"
	// +required
	Name string `json:"name"`

	// Key in the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	// +required
	Key string `json:"key"`
}

// VeltrixCluster is a VeltrixDB cluster on NVMe disks the node agent prepares. Its name
// is at most MaxNameLength characters and a DNS-1035 label: it names the client Service and
// the StatefulSet, whose controller-revision-hash label <name>-<hash of up to 10
// characters> is the longest name derived from it and must stay a label value (63).
// The name rules apply on create only (a name never changes), so an object admitted
// before them stays updatable and its finalizer can still be removed.
// +kubebuilder:validation:XValidation:rule="oldSelf.hasValue() || self.metadata.name.size() <= 52",message="metadata.name must be at most 52 characters: the StatefulSet <name> labels its pods with controller-revision-hash <name>-<hash of up to 10 characters>, which must fit in 63; choose a shorter name",optionalOldSelf=true
// +kubebuilder:validation:XValidation:rule="oldSelf.hasValue() || self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must start with a lowercase letter and hold only lowercase letters, digits and '-' (no '.'): it names the cluster's Services",optionalOldSelf=true
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=vc,categories=opsuite
// +kubebuilder:printcolumn:name="Size",type=integer,JSONPath=`.spec.size`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyMembers`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.spec.version`
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.reason`,description="Why the cluster is in that state"
// +kubebuilder:printcolumn:name="Epoch",type=integer,JSONPath=`.status.epoch`,priority=1,description="Membership epoch the members agree on"
// +kubebuilder:printcolumn:name="Last Scale",type=date,JSONPath=`.status.lastScaleTime`,priority=1,description="When the member count last changed"
// +kubebuilder:printcolumn:name="Last Failover",type=date,JSONPath=`.status.lastFailoverTime`,description="When the operator last removed a lost node's member at once to replace it elsewhere"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type VeltrixCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   VeltrixClusterSpec   `json:"spec,omitempty"`
	Status VeltrixClusterStatus `json:"status,omitempty"`
}

// VeltrixClusterList is a list of VeltrixCluster.
// +kubebuilder:object:root=true
type VeltrixClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VeltrixCluster `json:"items"`
}
