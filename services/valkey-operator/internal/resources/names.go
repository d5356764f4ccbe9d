// Package resources builds the Kubernetes objects of a ValkeyCluster and its ValkeyNodes
// from their specs: pure functions, no I/O, so every rendering is table-tested.
package resources

import (
	"fmt"
	"strconv"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
)

// Ports every member listens on; the cluster bus is the client port plus 10000, as the
// server derives it.
const (
	ClientPort = 6379
	BusPort    = ClientPort + 10000
)

// Field managers, one per controller.
const (
	ClusterFieldManager = "valkey-operator/cluster"
	NodeFieldManager    = "valkey-operator/node"
)

// Users the operator creates in every cluster; spec.users may not take these names.
const (
	OperatorUser    = "valkey-operator"
	ReplicationUser = "valkey-replication"
	// ExporterUser is the metrics exporter's: it reads what the exporter scrapes, nothing
	// else (exporterRules).
	ExporterUser = "valkey-exporter"
)

// Keys of the objects the members share.
const (
	ConfigKeyServer = "valkey.conf" // whole server config, in the ConfigMap
	ConfigKeyLive   = "live.conf"   // live-settable keys only, in the ConfigMap

	SecretKeyOperatorPassword    = "operator-password"
	SecretKeyReplicationPassword = "replication-password"
	// SecretKeyExporterPassword is the exporter user's password, in the exporter Secret
	// (the only Secret the exporter sidecar reads).
	SecretKeyExporterPassword = "password"

	ACLKeyUsers = "users.acl" // the ACL file, in the ACL Secret
	ACLKeyAuth  = "auth.conf" // masteruser/masterauth, included from valkey.conf

	TLSKeyCA   = "ca.crt"
	TLSKeyCert = "tls.crt"
	TLSKeyKey  = "tls.key"
	// TLSKeyCAKey is the CA's private key, only in the CA Secret (never mounted).
	TLSKeyCAKey = "ca.key"
)

// Paths inside the server container.
const (
	ConfigDir = "/etc/valkey/conf"
	ACLDir    = "/etc/valkey/acl"
	TLSDir    = "/etc/valkey/tls"
	DataDir   = "/data"
)

// Annotations.
const (
	// AnnotationRestartHash on a member's pod template is its ValkeyNode's
	// spec.configHash: a change rolls the pod.
	AnnotationRestartHash = "valkey.io/restart-hash"
)

// Labels.
const (
	LabelName      = "app.kubernetes.io/name"
	LabelInstance  = "app.kubernetes.io/instance"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelComponent = "app.kubernetes.io/component"
	LabelCluster   = "valkey.io/cluster"
	LabelShard     = "valkey.io/shard"
	LabelNodeIndex = "valkey.io/node-index"
	LabelNode      = "valkey.io/node"

	ManagedBy     = "valkey-operator"
	ComponentNode = "node"
	// ComponentExternal labels a node's own Service for clients outside Kubernetes.
	ComponentExternal = "external"
)

// ServiceName is the cluster's headless Service.
func ServiceName(cluster string) string { return cluster }

// ConfigMapName holds valkey.conf and live.conf.
func ConfigMapName(cluster string) string { return cluster + "-config" }

// InternalSecretName holds the passwords of the operator's and the replication user.
func InternalSecretName(cluster string) string { return cluster + "-internal" }

// ExporterSecretName holds the metrics exporter user's password.
func ExporterSecretName(cluster string) string { return cluster + "-exporter" }

// ACLSecretName holds the ACL file and the replication credentials the members load.
func ACLSecretName(cluster string) string { return cluster + "-acl" }

// SelfSignedTLSSecretName holds the CA and certificate the operator generates.
func SelfSignedTLSSecretName(cluster string) string { return cluster + "-tls" }

// SelfSignedCASecretName holds the generated CA and its key; no pod mounts it.
func SelfSignedCASecretName(cluster string) string { return cluster + "-tls-ca" }

// PDBName is the cluster's PodDisruptionBudget.
func PDBName(cluster string) string { return cluster }

// NodeName is the ValkeyNode at (shard, index) of cluster.
func NodeName(cluster string, shard, index int) string {
	return fmt.Sprintf("%s-%d-%d", cluster, shard, index)
}

// WorkloadName is the StatefulSet or Deployment of a ValkeyNode.
func WorkloadName(node string) string { return node }

// PodName is the pod of a ValkeyNode run by a StatefulSet.
func PodName(node string) string { return node + "-0" }

// PVCName is the data volume claim of a ValkeyNode.
func PVCName(node string) string { return node + "-data" }

// ClusterLabels are on every object of cluster; they select its pods in the Service and
// the PodDisruptionBudget too (with the node component).
func ClusterLabels(cluster string) map[string]string {
	return map[string]string{
		LabelName:      "valkey",
		LabelInstance:  cluster,
		LabelManagedBy: ManagedBy,
		LabelCluster:   cluster,
	}
}

// PodSelector selects every member pod of cluster.
func PodSelector(cluster string) map[string]string {
	l := ClusterLabels(cluster)
	l[LabelComponent] = ComponentNode
	return l
}

// NodeLabels are on a ValkeyNode, its workload, pod template and PVC.
func NodeLabels(n *valkeyv1.ValkeyNode) map[string]string {
	l := PodSelector(n.Spec.ClusterName)
	l[LabelShard] = strconv.Itoa(int(n.Spec.ShardIndex))
	l[LabelNodeIndex] = strconv.Itoa(int(n.Spec.NodeIndex))
	l[LabelNode] = n.Name
	return l
}
