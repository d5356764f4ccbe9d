package resources

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
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
