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
