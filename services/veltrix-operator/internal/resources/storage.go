package resources

import (
	"fmt"
	"sort"
	"strconv"

	veltrixv1 "github.com/opsuite/suite/api/veltrix/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
)

// NoProvisioner is the provisioner of a class whose volumes are created by hand (here: by
// the operator from the node agent's answer).
const NoProvisioner = "kubernetes.io/no-provisioner"

// HostnameLabel is the node label a local PersistentVolume's node affinity names.
const HostnameLabel = "kubernetes.io/hostname"

// StorageClass is the class of the local volumes: no provisioner, and binding waits for the
// first pod, so the scheduler picks a node and a volume on it together.
func StorageClass(c *veltrixv1.VeltrixCluster) *storagev1.StorageClass {
	return &storagev1.StorageClass{
		TypeMeta:          metav1.TypeMeta{APIVersion: "storage.k8s.io/v1", Kind: "StorageClass"},
		ObjectMeta:        metav1.ObjectMeta{Name: c.Spec.StorageClassName, Labels: map[string]string{LabelManagedBy: ManagedBy}},
		Provisioner:       NoProvisioner,
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimRetain),
	}
}

// Disk is one disk the node agent prepared for a member slot on a node, by the identity
// the agent reports. Index is its position among the slot's disks, ordered by filesystem
// UUID so that it never depends on kernel names.
type Disk struct {
	Node  string
	Slot  int32
	Index int32
	// FilesystemUUID identifies the disk (the agent wrote it); DiskGUID for a split disk;
	// WWN and Serial where the hardware has them.
	FilesystemUUID, DiskGUID, WWN, Serial string
	// PVPath is where the agent bind-mounted the XFS filesystem.
	PVPath   string
	XFSBytes int64
	// RawDevice is the raw VLog partition's device path; empty unless the disk was split.
	RawDevice string
	// RawPartitionUUID is the raw partition's GPT partition GUID (empty from an agent that
	// does not report it); its Block volume is named by it, not by RawDevice.
	RawPartitionUUID string
	RawBytes         int64
}

// RawVolumePath is the Block volume's path for a split disk: the raw partition by its
// partition GUID, or by kernel name when the agent did not report the GUID.
func RawVolumePath(d Disk) string {
	if d.RawPartitionUUID != "" {
		return RawPartitionPath(d.RawPartitionUUID)
	}
	return d.RawDevice
}

// DataVolumeName and VLogVolumeName name a disk's PersistentVolumes after its filesystem
// UUID: unique cluster-wide and stable across reboots.
func DataVolumeName(d Disk) string { return "veltrix-" + d.FilesystemUUID }

// VLogVolumeName names the raw VLog partition's PersistentVolume.
func VLogVolumeName(d Disk) string { return "veltrix-" + d.FilesystemUUID + "-vlog" }

// PersistentVolumes are the local volumes of the prepared disks: one Filesystem volume per
// disk at its PV path and, for a split disk, one Block volume on its raw partition, each
// pinned to its node. They are Retain: the data outlives its claims, and only the
// finalizer (reclaim policy Delete) removes them.
func PersistentVolumes(c *veltrixv1.VeltrixCluster, disks []Disk) []*corev1.PersistentVolume {
	sorted := append([]Disk(nil), disks...)
	sort.Slice(sorted, func(i, j int) bool {
		a, b := sorted[i], sorted[j]
		if a.Node != b.Node {
			return a.Node < b.Node
		}
		if a.Slot != b.Slot {
			return a.Slot < b.Slot
		}
		return a.Index < b.Index
	})
	var out []*corev1.PersistentVolume
	for _, d := range sorted {
		size := *resource.NewQuantity(d.XFSBytes, resource.BinarySI)
		if c.Spec.DiskSize != nil {
			size = c.Spec.DiskSize.DeepCopy()
		}
		out = append(out, persistentVolume(c, d, DataVolumeName(d), VolumeData, corev1.PersistentVolumeFilesystem, d.PVPath, size))
		if c.Spec.RawVLog.Enabled && d.RawDevice != "" {
			raw := *resource.NewQuantity(d.RawBytes, resource.BinarySI)
			out = append(out, persistentVolume(c, d, VLogVolumeName(d), VolumeVLog, corev1.PersistentVolumeBlock, RawVolumePath(d), raw))
		}
	}
	return out
}

func persistentVolume(c *veltrixv1.VeltrixCluster, d Disk, name, kind string, mode corev1.PersistentVolumeMode, path string, size resource.Quantity) *corev1.PersistentVolume {
	labels := VolumeLabels(c)
	labels[LabelVolume] = kind
	labels[LabelDiskIndex] = strconv.Itoa(int(d.Index))
	// A label value holds at most 63 characters, a node name up to 253: a longer name is
	// left off the label (the node affinity always names it; VolumeNode reads it there).
	if len(validation.IsValidLabelValue(d.Node)) == 0 {
		labels[LabelNode] = d.Node
	}
	labels[LabelSlot] = strconv.Itoa(int(d.Slot))
	annotations := map[string]string{AnnotationFilesystemUUID: d.FilesystemUUID}
	for k, v := range map[string]string{AnnotationDiskGUID: d.DiskGUID, AnnotationWWN: d.WWN, AnnotationSerial: d.Serial, AnnotationRawPartitionUUID: d.RawPartitionUUID} {
		if v != "" {
			annotations[k] = v
		}
	}
	return &corev1.PersistentVolume{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolume"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              c.Spec.StorageClassName,
			VolumeMode:                    ptr.To(mode),
			PersistentVolumeSource:        corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: path}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
					{Key: HostnameLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{d.Node}},
				}}},
			}},
		},
	}
}

// VolumeNode is the node a PersistentVolume built here lives on: the value of its node
// affinity's hostname term, whatever the length of the name, else its node label.
func VolumeNode(pv *corev1.PersistentVolume) string {
	if a := pv.Spec.NodeAffinity; a != nil && a.Required != nil {
		for _, t := range a.Required.NodeSelectorTerms {
			for _, e := range t.MatchExpressions {
				if e.Key == HostnameLabel && e.Operator == corev1.NodeSelectorOpIn && len(e.Values) == 1 {
					return e.Values[0]
				}
			}
		}
	}
	return pv.Labels[LabelNode]
}

// ClaimRequest is what each volume claim template asks for. Templates cannot change after
// the StatefulSet exists, while diskSize may grow: the capacity is declared on the
// PersistentVolumes, and the claims pick theirs by label (cluster, volume kind, disk index),
// so the request only has to fit every prepared disk.
var ClaimRequest = resource.MustParse("1Mi")

// claimSelector picks the cluster's volumes of one kind and disk index.
func claimSelector(c *veltrixv1.VeltrixCluster, kind string, i int32) *metav1.LabelSelector {
	l := VolumeLabels(c)
	l[LabelVolume] = kind
	l[LabelDiskIndex] = strconv.Itoa(int(i))
	return &metav1.LabelSelector{MatchLabels: l}
}

// volumeClaimTemplates are data-<i> (Filesystem) and, with rawVLog, vlog-<i> (Block) for
// every disk index.
func volumeClaimTemplates(c *veltrixv1.VeltrixCluster) []corev1.PersistentVolumeClaim {
	var out []corev1.PersistentVolumeClaim
	claim := func(name, kind string, i int32, mode corev1.PersistentVolumeMode) corev1.PersistentVolumeClaim {
		return corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: SelectorLabels(c)},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				StorageClassName: ptr.To(c.Spec.StorageClassName),
				VolumeMode:       ptr.To(mode),
				Selector:         claimSelector(c, kind, i),
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: ClaimRequest}},
			},
		}
	}
	for i := range max(c.Spec.DisksPerNode, 1) {
		out = append(out, claim(DataClaimName(i), VolumeData, i, corev1.PersistentVolumeFilesystem))
	}
	if c.Spec.RawVLog.Enabled {
		for i := range max(c.Spec.DisksPerNode, 1) {
			out = append(out, claim(VLogClaimName(i), VolumeVLog, i, corev1.PersistentVolumeBlock))
		}
	}
	return out
}

// String describes a disk for messages: its node and identity, never its kernel name.
func (d Disk) String() string {
	return fmt.Sprintf("node %s disk %s", d.Node, d.FilesystemUUID)
}
