// Package resources builds the Kubernetes objects of a VeltrixCluster from its spec and from
// what the node agents prepared: pure functions, no I/O, so every rendering is table- and
// golden-tested.
package resources

import (
	"fmt"
	"strings"

	veltrixv1 "github.com/opsuite/suite/api/veltrix/v1alpha1"
)

// FieldManager is the controller's one server-side-apply field manager.
const FieldManager = "veltrix-operator"

// Labels.
const (
	LabelName      = "app.kubernetes.io/name"
	LabelInstance  = "app.kubernetes.io/instance"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelComponent = "app.kubernetes.io/component"
	// LabelCluster and LabelNamespace name the cluster a cluster-scoped child (a
	// PersistentVolume) belongs to: it cannot carry an owner reference to a namespaced owner.
	LabelCluster = "veltrix.io/cluster"
	// LabelService tells the cluster's two Services apart (ServiceHeadless, ServiceClient):
	// the ServiceMonitor selects the headless one alone, so no member is scraped twice.
	LabelService   = "veltrix.io/service"
	LabelNamespace = "veltrix.io/namespace"
	// LabelVolume is data (the XFS filesystem) or vlog (the raw partition).
	LabelVolume = "veltrix.io/volume"
	// LabelDiskIndex pairs a member's claim data-<i> and vlog-<i> with the two halves of one
	// disk.
	LabelDiskIndex = "veltrix.io/disk-index"
	// LabelNode is the node whose disk a PersistentVolume is.
	LabelNode = "veltrix.io/node"
	// LabelSlot is the member slot on the node the disk was prepared for.
	LabelSlot = "veltrix.io/slot"

	AppName         = "veltrixdb"
	ManagedBy       = "veltrix-operator"
	ComponentServer = "server"

	VolumeData = "data"
	VolumeVLog = "vlog"
)

// Annotations.
const (
	// AnnotationSafeToEvict keeps the cluster autoscaler from removing a node whose local
	// disks hold a member's data.
	AnnotationSafeToEvict = "cluster-autoscaler.kubernetes.io/safe-to-evict"
	// AnnotationConfigHash on the pod template rolls the pods when the engine env changes.
	AnnotationConfigHash = "veltrix.io/config-hash"
	// Identities of the disk behind a PersistentVolume, as the node agent wrote or read them:
	// the disk is known by these, never by its kernel name.
	AnnotationFilesystemUUID = "veltrix.io/filesystem-uuid"
	AnnotationDiskGUID       = "veltrix.io/disk-guid"
	AnnotationWWN            = "veltrix.io/wwn"
	AnnotationSerial         = "veltrix.io/serial"
	// AnnotationRawPartitionUUID is the raw VLog partition's GPT partition GUID.
	AnnotationRawPartitionUUID = "veltrix.io/raw-partition-uuid"
)

// RawPartitionPath is where a host running udev links the partition of a GPT partition
// GUID: unlike a kernel name (nvme0n1p2) it stays with the partition across reboots.
func RawPartitionPath(uuid string) string { return "/dev/disk/by-partuuid/" + uuid }

// Keys and paths.
const (
	// AdminTokenKey is the key of the generated admin token Secret.
	AdminTokenKey = "token"
	// EnvAdminToken is the server's admin token variable.
	EnvAdminToken = "VELTRIX_ADMIN_TOKEN"
	// EnvIndex, EnvReplicationFactor and EnvCacheMaxSizeMB are engine variables of the ConfigMap.
	EnvIndex             = "VELTRIXDB_INDEX"
	EnvReplicationFactor = "VELTRIXDB_REPLICATION_FACTOR"
	EnvCacheMaxSizeMB    = "VELTRIXDB_CACHE_MAX_SIZE_MB"
	// EnvURingBridge is the io_uring VLog write bridge: on or sqpoll (unset: off).
	EnvURingBridge = "VELTRIXDB_URING_BRIDGE"
	// IndexMap is the memory-mapped-file-free index the engine falls back to.
	IndexMap = "map"

	DataDirRoot   = "/var/lib/veltrix"
	VLogDirRoot   = "/dev/veltrix"
	AuthConfigDir = "/etc/veltrix/auth"
	ContainerName = "veltrixdb"
)

// ServiceMonitorGVK is the prometheus-operator kind, written unstructured (best-effort: its
// CRD may be missing).
var ServiceMonitorGVK = struct{ Group, Version, Kind string }{"monitoring.coreos.com", "v1", "ServiceMonitor"}

// HeadlessServiceName is the Service that gives every member its DNS name.
func HeadlessServiceName(c *veltrixv1.VeltrixCluster) string { return c.Name + "-headless" }

// ClientServiceName is the Service clients connect to.
func ClientServiceName(c *veltrixv1.VeltrixCluster) string { return c.Name }

// ServiceAccountName is the members' ServiceAccount.
func ServiceAccountName(c *veltrixv1.VeltrixCluster) string { return c.Name }

// ConfigMapName holds the engine's environment.
func ConfigMapName(c *veltrixv1.VeltrixCluster) string { return c.Name + "-env" }

// StatefulSetName is the members' StatefulSet.
func StatefulSetName(c *veltrixv1.VeltrixCluster) string { return c.Name }

// GeneratedAdminTokenSecretName is the Secret the operator makes when the spec names none.
func GeneratedAdminTokenSecretName(c *veltrixv1.VeltrixCluster) string {
	return c.Name + "-admin-token"
}

// AdminTokenRef is the Secret key holding the admin token: the spec's, or the generated one.
func AdminTokenRef(c *veltrixv1.VeltrixCluster) veltrixv1.SecretKeyRef {
	if r := c.Spec.AdminTokenSecret; r != nil {
		return *r
	}
	return veltrixv1.SecretKeyRef{Name: GeneratedAdminTokenSecretName(c), Key: AdminTokenKey}
}

// PodName is the member of an ordinal; its node id in the server's membership.
func PodName(c *veltrixv1.VeltrixCluster, ordinal int32) string {
	return fmt.Sprintf("%s-%d", StatefulSetName(c), ordinal)
}

// PodFQDN is a member's stable DNS name through the headless Service.
func PodFQDN(c *veltrixv1.VeltrixCluster, pod string) string {
	return fmt.Sprintf("%s.%s.%s.svc.cluster.local", pod, HeadlessServiceName(c), c.Namespace)
}

// AdvertiseAddr is the address a member announces: its FQDN and the text-protocol port.
func AdvertiseAddr(c *veltrixv1.VeltrixCluster, pod string) string {
	return fmt.Sprintf("%s:%d", PodFQDN(c, pod), c.Spec.ServerPort)
}

// BootstrapMembers are the members every pod names in --peers and --join: the first
// replicationFactor ordinals. They never depend on size, so scaling does not change the pod
// template (a change would roll every member), and the server's persisted membership wins
// over --peers after the first start anyway.
func BootstrapMembers(c *veltrixv1.VeltrixCluster) []string {
	n := min(max(c.Spec.ReplicationFactor, 1), max(c.Spec.Size, 1))
	out := make([]string, 0, n)
	for i := range n {
		out = append(out, PodName(c, i))
	}
	return out
}

// SelectorLabels select the cluster's members.
func SelectorLabels(c *veltrixv1.VeltrixCluster) map[string]string {
	return map[string]string{LabelName: AppName, LabelInstance: c.Name, LabelManagedBy: ManagedBy}
}

// Values of LabelService.
const (
	ServiceHeadless = "headless"
	ServiceClient   = "client"
)

// ScrapedServiceLabels select the Service the ServiceMonitor scrapes: the headless one,
// which lists every member, ready or not (a member that is joining or failing is the one
// whose metrics matter).
func ScrapedServiceLabels(c *veltrixv1.VeltrixCluster) map[string]string {
	l := SelectorLabels(c)
	l[LabelService] = ServiceHeadless
	return l
}

// Labels are every namespaced child's labels.
func Labels(c *veltrixv1.VeltrixCluster) map[string]string {
	l := SelectorLabels(c)
	l[LabelComponent] = ComponentServer
	l[LabelCluster] = c.Name
	return l
}

// VolumeLabels select the PersistentVolumes of the cluster (cluster-scoped, so the
// namespace is a label too).
func VolumeLabels(c *veltrixv1.VeltrixCluster) map[string]string {
	return map[string]string{LabelManagedBy: ManagedBy, LabelCluster: c.Name, LabelNamespace: c.Namespace}
}

// PVPath is the PV source path the node agent bind-mounts a slot's disks under: one per
// cluster, node slot, below the agent's PV root.
func PVPath(pvRoot string, c *veltrixv1.VeltrixCluster, slot int32) string {
	return fmt.Sprintf("%s/veltrix/%s/%s/slot-%d", strings.TrimRight(pvRoot, "/"), c.Namespace, c.Name, slot)
}

// DataClaimName and VLogClaimName are the volume claim templates' names per disk index.
func DataClaimName(i int32) string { return fmt.Sprintf("%s-%d", VolumeData, i) }

// VLogClaimName is the raw VLog claim of disk index i.
func VLogClaimName(i int32) string { return fmt.Sprintf("%s-%d", VolumeVLog, i) }

// DataDir is where disk index i's XFS filesystem is mounted in the container.
func DataDir(i int32) string { return fmt.Sprintf("%s/%s", DataDirRoot, DataClaimName(i)) }

// VLogDevice is where disk index i's raw partition appears in the container.
func VLogDevice(i int32) string { return fmt.Sprintf("%s/%s", VLogDirRoot, VLogClaimName(i)) }
