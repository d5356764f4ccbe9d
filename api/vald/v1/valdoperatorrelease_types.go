package v1

import (
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Bounds the CRD enforces (the admission test pins each). MaxNameLength is the longest
// metadata.name: it is a label value on every ValdRelease. MaxClusterNameLength leaves
// room in <namespace>-<name> (63) for the shortest namespace and the dash.
const (
	MaxNameLength        = 63
	MaxClusterNameLength = 61
	MaxClusters          = 64
	MaxEdgeSize          = 1000
	MaxConcurrency       = 10000
	// MaxGatewayReplicas bounds gateway.minReplicas and maxReplicas: a gateway fans every
	// request out to the agents, so past one replica per agent (MaxConcurrency) more adds
	// nothing.
	MaxGatewayReplicas = 10000
)

// ValdOperatorReleaseSpec describes the Vald deployment a user wants across clusters: where
// (infrastructure) and what (vectorEngine). The controller turns it into one ValdRelease per
// cluster of every active infrastructure entry.
type ValdOperatorReleaseSpec struct {
	// Infrastructure lists groups of clusters Vald is released to. An empty list is legal at
	// admission (an external system may fill it in) and makes the WaitingClusterCreate phase Failed.
	// At most 64 clusters in all (MaxClusters): each gets a ValdRelease carrying the whole
	// chart values (overlay included), which the operator renders and holds in memory.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:XValidation:rule="self.all(i, self.exists_one(j, j.role == i.role))",message="each infrastructure entry needs its own role; rename the duplicate role"
	// +kubebuilder:validation:XValidation:rule="self.map(i, has(i.clusters) ? size(i.clusters) : 0).sum() <= 64",message="infrastructure must list at most 64 clusters in all: each gets its own ValdRelease with the whole chart values; split the release"
	Infrastructure []Infrastructure `json:"infrastructure,omitempty"`

	// VectorEngine is the Vald configuration every generated ValdRelease carries.
	VectorEngine VectorEngine `json:"vectorEngine"`
}

// Infrastructure is one group of clusters sharing a role (green/blue, hot/cold).
type Infrastructure struct {
	// Role is a free label for this entry, such as green or blue. It is the value of the
	// vald.vdaas.org/role label of the entry's ValdReleases, so it must be a valid label value.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="size(self) <= 63 && self.matches('^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$')",message="role must be a valid label value (it labels the ValdReleases): at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
	Role string `json:"role"`

	// Type is a hint of the cluster type (kind, eks, gke...); informational only.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Type string `json:"type,omitempty"`

	// Active says whether ValdReleases are generated for this entry's clusters.
	// +optional
	// +kubebuilder:default=true
	Active *bool `json:"active,omitempty"`

	// Clusters are the clusters of this entry. An empty list is legal at admission and makes
	// the WaitingClusterCreate phase Failed.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="self.all(c, !has(c.name) || size(c.name) == 0 || self.exists_one(d, has(d.name) && d.name == c.name))",message="cluster names must be unique within an infrastructure entry; rename the duplicate cluster"
	Clusters []Cluster `json:"clusters,omitempty"`

	// NodePools size and place the Vald components.
	// +optional
	NodePools NodePools `json:"nodePools,omitempty"`
}

// IsActive reports whether ValdReleases are generated for the entry; unset means active.
func (i Infrastructure) IsActive() bool { return i.Active == nil || *i.Active }

// Cluster is one Kubernetes cluster that receives a ValdRelease.
// +kubebuilder:validation:XValidation:rule="!has(self.name) || size(self.name) == 0 || self.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="cluster name must be lowercase letters, digits and '-', starting and ending with a letter or digit, because it names the ValdRelease"
// +kubebuilder:validation:XValidation:rule="!has(self.name) || size(self.name) <= 61",message="cluster name must be at most 61 characters: the ValdRelease is named <namespace>-<name>, which must fit in 63 (the operator reports a longer one with the namespace's length)"
type Cluster struct {
	// ID identifies the cluster; an external system fills it in once the cluster exists.
	// While it is empty the release waits (Pending).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	ID string `json:"id,omitempty"`

	// Name names the cluster; the ValdRelease is named <namespace>-<name>, at most 63
	// characters, so the name is at most 61 (MaxClusterNameLength, with a one-character
	// namespace); the operator reports a longer <namespace>-<name>, which admission cannot
	// see. While it is empty the release waits (Pending).
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name,omitempty"`
}

// NodePoolType is the kind of node pool, also the value of the <prefix>/type node label.
type NodePoolType string

// Node pool types.
const (
	// NodePoolTypeGeneral hosts the gateway, discoverer and index manager (and the agents
	// when there is no agent pool).
	NodePoolTypeGeneral NodePoolType = "general"
	// NodePoolTypeValdAgent hosts the Vald agents (NGT).
	NodePoolTypeValdAgent NodePoolType = "agent"
)

// NodePools are the node pools of an infrastructure entry.
type NodePools struct {
	// General hosts the gateway, discoverer and index manager.
	// +optional
	General *NodePool `json:"general,omitempty"`
	// Agent is a dedicated pool for the Vald agents; without it the agents use General.
	// +optional
	Agent *NodePool `json:"agent,omitempty"`
}

// NodePool is a group of identical nodes.
type NodePool struct {
	// Name of the pool at the infrastructure provider.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name,omitempty"`

	// Replicas is the number of nodes; for the agent pool, the number of agents. At most
	// 10000, past the largest Kubernetes cluster (5000 nodes).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	Replicas int32 `json:"replicas"`

	// MachineResource is what one node of the pool offers.
	// +optional
	MachineResource MachineResource `json:"machineResource,omitempty"`
}

// MachineResource is the capacity of one node, as Kubernetes quantities.
type MachineResource struct {
	// CPU of one node, such as "4" or "3500m".
	// +optional
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="isQuantity(self) && quantity(self).isGreaterThan(quantity('0'))",message="machineResource.cpu must be a positive quantity, such as \"4\" or \"3500m\""
	CPU string `json:"cpu,omitempty"`
	// Memory of one node, such as "16Gi"; sizes the agent's persistent volume.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="isQuantity(self) && quantity(self).isGreaterThan(quantity('0'))",message="machineResource.memory must be a positive quantity, such as \"16Gi\""
	Memory string `json:"memory,omitempty"`
	// Storage of one node, such as "100Gi"; informational.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="isQuantity(self) && quantity(self).isGreaterThan(quantity('0'))",message="machineResource.storage must be a positive quantity, such as \"100Gi\""
	Storage string `json:"storage,omitempty"`
}

// VectorEngine names the engine and holds its configuration.
type VectorEngine struct {
	// Name of the vector engine deployment; a label value on every ValdRelease.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="vectorEngine.name must be lowercase letters, digits and '-', starting and ending with a letter or digit"
	Name string `json:"name"`

	// Vald is the Vald configuration, mapped to Vald Helm chart values.
	Vald Vald `json:"vald"`
}

// Vald is the Vald configuration of a release.
type Vald struct {
	// +optional
	Defaults Defaults `json:"defaults,omitempty"`
	Agent    Agent    `json:"agent"`
	// +optional
	Indexer Indexer `json:"indexer,omitempty"`
	// +optional
	Gateway Gateway `json:"gateway,omitempty"`
	// +optional
	Discoverer Discoverer `json:"discoverer,omitempty"`

	// Overlay is arbitrary Vald chart values deep-merged last over the generated values:
	// objects merge key by key, anything else (lists included) replaces, null removes a key.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	Overlay *apiextensionsv1.JSON `json:"overlay,omitempty"`
}

// Defaults are chart-wide settings.
type Defaults struct {
	// LogLevel of every Vald component.
	// +optional
	// +kubebuilder:validation:Enum=debug;info;warn;error;fatal
	LogLevel string `json:"logLevel,omitempty"`
}

// Agent configures the Vald agents.
type Agent struct {
	NGT NGT `json:"ngt"`
	// PersistentVolume keeps the agents' index across restarts.
	// +optional
	PersistentVolume *PersistentVolume `json:"persistentVolume,omitempty"`
	// MemoryLimit is the agents' memory limit, such as "24Gi". Unset, agents have none: NGT
	// memory-maps its index, and a limit kills an agent whose index outgrew it (see the
	// operator's README). It must be at least the memory an agent requests.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="isQuantity(self) && quantity(self).isGreaterThan(quantity('0'))",message="agent.memoryLimit must be a positive quantity, such as \"24Gi\"; leave it out for no limit"
	MemoryLimit string `json:"memoryLimit,omitempty"`
	// TopologySpreadConstraints spread the agents' pods; unset spreads them one per node
	// (see TopologySpread), an empty list turns spreading off.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	TopologySpreadConstraints *[]TopologySpread `json:"topologySpreadConstraints,omitempty"`
	// Placement of the agents' pods: the Vald chart's agent.affinity, nodeSelector,
	// tolerations, podPriority and terminationGracePeriodSeconds, over the agent pool's
	// placement (see Placement). An agent saves its index when it stops: its grace period
	// (the chart's 120 seconds unless set) must cover that.
	Placement `json:",inline"`
}

// Placement is where a component's pods run, at what priority and how long they have to
// stop, written under the Vald chart's own keys of the component. Unset fields leave the
// chart's defaults. The node pool's placement stays: the nodeSelector adds labels to the
// pool's (the same key with another value is refused when the ValdRelease is built), the
// tolerations add to the pool's, and the affinity applies on top of the pool's
// nodeSelector, since a pod must match both (a required node affinity no node of the pool
// can match is refused when the ValdRelease is built).
type Placement struct {
	// Affinity of the pods (the chart's <component>.affinity). A podAntiAffinity replaces
	// the chart's default preference; a nodeAffinity's required terms are ANDed with the
	// node pool's nodeSelector.
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`

	// NodeSelector adds node labels the pods require to the node pool's (the chart's
	// <component>.nodeSelector). A key the node pool sets must keep the pool's value.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 317 && k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$'))",message="nodeSelector keys must be node label keys such as topology.kubernetes.io/zone: an optional DNS prefix and '/', then at most 63 letters, digits, '-', '_' or '.'"
	NodeSelector map[string]LabelValue `json:"nodeSelector,omitempty"`

	// Tolerations of the pods, added to the node pool's toleration of its taint (the
	// chart's <component>.tolerations).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="self.all(t, !has(t.effect) || t.effect in ['NoSchedule', 'PreferNoSchedule', 'NoExecute'])",message="tolerations[].effect must be NoSchedule, PreferNoSchedule or NoExecute, or left out to tolerate every effect"
	// +kubebuilder:validation:XValidation:rule="self.all(t, !has(t.operator) || t.operator in ['Exists', 'Equal'])",message="tolerations[].operator must be Equal or Exists"
	// +kubebuilder:validation:XValidation:rule="self.all(t, !has(t.operator) || t.operator != 'Exists' || !has(t.value) || t.value == '')",message="tolerations[] with operator Exists must have no value: remove the value or use operator Equal"
	// +kubebuilder:validation:XValidation:rule="self.all(t, (has(t.key) && t.key != '') || (has(t.operator) && t.operator == 'Exists'))",message="tolerations[] without a key must have operator Exists (it tolerates every taint): add a key or set operator Exists"
	// +kubebuilder:validation:XValidation:rule="self.all(t, !has(t.tolerationSeconds) || (has(t.effect) && t.effect == 'NoExecute'))",message="tolerations[].tolerationSeconds applies to effect NoExecute only: set effect NoExecute or remove tolerationSeconds"
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// PodPriority is the Vald chart's PriorityClass of the component (<component>.podPriority):
	// the chart creates a class <namespace>-<component name>-priority of this value (the
	// agents' with preemptionPolicy Never) and runs the pods in it; it has no key to name
	// a class of your own. Unset keeps the chart's default: on, at 1000000000 for agents and
	// 1000000 for the others.
	// +optional
	PodPriority *PodPriority `json:"podPriority,omitempty"`

	// TerminationGracePeriodSeconds is how long a stopping pod has after SIGTERM (the
	// chart's <component>.terminationGracePeriodSeconds; unset keeps the chart's 120
	// seconds for agents and 30 for the others). Between 1 and 86400.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self >= 1 && self <= 86400",message="terminationGracePeriodSeconds must be between 1 and 86400 seconds: 0 kills the pod at once, and an agent killed before it saved its index loses the vectors not yet saved; leave it out for the Vald chart's default (120 for agents, 30 for the others)"
	TerminationGracePeriodSeconds *int64 `json:"terminationGracePeriodSeconds,omitempty"`
}

// PodPriority is the Vald chart's podPriority of a component: whether the chart's
// PriorityClass is used, and its value.
// +kubebuilder:validation:XValidation:rule="has(self.enabled) || has(self.value)",message="podPriority needs enabled or value: enabled false runs the pods without a class, a value sets the chart's class to it"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.value) || !has(self.value) || self.value == oldSelf.value || (has(oldSelf.enabled) && !oldSelf.enabled)",message="podPriority.value cannot change while the class exists: Kubernetes refuses to change a PriorityClass's value, so the Vald Helm Operator's upgrade would fail. Set enabled: false first (the chart deletes the class), then the new value with enabled: true"
type PodPriority struct {
	// Enabled runs the pods in the chart's PriorityClass; false runs them without a class
	// (the cluster's default priority). Unset keeps the chart's default, true.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
	// Value of the PriorityClass: higher schedules first and is preempted last. At most
	// 1000000000, the highest a user-defined class may have.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self <= 1000000000",message="podPriority.value must be at most 1000000000, the highest value Kubernetes allows a PriorityClass that is not a system class"
	Value *int32 `json:"value,omitempty"`
}

// LabelValue is a label's value.
// +kubebuilder:validation:MaxLength=63
// +kubebuilder:validation:XValidation:rule="self.matches('^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$')",message="nodeSelector values must be label values: at most 63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit, or empty"
type LabelValue string

// TopologySpread is one topology spread constraint of a component's pods. The lists of
// them are pointers so that a Go client tells the default (nil, left out) from no
// spreading (a pointer to an empty list, sent as []). The operator adds the label selector (the component's pods of this cluster) and nodeTaintsPolicy
// Honor, so nodes cordoned for a drain do not count as empty domains.
type TopologySpread struct {
	// MaxSkew is the largest difference in pods between two domains.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	MaxSkew int32 `json:"maxSkew,omitempty"`
	// TopologyKey is the node label whose values are the domains, such as
	// kubernetes.io/hostname or topology.kubernetes.io/zone.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:XValidation:rule="self.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$')",message="topologyKey must be a node label key such as kubernetes.io/hostname or topology.kubernetes.io/zone"
	TopologyKey string `json:"topologyKey"`
	// WhenUnsatisfiable is DoNotSchedule (a pod waits rather than break the skew) or
	// ScheduleAnyway (the skew is a preference).
	// +optional
	// +kubebuilder:validation:Enum=DoNotSchedule;ScheduleAnyway
	WhenUnsatisfiable string `json:"whenUnsatisfiable,omitempty"`
}

// NGT configures the NGT index of the agents.
type NGT struct {
	// Dimension of the vectors; at most 65536 (embeddings have hundreds to a few thousand).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65536
	Dimension int32 `json:"dimension"`
	// DistanceType is the distance function.
	// +optional
	// +kubebuilder:default=l2
	// +kubebuilder:validation:Enum=l1;l2;angle;hamming;cosine;poincare;lorentz;jaccard;sparsejaccard;normalizedl2;normalizedangle;normalizedcosine;innerproduct
	DistanceType string `json:"distanceType,omitempty"`
	// ObjectType is the element type of the vectors.
	// +optional
	// +kubebuilder:default=float
	// +kubebuilder:validation:Enum=float;uint8;float16
	ObjectType string `json:"objectType,omitempty"`
	// CreationEdgeSize is the number of edges per node when the graph is built. At most
	// 1000: NGT graphs use tens, and each edge costs memory in every agent.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:XValidation:rule="self <= 1000",message="creationEdgeSize must be at most 1000: NGT graphs use tens of edges per node and each costs memory in every agent"
	CreationEdgeSize int32 `json:"creationEdgeSize,omitempty"`
	// SearchEdgeSize is the number of edges explored per node at search time; at most 1000,
	// as creationEdgeSize.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:XValidation:rule="self <= 1000",message="searchEdgeSize must be at most 1000: NGT searches explore tens of edges per node"
	SearchEdgeSize int32 `json:"searchEdgeSize,omitempty"`
}

// PersistentVolume configures the agents' volumes. The size is derived from the agent
// node's memory (see the operator's README).
type PersistentVolume struct {
	// Enabled turns persistent volumes on.
	Enabled bool `json:"enabled"`
	// StorageClass of the volumes; empty uses the operator's --default-storage-class.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	StorageClass string `json:"storageClass,omitempty"`
	// AccessMode of the volumes; empty uses the operator's --default-access-mode.
	// +optional
	// +kubebuilder:validation:Enum=ReadWriteOnce;ReadOnlyMany;ReadWriteMany;ReadWriteOncePod
	AccessMode string `json:"accessMode,omitempty"`
}

// Indexer configures when the index is built and saved.
// +kubebuilder:validation:XValidation:rule="!has(self.indexSchedule) || size(self.indexSchedule) == 0 || self.indexSchedule.matches('^(@(yearly|annually|monthly|weekly|daily|midnight|hourly)|@every ([0-9]+(ns|us|ms|s|m|h))+|[^ ]+( +[^ ]+){4})$')",message="indexer.indexSchedule must be a CronJob schedule: five fields such as \"*/30 * * * *\", a macro such as @hourly, or @every 30m"
// +kubebuilder:validation:XValidation:rule="!has(self.saveSchedule) || size(self.saveSchedule) == 0 || self.saveSchedule.matches('^(@(yearly|annually|monthly|weekly|daily|midnight|hourly)|@every ([0-9]+(ns|us|ms|s|m|h))+|[^ ]+( +[^ ]+){4})$')",message="indexer.saveSchedule must be a CronJob schedule: five fields such as \"0 * * * *\", a macro such as @hourly, or @every 1h"
// +kubebuilder:validation:XValidation:rule="!has(self.indexDuration) || self.indexDuration.matches('^([0-9]+(\\\\.[0-9]+)?(ns|us|ms|s|m|h))+$')",message="indexer.indexDuration must be a duration such as 30m or 1h"
// +kubebuilder:validation:XValidation:rule="!has(self.saveDuration) || self.saveDuration.matches('^([0-9]+(\\\\.[0-9]+)?(ns|us|ms|s|m|h))+$')",message="indexer.saveDuration must be a duration such as 30m or 1h"
// +kubebuilder:validation:XValidation:rule="(has(self.manager) && self.manager) || (!has(self.podPriority) && !has(self.terminationGracePeriodSeconds))",message="indexer.podPriority and indexer.terminationGracePeriodSeconds apply to the index manager only: the Vald chart's index creator and saver jobs have no such keys; set indexer.manager: true or remove them"
type Indexer struct {
	// IndexSchedule is the cron schedule of the index creator job, and of the saver job
	// when SaveSchedule is empty; used when Manager is false.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	IndexSchedule string `json:"indexSchedule,omitempty"`
	// IndexSuspend suspends the index creator job (its CronJob's suspend), used when
	// Manager is false.
	// +optional
	IndexSuspend bool `json:"indexSuspend,omitempty"`
	// SaveSchedule is the cron schedule of the index saver job; empty uses IndexSchedule.
	// Used when Manager is false.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	SaveSchedule string `json:"saveSchedule,omitempty"`
	// SaveSuspend suspends the index saver job, used when Manager is false.
	// +optional
	SaveSuspend bool `json:"saveSuspend,omitempty"`
	// Concurrency is how many agents are indexed at once; at most 10000, the most agents a
	// pool has (nodePools.*.replicas).
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:XValidation:rule="self <= 10000",message="indexer.concurrency must be at most 10000, the most agents a node pool has"
	Concurrency int32 `json:"concurrency,omitempty"`
	// Manager runs the index manager (auto indexing) instead of scheduled jobs.
	// +optional
	Manager bool `json:"manager,omitempty"`
	// IndexDuration is how often the manager checks whether to index, such as 1h.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	IndexDuration string `json:"indexDuration,omitempty"`
	// SaveDuration is how long the manager waits before saving the index, such as 1h.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	SaveDuration string `json:"saveDuration,omitempty"`
	// TopologySpreadConstraints spread the index manager's pods; unset spreads them across
	// nodes (see TopologySpread), an empty list turns spreading off.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	TopologySpreadConstraints *[]TopologySpread `json:"topologySpreadConstraints,omitempty"`
	// Placement of the index manager's pods (the chart's manager.index keys) and, with
	// manager false, of the index creator and saver jobs' pods, which the chart places by
	// affinity, nodeSelector and tolerations only (manager.index.creator and .saver).
	Placement `json:",inline"`
}

// Gateway configures the load-balancing gateway. Its replicas follow the agents unless
// minReplicas or maxReplicas is set (the operator's README gives the rule).
// +kubebuilder:validation:XValidation:rule="!has(self.minReplicas) || !has(self.maxReplicas) || self.minReplicas <= self.maxReplicas",message="gateway.minReplicas must be at most gateway.maxReplicas"
type Gateway struct {
	// IndexReplica is how many agents hold each vector.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	IndexReplica int32 `json:"indexReplica,omitempty"`
	// ServiceType of the gateway Service; empty uses the operator's --gateway-service-type.
	// +optional
	// +kubebuilder:validation:Enum=ClusterIP;NodePort;LoadBalancer
	ServiceType string `json:"serviceType,omitempty"`
	// Ingress exposes the gateway.
	// +optional
	Ingress *Ingress `json:"ingress,omitempty"`
	// MinReplicas is the fewest gateway pods (the chart's gateway.lb.minReplicas, the
	// autoscaler's floor); unset derives it from the agent count.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:XValidation:rule="self <= 10000",message="gateway.minReplicas must be at most 10000, one gateway per agent of the largest pool"
	MinReplicas *int32 `json:"minReplicas,omitempty"`
	// MaxReplicas is the most gateway pods the autoscaler may run (the chart's
	// gateway.lb.maxReplicas); unset derives it from the agent count.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:XValidation:rule="self <= 10000",message="gateway.maxReplicas must be at most 10000, one gateway per agent of the largest pool"
	MaxReplicas *int32 `json:"maxReplicas,omitempty"`
	// TopologySpreadConstraints spread the gateway's pods; unset spreads them across nodes
	// (see TopologySpread), an empty list turns spreading off.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	TopologySpreadConstraints *[]TopologySpread `json:"topologySpreadConstraints,omitempty"`
	// Placement of the gateway's pods (the chart's gateway.lb keys), over the general
	// pool's placement (see Placement).
	Placement `json:",inline"`
}

// Ingress exposes the gateway through an Ingress.
type Ingress struct {
	// Enabled creates the Ingress.
	Enabled bool `json:"enabled"`
	// Host of the Ingress; empty uses <cluster name>.<--ingress-domain> when that is set.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="size(self) == 0 || self.matches('^(\\\\*\\\\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="ingress.host must be a lowercase DNS name such as vald.example.com"
	Host string `json:"host,omitempty"`
	// Annotations of the Ingress (an ingress controller's settings), over the operator's
	// --gateway-ingress-annotations key by key.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 316 && k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$'))",message="ingress.annotations keys must be annotation keys: an optional DNS prefix and '/', then at most 63 letters, digits, '-', '_' or '.'"
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Discoverer configures the discoverer.
type Discoverer struct {
	// Kind of the discoverer workload; empty uses the operator's --discoverer-kind.
	// +optional
	// +kubebuilder:validation:Enum=DaemonSet;Deployment
	Kind string `json:"kind,omitempty"`
	// TopologySpreadConstraints spread a Deployment discoverer's pods; unset spreads them
	// across nodes (see TopologySpread), an empty list turns spreading off.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	TopologySpreadConstraints *[]TopologySpread `json:"topologySpreadConstraints,omitempty"`
	// Placement of the discoverer's pods, DaemonSet or Deployment (the chart's discoverer
	// keys), over the general pool's placement (see Placement).
	Placement `json:",inline"`
}

// Progress counts lifecycle phases. Both fields default to 0: status is written as a
// merge patch, which leaves out a field whose value did not change from the zero value.
type Progress struct {
	// Total is the number of lifecycle phases.
	// +optional
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	Total int32 `json:"total"`
	// Completed is the number of phases that have succeeded.
	// +optional
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	Completed int32 `json:"completed"`
}

// ValdOperatorReleaseStatus is the observed state of a ValdOperatorRelease.
type ValdOperatorReleaseStatus struct {
	// ObservedGeneration is the generation the status was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Phase is the type of the lifecycle phase being processed.
	// +optional
	Phase string `json:"phase,omitempty"`
	// State summarizes the conditions: Ready, Reconciling, Pending or Failed.
	// +optional
	State string `json:"state,omitempty"`
	// Progress counts the lifecycle phases.
	// +optional
	Progress Progress `json:"progress,omitempty"`
	// ProgressText is Progress as completed/total, for printing.
	// +optional
	ProgressText string `json:"progressText,omitempty"`
	// Conditions holds one condition per lifecycle phase reached.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ValdOperatorRelease generates ValdRelease objects for the Vald Helm Operator.
// +kubebuilder:object:root=true
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63",message="metadata.name must be at most 63 characters: it is the value of the vald.vdaas.org/operator-release label on every ValdRelease"
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=vor,categories=opsuite
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Progress",type=string,JSONPath=`.status.progressText`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ValdOperatorRelease struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ValdOperatorReleaseSpec   `json:"spec,omitempty"`
	Status ValdOperatorReleaseStatus `json:"status,omitempty"`
}

// ValdOperatorReleaseList is a list of ValdOperatorRelease.
// +kubebuilder:object:root=true
type ValdOperatorReleaseList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ValdOperatorRelease `json:"items"`
}
