package resources

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"

	valdv1 "github.com/opsuite/suite/api/vald/v1"
	"github.com/opsuite/suite/api/vald/valdchart"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// MaxNameLength is the longest ValdRelease name: upstream names it <namespace>-<cluster>
// and keeps it a DNS label.
const MaxNameLength = 63

// FieldManager is the server-side apply field manager of the controller.
const FieldManager = "vald-operator"

// Error is a build failure that no retry fixes: the spec (or the nodes) must change. Its
// message is stable for a given spec, so it can stand in a condition.
type Error struct {
	// Empty is true when the release asks for no ValdRelease at all.
	Empty   bool
	Message string
}

func (e *Error) Error() string { return e.Message }

// NodePools is what the node-pool match found: the pool types that have labelled nodes in
// the release's namespace. A nil NodePools means the match is off.
type NodePools map[valdv1.NodePoolType]bool

// Input is everything a build reads.
type Input struct {
	Release *valdv1.ValdOperatorRelease
	// Nodes is the node-pool match; nil when REQUIRE_NODEPOOL_MATCH is off.
	Nodes NodePools
	// Legacy holds the names of the ValdReleases that exist without the per-cluster name
	// keys (see LegacyNamed): they keep the chart's default names they were installed with.
	Legacy map[string]bool
}

// Name is the name of the ValdRelease of a cluster.
func Name(namespace, cluster string) string { return namespace + "-" + cluster }

// DesiredValdReleases returns the ValdReleases of every cluster of every active
// infrastructure entry (that the node-pool match admits), sorted by name. It fails with an
// *Error when the set would be empty, so that a caller never prunes everything because of
// a transient or mistaken render.
func DesiredValdReleases(in Input, cfg Config) ([]*valdv1.ValdRelease, error) {
	vor := in.Release
	var (
		out     []*valdv1.ValdRelease
		active  int
		seen    = map[string]string{}
		skipped int
		renders = map[string][]valdchart.Resource{}
	)
	for _, infra := range vor.Spec.Infrastructure {
		if !infra.IsActive() {
			continue
		}
		active++
		if in.Nodes != nil && !in.Nodes.admit(infra) {
			skipped++
			continue
		}
		for _, cl := range infra.Clusters {
			if cl.Name == "" {
				return nil, &Error{Message: fmt.Sprintf("A cluster of infrastructure entry %q has no name yet.", infra.Role)}
			}
			name := Name(vor.Namespace, cl.Name)
			if len(name) > MaxNameLength {
				return nil, &Error{Message: fmt.Sprintf("ValdRelease name %q is %d characters, longer than %d: shorten cluster name %q.", name, len(name), MaxNameLength, cl.Name)}
			}
			if role, dup := seen[name]; dup {
				return nil, &Error{Message: fmt.Sprintf("Cluster name %q is used by infrastructure entries %q and %q: give each cluster its own name.", cl.Name, role, infra.Role)}
			}
			seen[name] = infra.Role
			vr, values, err := desiredValdRelease(vor, infra, cl, cfg, !in.Legacy[name])
			if err != nil {
				return nil, err
			}
			out = append(out, vr)
			renders[vr.Name] = valdchart.Objects(vr.Name, vr.Namespace, values)
		}
	}
	if len(out) == 0 {
		switch {
		case active == 0:
			return nil, &Error{Empty: true, Message: "No infrastructure entry is active, so there is no ValdRelease to create; nothing was pruned. Set active: true on an entry."}
		case skipped == active:
			return nil, &Error{Empty: true, Message: "No node carries the node-pool labels of this namespace, so there is no ValdRelease to create; nothing was pruned. Label the pool's nodes or turn the node-pool match off."}
		default:
			return nil, &Error{Empty: true, Message: "The active infrastructure entries have no clusters, so there is no ValdRelease to create; nothing was pruned."}
		}
	}
	if clashes := valdchart.Clashes(renders); len(clashes) > 0 {
		c := clashes[0]
		if in.Legacy[c.A] || in.Legacy[c.B] {
			return nil, &Error{Message: fmt.Sprintf("ValdReleases %q and %q would both make the Vald chart render %s, and Helm installs an object for one release only: %s (by an operator before per-cluster names), so that no agent loses its volumes. Delete the one the Vald Helm Operator could not deploy (Helm gave the objects to the other, so it holds no data): it is created again with per-cluster names. Nothing was written.", c.A, c.B, c.Object, legacyWho(in.Legacy, c.A, c.B))}
		}
		return nil, &Error{Message: fmt.Sprintf("ValdReleases %q and %q would both make the Vald chart render %s, and Helm installs an object for one release only: the overlay gives the clusters the same name for it; leave the components' names to the operator or make them differ per cluster. Nothing was written.", c.A, c.B, c.Object)}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// admit reports whether the pools an entry declares have labelled nodes: an entry without
// a general pool does not need general nodes, one without an agent pool no agent nodes.
func (n NodePools) admit(infra valdv1.Infrastructure) bool {
	if infra.NodePools.General != nil && !n[valdv1.NodePoolTypeGeneral] {
		return false
	}
	return infra.NodePools.Agent == nil || n[valdv1.NodePoolTypeValdAgent]
}

// Unmatched returns the roles of the active entries the node-pool match leaves out, in
// spec order; none when the match is off.
func Unmatched(in Input) []string {
	if in.Nodes == nil {
		return nil
	}
	var roles []string
	for _, infra := range in.Release.Spec.Infrastructure {
		if infra.IsActive() && !in.Nodes.admit(infra) {
			roles = append(roles, infra.Role)
		}
	}
	return roles
}

// desiredValdRelease returns the ValdRelease of one cluster and the chart values it carries.
// Without perCluster the components keep the chart's default names (a legacy ValdRelease).
func desiredValdRelease(vor *valdv1.ValdOperatorRelease, infra valdv1.Infrastructure, cl valdv1.Cluster, cfg Config, perCluster bool) (*valdv1.ValdRelease, map[string]any, error) {
	values, err := chartValues(vor, infra, cl, cfg, perCluster)
	if err != nil {
		return nil, nil, err
	}
	if !perCluster {
		dropNames(values)
	}
	// The operator-wide template goes under what the release generates, the overlay over it.
	if len(cfg.DefaultValues) > 0 {
		values = Merge(runtime.DeepCopyJSON(cfg.DefaultValues), values)
	}
	if vor.Spec.VectorEngine.Vald.Overlay != nil && len(vor.Spec.VectorEngine.Vald.Overlay.Raw) > 0 {
		var overlay map[string]any
		if err := json.Unmarshal(vor.Spec.VectorEngine.Vald.Overlay.Raw, &overlay); err != nil {
			return nil, nil, &Error{Message: "spec.vectorEngine.vald.overlay is not a JSON object: make it a map of Vald chart values."}
		}
		values = Merge(values, overlay)
	}
	raw, err := json.Marshal(values)
	if err != nil {
		return nil, nil, &Error{Message: "The generated Vald chart values cannot be encoded as JSON."}
	}
	return &valdv1.ValdRelease{
		TypeMeta: metav1.TypeMeta{APIVersion: valdv1.GroupVersion.String(), Kind: "ValdRelease"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      Name(vor.Namespace, cl.Name),
			Namespace: vor.Namespace,
			Labels: map[string]string{
				"app.kubernetes.io/managed-by": FieldManager,
				valdv1.LabelManagedGeneration:  strconv.FormatInt(vor.Generation, 10),
				valdv1.LabelOperatorRelease:    vor.Name,
				valdv1.LabelRole:               infra.Role,
				valdv1.LabelCluster:            cl.Name,
				valdv1.LabelVectorEngine:       vor.Spec.VectorEngine.Name,
			},
			Annotations: map[string]string{valdv1.AnnotationClusterID: cl.ID},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion:         valdv1.GroupVersion.String(),
				Kind:               "ValdOperatorRelease",
				Name:               vor.Name,
				UID:                vor.UID,
				Controller:         ptr.To(true),
				BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: &apiextensionsv1.JSON{Raw: raw},
	}, values, nil
}

// chartValues maps the release to Vald Helm chart values (see the README's mapping table).
// Without perCluster the components keep the chart's default names, which the pods'
// topology spread selectors then name.
func chartValues(vor *valdv1.ValdOperatorRelease, infra valdv1.Infrastructure, cl valdv1.Cluster, cfg Config, perCluster bool) (map[string]any, error) {
	v := vor.Spec.VectorEngine.Vald
	general := infra.NodePools.General
	agentPool, agentPoolType := infra.NodePools.Agent, valdv1.NodePoolTypeValdAgent
	if agentPool == nil {
		agentPool, agentPoolType = general, valdv1.NodePoolTypeGeneral
	}

	const field = "spec.vectorEngine.vald"
	var agentPoolName, generalPoolName string
	if agentPool != nil {
		agentPoolName = fmt.Sprintf("the %s pool of infrastructure entry %q", agentPoolType, infra.Role)
	}
	if general != nil {
		generalPoolName = fmt.Sprintf("the general pool of infrastructure entry %q", infra.Role)
	}

	values := map[string]any{}
	if v.Defaults.LogLevel != "" {
		values["defaults"] = map[string]any{"logging": map[string]any{"level": v.Defaults.LogLevel}}
	}

	// Agents.
	ngt := map[string]any{"dimension": v.Agent.NGT.Dimension}
	setString(ngt, "distance_type", v.Agent.NGT.DistanceType)
	setString(ngt, "object_type", v.Agent.NGT.ObjectType)
	setInt(ngt, "creation_edge_size", v.Agent.NGT.CreationEdgeSize)
	setInt(ngt, "search_edge_size", v.Agent.NGT.SearchEdgeSize)
	names := namesOf(vor.Namespace, cl.Name)
	release := Name(vor.Namespace, cl.Name)
	pods := names
	if !perCluster {
		pods = chartDefaultNames
	}
	agent := map[string]any{
		"ngt":                ngt,
		"name":               names.agent,
		"serviceAccountName": names.agent,
		"clusterRole":        map[string]any{"name": names.agentRole},
		"clusterRoleBinding": map[string]any{"name": names.agentRole},
	}
	var (
		agentMemory *resource.Quantity
		agents      int32
		res         map[string]any
	)
	if agentPool != nil {
		agents = agentPool.Replicas
		agent["minReplicas"] = agentPool.Replicas
		agent["maxReplicas"] = agentPool.Replicas
		res = agentRequests(agentPool.MachineResource, cfg.AgentResourceFraction)
		agentMemory = quantity(agentPool.MachineResource.Memory)
		placeOn(agent, vor.Namespace, agentPoolType, cfg)
	}
	if limit := quantity(v.Agent.MemoryLimit); limit != nil {
		if res == nil {
			res = map[string]any{}
		}
		requests, _ := res["requests"].(map[string]any)
		if requested, ok := requests["memory"].(string); ok {
			if r := resource.MustParse(requested); limit.Cmp(r) < 0 {
				return nil, &Error{Message: fmt.Sprintf("spec.vectorEngine.vald.agent.memoryLimit %s is below the %s an agent of infrastructure entry %q requests (its node's memory × %v): raise the limit, remove it, or lower --agent-resource-fraction.", limit.String(), r.String(), infra.Role, cfg.AgentResourceFraction)}
			}
		}
		res["limits"] = map[string]any{"memory": limit.String()}
	}
	if res != nil {
		agent["resources"] = res
	}
	spread(agent, v.Agent.TopologySpreadConstraints, pods.agent, release, AgentWhenUnsatisfiable)
	if err := place(placeTarget{values: agent, field: field + ".agent", pool: agentPoolName}, v.Agent.Placement); err != nil {
		return nil, err
	}
	if pv := v.Agent.PersistentVolume; pv != nil {
		if pv.Enabled {
			size := PVSize(agentMemory, cfg)
			p := map[string]any{
				"enabled":    true,
				"accessMode": firstNonEmpty(pv.AccessMode, cfg.DefaultAccessMode),
				"size":       size.String(),
			}
			setString(p, "storageClass", firstNonEmpty(pv.StorageClass, cfg.DefaultStorageClass))
			agent["persistentVolume"] = p
		} else {
			agent["persistentVolume"] = map[string]any{"enabled": false}
		}
	}
	values["agent"] = agent

	// Gateway.
	lb := map[string]any{
		"name":        names.gateway,
		"enabled":     true,
		"serviceType": firstNonEmpty(v.Gateway.ServiceType, cfg.GatewayServiceType),
	}
	if v.Gateway.IndexReplica > 0 {
		lb["gateway_config"] = map[string]any{"index_replica": v.Gateway.IndexReplica}
	}
	if ing := v.Gateway.Ingress; ing != nil && ing.Enabled {
		in := map[string]any{"enabled": true}
		host := ing.Host
		if host == "" && cfg.IngressDomain != "" {
			host = cl.Name + "." + cfg.IngressDomain
		}
		setString(in, "host", host)
		annotations := map[string]any{}
		for k, a := range cfg.GatewayIngressAnnotations {
			annotations[k] = a
		}
		for k, a := range ing.Annotations {
			annotations[k] = a
		}
		if len(annotations) > 0 {
			in["annotations"] = annotations
		}
		lb["ingress"] = in
	}
	if minR, maxR, ok := GatewayReplicas(agents, v.Gateway, cfg); ok {
		lb["minReplicas"], lb["maxReplicas"] = minR, maxR
	}
	if general != nil {
		placeOn(lb, vor.Namespace, valdv1.NodePoolTypeGeneral, cfg)
	}
	spread(lb, v.Gateway.TopologySpreadConstraints, pods.gateway, release, DefaultComponentWhenUnsatisfiable)
	if err := place(placeTarget{values: lb, field: field + ".gateway", pool: generalPoolName}, v.Gateway.Placement); err != nil {
		return nil, err
	}
	values["gateway"] = map[string]any{"lb": lb}

	// Discoverer.
	// The Vald chart has two settings of that name: rollingUpdate.maxUnavailable paces the
	// DaemonSet's rollout, maxUnavailable is its PodDisruptionBudget (either kind). The chart
	// declares both strings ("1" as well as "25%") and writes them unquoted into the
	// manifest, where "1" reads as the number Kubernetes wants.
	disc := map[string]any{
		"kind":               firstNonEmpty(v.Discoverer.Kind, cfg.DiscovererKind),
		"name":               names.discoverer,
		"serviceAccountName": names.discoverer,
		"clusterRole":        map[string]any{"name": names.discovererRole},
		"clusterRoleBinding": map[string]any{"name": names.discovererRole},
	}
	if disc["kind"] == "DaemonSet" {
		rolling := cfg.DiscovererMaxUnavailable
		disc["rollingUpdate"] = map[string]any{"maxUnavailable": rolling.String()}
	}
	if cfg.DiscovererPDBMaxUnavailable != "" {
		pdb := intstr.Parse(cfg.DiscovererPDBMaxUnavailable)
		disc["maxUnavailable"] = pdb.String()
	}
	if general != nil {
		placeOn(disc, vor.Namespace, valdv1.NodePoolTypeGeneral, cfg)
	}
	// A DaemonSet has one pod per node already.
	if disc["kind"] == "Deployment" {
		spread(disc, v.Discoverer.TopologySpreadConstraints, pods.discoverer, release, DefaultComponentWhenUnsatisfiable)
	}
	if err := place(placeTarget{values: disc, field: field + ".discoverer", pool: generalPoolName}, v.Discoverer.Placement); err != nil {
		return nil, err
	}
	values["discoverer"] = disc

	// Index manager, or scheduled creator and saver jobs.
	index := map[string]any{
		"name":    names.indexManager,
		"enabled": v.Indexer.Manager,
		// Named even when off, so that an overlay turning them on stays per cluster.
		"creator": map[string]any{"name": names.indexCreation},
		"saver":   map[string]any{"name": names.indexSave},
	}
	if v.Indexer.Manager {
		indexer := map[string]any{}
		setString(indexer, "auto_index_check_duration", v.Indexer.IndexDuration)
		setString(indexer, "auto_save_index_wait_duration", v.Indexer.SaveDuration)
		setInt(indexer, "concurrency", v.Indexer.Concurrency)
		index["indexer"] = indexer
		spread(index, v.Indexer.TopologySpreadConstraints, pods.indexManager, release, DefaultComponentWhenUnsatisfiable)
	} else {
		jobs := []struct {
			key, schedule string
			suspend       bool
		}{
			{"creator", v.Indexer.IndexSchedule, v.Indexer.IndexSuspend},
			{"saver", firstNonEmpty(v.Indexer.SaveSchedule, v.Indexer.IndexSchedule), v.Indexer.SaveSuspend},
		}
		for _, job := range jobs {
			j := index[job.key].(map[string]any)
			j["enabled"] = true
			j["suspend"] = job.suspend
			setString(j, "schedule", job.schedule)
			setInt(j, "concurrency", v.Indexer.Concurrency)
			// The jobs' pods are placed by their own keys, not manager.index's.
			if general != nil {
				placeOn(j, vor.Namespace, valdv1.NodePoolTypeGeneral, cfg)
			}
			if err := place(placeTarget{values: j, field: field + ".indexer", pool: generalPoolName, jobs: true}, v.Indexer.Placement); err != nil {
				return nil, err
			}
		}
	}
	if general != nil {
		placeOn(index, vor.Namespace, valdv1.NodePoolTypeGeneral, cfg)
	}
	if err := place(placeTarget{values: index, field: field + ".indexer", pool: generalPoolName, jobs: !v.Indexer.Manager}, v.Indexer.Placement); err != nil {
		return nil, err
	}
	values["manager"] = map[string]any{"index": index}
	return values, nil
}

// GatewayReplicas is the gateway's minReplicas and maxReplicas (the autoscaler's range) for
// a cluster of agents agents: minReplicas ceil(agents / GatewayAgentsPerReplica) and
// maxReplicas one gateway per agent, each within [GatewayMinReplicas, GatewayMaxReplicas]
// and maxReplicas at least minReplicas. A release's gateway.minReplicas or maxReplicas
// replaces the derived value, and the other one moves to keep min <= max. ok is false
// when there is nothing to write: no pool gives the agents and the release sets neither.
func GatewayReplicas(agents int32, gw valdv1.Gateway, cfg Config) (minR, maxR int32, ok bool) {
	if agents <= 0 && gw.MinReplicas == nil && gw.MaxReplicas == nil {
		return 0, 0, false
	}
	per := int32(max(cfg.GatewayAgentsPerReplica, 1))
	lo, hi := int32(cfg.GatewayMinReplicas), int32(cfg.GatewayMaxReplicas) // Validate keeps them within int32
	minR = clamp((max(agents, 0)+per-1)/per, lo, hi)
	maxR = clamp(agents, minR, hi)
	switch {
	case gw.MinReplicas != nil && gw.MaxReplicas != nil:
		minR, maxR = *gw.MinReplicas, *gw.MaxReplicas
	case gw.MinReplicas != nil:
		minR = *gw.MinReplicas
		maxR = max(maxR, minR)
	case gw.MaxReplicas != nil:
		maxR = *gw.MaxReplicas
		minR = min(minR, maxR)
	}
	return minR, maxR, true
}

func clamp(v, lo, hi int32) int32 { return min(max(v, lo), hi) }

// spread sets a component's topology spread constraints: the release's, or without any
// one per node (DefaultTopologyKey, maxSkew 1, whenUnsatisfiable as given); an empty list
// writes none. Each selects the component's pods of this ValdRelease (the chart labels them
// app=<component name> and app.kubernetes.io/instance=<ValdRelease name>), and honours
// taints, so a node cordoned for a drain (tainted unschedulable) is no empty domain that
// would hold a pod back.
func spread(component map[string]any, set *[]valdv1.TopologySpread, name, release, whenUnsatisfiable string) {
	constraints := []valdv1.TopologySpread{{MaxSkew: 1, TopologyKey: DefaultTopologyKey, WhenUnsatisfiable: whenUnsatisfiable}}
	if set != nil {
		constraints = *set
	}
	if len(constraints) == 0 {
		return
	}
	out := make([]any, 0, len(constraints))
	for _, c := range constraints {
		out = append(out, map[string]any{
			"maxSkew":           max(c.MaxSkew, 1),
			"topologyKey":       c.TopologyKey,
			"whenUnsatisfiable": firstNonEmpty(c.WhenUnsatisfiable, whenUnsatisfiable),
			"nodeTaintsPolicy":  "Honor",
			"labelSelector": map[string]any{"matchLabels": map[string]any{
				"app":                        name,
				"app.kubernetes.io/instance": release,
			}},
		})
	}
	component["topologySpreadConstraints"] = out
}

// placeOn pins a component to a node pool: a node selector on the pool labels and a
// toleration of the pool's taint, so dedicated pools can keep other pods away.
func placeOn(component map[string]any, namespace string, pool valdv1.NodePoolType, cfg Config) {
	component["nodeSelector"] = map[string]any{
		cfg.NodeLabelKey("namespace"): namespace,
		cfg.NodeLabelKey("type"):      string(pool),
	}
	component["tolerations"] = []any{map[string]any{
		"key":      cfg.NodeLabelKey("type"),
		"operator": "Equal",
		"value":    string(pool),
		"effect":   "NoSchedule",
	}}
}

// agentRequests requests a fraction of the node's CPU and memory. It sets no limit: NGT
// memory-maps its index, which grows past any request as vectors come in, and a memory
// limit would have the kernel kill the agent for it; the request keeps one agent per node.
func agentRequests(m valdv1.MachineResource, fraction float64) map[string]any {
	requests := map[string]any{}
	if cpu := quantity(m.CPU); cpu != nil {
		milli := int64(math.Floor(float64(cpu.MilliValue()) * fraction))
		requests["cpu"] = resource.NewMilliQuantity(max(milli, 1), resource.DecimalSI).String()
	}
	if memory := quantity(m.Memory); memory != nil {
		const mi = 1 << 20
		mib := int64(math.Floor(float64(memory.Value()) * fraction / mi))
		requests["memory"] = resource.NewQuantity(max(mib, 1)*mi, resource.BinarySI).String()
	}
	if len(requests) == 0 {
		return nil
	}
	return map[string]any{"requests": requests}
}

// PVSize is the size of an agent's volume: memory × PVMemoryRatio rounded up to a whole
// GiB, at least PVMinSize and at most PVMaxSize (when set). Without memory it is PVMinSize.
func PVSize(memory *resource.Quantity, cfg Config) resource.Quantity {
	size := cfg.PVMinSize.DeepCopy()
	if memory != nil && memory.Sign() > 0 {
		const gi = 1 << 30
		gib := int64(math.Ceil(float64(memory.Value()) * cfg.PVMemoryRatio / gi))
		derived := *resource.NewQuantity(gib*gi, resource.BinarySI)
		if derived.Cmp(size) > 0 {
			size = derived
		}
	}
	if !cfg.PVMaxSize.IsZero() && size.Cmp(cfg.PVMaxSize) > 0 {
		size = cfg.PVMaxSize.DeepCopy()
	}
	return size
}

// Merge deep-merges overlay into base the way Helm merges values: objects merge key by
// key, anything else replaces, and null removes the key. base is modified and returned.
func Merge(base, overlay map[string]any) map[string]any {
	if base == nil {
		base = map[string]any{}
	}
	for k, ov := range overlay {
		if ov == nil {
			delete(base, k)
			continue
		}
		om, oIsMap := ov.(map[string]any)
		bm, bIsMap := base[k].(map[string]any)
		switch {
		case oIsMap && bIsMap:
			base[k] = Merge(bm, om)
		case oIsMap:
			base[k] = Merge(map[string]any{}, om)
		default:
			base[k] = ov
		}
	}
	return base
}

// quantity parses a positive quantity; admission has validated it, so anything else
// counts as not given.
func quantity(s string) *resource.Quantity {
	q, err := resource.ParseQuantity(s)
	if err != nil || q.Sign() <= 0 {
		return nil
	}
	return &q
}

func setString(m map[string]any, key, v string) {
	if v != "" {
		m[key] = v
	}
}

func setInt(m map[string]any, key string, v int32) {
	if v != 0 {
		m[key] = v
	}
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}
