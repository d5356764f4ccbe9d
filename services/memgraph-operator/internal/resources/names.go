// Package resources builds the Kubernetes objects of a MemgraphCluster from its spec: one
// StatefulSet and one headless Service per role, the client Service, a
// PodDisruptionBudget per role, and the membership (names and addresses) the operator
// registers. Pure functions, no I/O, so every rendering is table-tested.
package resources

import (
	"fmt"
	"slices"
	"strings"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
)

// FieldManager is the MemgraphCluster controller's one server-side apply field manager.
const FieldManager = "memgraph-operator/cluster"

// Role is one of the two kinds of Memgraph process a cluster runs.
type Role string

// The roles, also the values of LabelComponent.
const (
	RoleCoordinator Role = "coordinator"
	RoleData        Role = "data"
)

// Labels.
const (
	LabelName      = "app.kubernetes.io/name"
	LabelInstance  = "app.kubernetes.io/instance"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelComponent = "app.kubernetes.io/component"
	LabelCluster   = "memgraph.com/cluster"
	// LabelPodIndex is the ordinal the StatefulSet controller puts on each of its pods
	// (GA since Kubernetes 1.32); a coordinator's id is read from it through the downward
	// API, so one pod template serves every coordinator without a shell wrapper.
	LabelPodIndex = "apps.kubernetes.io/pod-index"

	AppName   = "memgraph"
	ManagedBy = "memgraph-operator"
)

// Container, port and volume names, and paths inside the memgraph container.
const (
	ContainerName = "memgraph"
	// Binary is the server in the memgraph image (its entrypoint execs it); naming it
	// directly keeps the pod free of shells, which the local cluster's runner does not run.
	Binary = "/usr/lib/memgraph/memgraph"

	PortBolt        = "bolt"
	PortManagement  = "management"
	PortCoordinator = "coordinator"
	PortReplication = "replication"
	PortMetrics     = "metrics"

	VolumeLib = "lib"
	VolumeLog = "log"
	LibDir    = "/var/lib/memgraph"
	LogDir    = "/var/log/memgraph"
	LogFile   = LogDir + "/memgraph.log"

	// VolumeBoltTLS is spec.tls.bolt's Secret, mounted read-only at BoltTLSDir (beside,
	// not over, the image's /etc/memgraph/ssl test certificate).
	VolumeBoltTLS = "bolt-tls"
	BoltTLSDir    = "/etc/memgraph/tls/bolt"
)

// The keys of spec.tls.bolt's Secret (a kubernetes.io/tls Secret with its CA).
const (
	TLSCertKey = "tls.crt"
	TLSKeyKey  = "tls.key"
	TLSCAKey   = "ca.crt"
)

// BoltTLSFileMode is the mode of the mounted certificate and key: owner root, group
// fsGroup 103, which the memgraph user (101, primary group 103) reads; nobody else does.
const BoltTLSFileMode int32 = 0o440

// Environment variables the operator sets on every memgraph container.
const (
	EnvLicense             = "MEMGRAPH_ENTERPRISE_LICENSE"
	EnvOrganization        = "MEMGRAPH_ORGANIZATION_NAME"
	EnvUser                = "MEMGRAPH_USER"
	EnvPassword            = "MEMGRAPH_PASSWORD"
	EnvPodName             = "POD_NAME"
	EnvPodNamespace        = "POD_NAMESPACE"
	EnvCoordinatorID       = "MEMGRAPH_COORDINATOR_ID"
	EnvCoordinatorHostname = "MEMGRAPH_COORDINATOR_HOSTNAME"
)

// User and group the memgraph image runs as (the HA chart's 101:103).
const (
	RunAsUser  int64 = 101
	RunAsGroup int64 = 103
)

// FirstCoordinatorOrdinal is the coordinator StatefulSet's first ordinal: pod
// <cluster>-coordinator-<id> is coordinator_<id>, ids 1..n as in the HA chart, read from
// the pod's index label (no arithmetic is possible there).
const FirstCoordinatorOrdinal int32 = 1

// MaxMapCountMinimum is the vm.max_map_count Memgraph needs on every node it runs on.
const MaxMapCountMinimum int64 = 262144

// StatefulSetName is the role's StatefulSet: <cluster>-coordinator or <cluster>-data.
func StatefulSetName(cluster string, r Role) string { return cluster + "-" + string(r) }

// HeadlessServiceName is the role's headless Service, which gives every pod its DNS name:
// <cluster>-coordinators or <cluster>-data.
func HeadlessServiceName(cluster string, r Role) string {
	if r == RoleCoordinator {
		return cluster + "-coordinators"
	}
	return cluster + "-data"
}

// ClientServiceName is the Service clients connect to (Bolt on the coordinators, which
// route reads and writes).
func ClientServiceName(cluster string) string { return cluster }

// PDBName is the role's PodDisruptionBudget.
func PDBName(cluster string, r Role) string { return StatefulSetName(cluster, r) }

// PodName is the role's pod at ordinal.
func PodName(cluster string, r Role, ordinal int32) string {
	return fmt.Sprintf("%s-%d", StatefulSetName(cluster, r), ordinal)
}

// PodFQDN is a pod's DNS name under its role's headless Service.
func PodFQDN(c *memgraphv1.MemgraphCluster, r Role, ordinal int32) string {
	return fmt.Sprintf("%s.%s.%s.svc.%s", PodName(c.Name, r, ordinal), HeadlessServiceName(c.Name, r), c.Namespace, ClusterDomain(c))
}

// CoordinatorName is coordinator id's name in SHOW INSTANCES.
func CoordinatorName(id int) string { return fmt.Sprintf("coordinator_%d", id) }

// DataInstanceName is the data instance's name in SHOW INSTANCES: its pod name made an
// identifier (Memgraph names may not hold '-' or '.').
func DataInstanceName(cluster string, ordinal int32) string {
	return strings.NewReplacer("-", "_", ".", "_").Replace(PodName(cluster, RoleData, ordinal))
}

// ClusterLabels are on every object of cluster.
func ClusterLabels(cluster string) map[string]string {
	return map[string]string{
		LabelName:      AppName,
		LabelInstance:  cluster,
		LabelManagedBy: ManagedBy,
		LabelCluster:   cluster,
	}
}

// Selector selects the role's pods; a StatefulSet's selector is immutable, so it holds
// nothing the user can change.
func Selector(cluster string, r Role) map[string]string {
	l := ClusterLabels(cluster)
	l[LabelComponent] = string(r)
	return l
}

// RoleLabels are the role's selector labels plus spec.labels of the role; they go on the
// role's StatefulSet, pods, Services and PodDisruptionBudget.
func RoleLabels(c *memgraphv1.MemgraphCluster, r Role) map[string]string {
	extra := c.Spec.Labels.Data
	if r == RoleCoordinator {
		extra = c.Spec.Labels.Coordinators
	}
	l := make(map[string]string, len(extra)+5)
	for k, v := range extra {
		if !slices.Contains(statefulSetPodLabels, k) {
			l[k] = string(v)
		}
	}
	// Ours win: the CRD refuses these keys (and the StatefulSet controller's, left out
	// above), this keeps an unvalidated spec from breaking the selectors.
	for k, v := range Selector(c.Name, r) {
		l[k] = v
	}
	return l
}

// statefulSetPodLabels are the labels the StatefulSet controller puts on its pods; a
// coordinator's id is its pod-index.
var statefulSetPodLabels = []string{LabelPodIndex, "statefulset.kubernetes.io/pod-name", "controller-revision-hash"}

// PodAnnotations are spec.annotations of the role, for its pod template; nil when there
// are none. Keys under memgraph.com/ are left out: the CRD refuses them, this keeps an
// unvalidated spec from taking the operator's own.
func PodAnnotations(c *memgraphv1.MemgraphCluster, r Role) map[string]string {
	extra := c.Spec.Annotations.Data
	if r == RoleCoordinator {
		extra = c.Spec.Annotations.Coordinators
	}
	var a map[string]string
	for k, v := range extra {
		if strings.HasPrefix(k, operatorAnnotationPrefix) {
			continue
		}
		if a == nil {
			a = make(map[string]string, len(extra))
		}
		a[k] = v
	}
	return a
}

// operatorAnnotationPrefix is the annotation keys the operator keeps for itself.
const operatorAnnotationPrefix = "memgraph.com/"

// ClusterDomain is spec.clusterDomain or its default.
func ClusterDomain(c *memgraphv1.MemgraphCluster) string {
	if c.Spec.ClusterDomain != "" {
		return c.Spec.ClusterDomain
	}
	return memgraphv1.DefaultClusterDomain
}

// Ports are spec.ports with defaults for unset ones.
func Ports(c *memgraphv1.MemgraphCluster) memgraphv1.PortsSpec {
	p := c.Spec.Ports
	orDefault := func(v *int32, d int32) {
		if *v == 0 {
			*v = d
		}
	}
	orDefault(&p.Bolt, memgraphv1.DefaultBoltPort)
	orDefault(&p.Management, memgraphv1.DefaultManagementPort)
	orDefault(&p.Coordinator, memgraphv1.DefaultCoordinatorPort)
	orDefault(&p.Replication, memgraphv1.DefaultReplicationPort)
	orDefault(&p.Metrics, memgraphv1.DefaultMetricsPort)
	return p
}

// Coordinators is spec.coordinators or its default.
func Coordinators(c *memgraphv1.MemgraphCluster) int32 {
	if c.Spec.Coordinators > 0 {
		return c.Spec.Coordinators
	}
	return memgraphv1.DefaultCoordinators
}

// DataInstances is spec.dataInstances or its default.
func DataInstances(c *memgraphv1.MemgraphCluster) int32 {
	if c.Spec.DataInstances > 0 {
		return c.Spec.DataInstances
	}
	return memgraphv1.DefaultDataInstances
}
