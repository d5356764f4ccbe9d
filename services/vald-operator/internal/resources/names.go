package resources

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	valdv1 "github.com/opsuite/suite/api/vald/v1"
	"github.com/opsuite/suite/api/vald/valdchart"
)

// componentNameMax keeps every name the chart derives from a component's name valid: a
// CronJob's name leaves 11 characters to its Jobs' suffix (52), and a StatefulSet's pods
// carry a controller-revision-hash label of <name>-<hash> (63).
const componentNameMax = 52

// chartNames are the names of one cluster's Vald components. The chart names every object
// after them (Services, ConfigMaps <name>-config, workloads, PodDisruptionBudgets,
// PriorityClasses <namespace>-<name>-priority) and its components find each other by them
// (<agent name>.<namespace>.svc, the discoverer's Service, the agents' container name), so
// a name per cluster keeps two ValdReleases apart and each Vald whole. The cluster-scoped
// ClusterRole and ClusterRoleBinding carry the namespace too.
type chartNames struct {
	agent, discoverer, gateway, indexManager, indexCreation, indexSave string
	agentRole, discovererRole                                          string
}

// namesOf names the components of cluster in namespace: the chart's default name with the
// cluster's after it (vald-agent-<cluster>), so they start with a letter as a Service's name
// must; cluster names are unique in a namespace, as ValdRelease names are.
func namesOf(namespace, cluster string) chartNames {
	return chartNames{
		agent:          componentName("vald-agent", cluster),
		discoverer:     componentName("vald-discoverer", cluster),
		gateway:        componentName("vald-lb-gateway", cluster),
		indexManager:   componentName("vald-manager-index", cluster),
		indexCreation:  componentName("vald-index-creation", cluster),
		indexSave:      componentName("vald-index-save", cluster),
		agentRole:      clusterScopedName("vald-agent", namespace, cluster),
		discovererRole: clusterScopedName("vald-discoverer", namespace, cluster),
	}
}

// chartDefaultNames are the component names the chart gives without name keys, those of
// a legacy ValdRelease (LegacyNamed); the roles are not pod names and stay empty.
var chartDefaultNames = chartNames{
	agent:         "vald-agent",
	discoverer:    "vald-discoverer",
	gateway:       "vald-lb-gateway",
	indexManager:  "vald-manager-index",
	indexCreation: "vald-index-creation",
	indexSave:     "vald-index-save",
}

// componentName is <base>-<cluster>, or, when longer than componentNameMax, the cluster's
// name cut short and followed by a hash of it, so names stay distinct.
func componentName(base, cluster string) string {
	name := base + "-" + cluster
	if len(name) <= componentNameMax {
		return name
	}
	sum := sha256.Sum256([]byte(cluster))
	hash := hex.EncodeToString(sum[:])[:8]
	keep := componentNameMax - len(base) - len(hash) - 2
	return base + "-" + strings.TrimRight(cluster[:keep], "-") + "-" + hash
}

// clusterScopedName names a cluster-wide RBAC object of one cluster's Vald:
// <base>:<namespace>:<cluster>. Colons, allowed in RBAC names and never in a namespace or a
// cluster name, keep "a-b" + "c" apart from "a" + "b-c".
func clusterScopedName(base, namespace, cluster string) string {
	return base + ":" + namespace + ":" + cluster
}

// SharedObjects returns the objects the chart renders for vr, a ValdRelease this package
// built, whose names do not carry its cluster's names: those an overlay named, or gave back
// to the chart's defaults. Only these can be another ValdRelease's as well.
func SharedObjects(vr *valdv1.ValdRelease) ([]valdchart.Resource, error) {
	var values map[string]any
	if vr.Spec != nil {
		if err := json.Unmarshal(vr.Spec.Raw, &values); err != nil {
			return nil, fmt.Errorf("decoding the values of ValdRelease %s: %w", vr.Name, err)
		}
	}
	n := namesOf(vr.Namespace, vr.Labels[valdv1.LabelCluster])
	own := map[string]bool{n.agentRole: true, n.discovererRole: true, vr.Name + "-ingress": true}
	for _, name := range []string{n.agent, n.discoverer, n.gateway, n.indexManager, n.indexCreation, n.indexSave} {
		own[name], own[name+"-config"], own[vr.Namespace+"-"+name+"-priority"] = true, true, true
	}
	var out []valdchart.Resource
	for _, o := range valdchart.Objects(vr.Name, vr.Namespace, values) {
		if !own[o.Name] {
			out = append(out, o)
		}
	}
	return out, nil
}

// nameKeys are the chart values through which the builder names a cluster's components.
var nameKeys = [][]string{
	{"agent", "name"}, {"agent", "serviceAccountName"}, {"agent", "clusterRole"}, {"agent", "clusterRoleBinding"},
	{"discoverer", "name"}, {"discoverer", "serviceAccountName"}, {"discoverer", "clusterRole"}, {"discoverer", "clusterRoleBinding"},
	{"gateway", "lb", "name"},
	{"manager", "index", "name"}, {"manager", "index", "creator", "name"}, {"manager", "index", "saver", "name"},
}

// LegacyNamed reports whether vr exists without any of the per-cluster name keys: an
// operator before per-cluster names wrote it, and the chart named its components after
// its defaults (vald-agent, ...). Such a ValdRelease keeps those names: renamed, Helm would
// delete its objects and the agents' StatefulSet would start on new, empty volumes.
func LegacyNamed(vr *valdv1.ValdRelease) bool {
	if vr.Spec == nil || len(vr.Spec.Raw) == 0 {
		return false
	}
	var values map[string]any
	if err := json.Unmarshal(vr.Spec.Raw, &values); err != nil {
		return false
	}
	for _, path := range nameKeys {
		if has(values, path) {
			return false
		}
	}
	return true
}

func has(m map[string]any, path []string) bool {
	for i, k := range path {
		v, ok := m[k]
		if !ok {
			return false
		}
		if i == len(path)-1 {
			return true
		}
		if m, ok = v.(map[string]any); !ok {
			return false
		}
	}
	return false
}

// dropNames removes the per-cluster names from values, leaving the chart's defaults: the
// values an operator before per-cluster names built. The index jobs' maps that held only
// a name go too.
func dropNames(values map[string]any) {
	for _, path := range nameKeys {
		parent := values
		for _, k := range path[:len(path)-1] {
			next, ok := parent[k].(map[string]any)
			if !ok {
				parent = nil
				break
			}
			parent = next
		}
		if parent != nil {
			delete(parent, path[len(path)-1])
		}
	}
	if index, ok := values["manager"].(map[string]any)["index"].(map[string]any); ok {
		for _, job := range []string{"creator", "saver"} {
			if j, ok := index[job].(map[string]any); ok && len(j) == 0 {
				delete(index, job)
			}
		}
	}
}

// legacyWho names the legacy ValdRelease(s) of a clash for its condition message.
func legacyWho(legacy map[string]bool, a, b string) string {
	switch {
	case legacy[a] && legacy[b]:
		return "both keep the chart's default names they were installed with"
	case legacy[a]:
		return fmt.Sprintf("%q keeps the chart's default names it was installed with", a)
	}
	return fmt.Sprintf("%q keeps the chart's default names it was installed with", b)
}
