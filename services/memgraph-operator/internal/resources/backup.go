package resources

import (
	"strconv"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/services/memgraph-operator/internal/snapshot"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// The backup agent sidecar and the restore init container of data-instance pods: both
// run the operator's own binary (its image is the operator's, which the chart passes as
// MEMGRAPH_OPERATOR_IMAGE).
const (
	// OperatorEntrypoint is the operator binary in its image.
	OperatorEntrypoint = "/memgraph-operator"
	// ContainerBackupAgent serves the durability files to the operator (spec.backup).
	ContainerBackupAgent = "backup-agent"
	// ContainerRestore downloads a backup before Memgraph starts (spec.bootstrap).
	ContainerRestore = "restore"
	// PortBackupAgent names the agent's port.
	PortBackupAgent = "backup-agent"
	// VolumeBackupToken is the agent token's Secret, mounted in the sidecar.
	VolumeBackupToken = "backup-agent-token"
	// BackupTokenDir is where it is mounted.
	BackupTokenDir = "/etc/memgraph-backup"
	// BackupAgentTokenKey is the token's key in the Secret.
	BackupAgentTokenKey = "token"
	// VolumeRestoreCA is the object store's CA for the restore (spec.backup.objectStore.ca).
	VolumeRestoreCA = "restore-ca"
	// RestoreCADir is where it is mounted.
	RestoreCADir = "/etc/memgraph-restore-ca"
	// RestoreOrdinal is the pod that restores: the first data instance, which the
	// registration makes the MAIN of a new cluster; the replicas sync from it.
	RestoreOrdinal = 0
)

// BackupAgentSecretName is the Secret holding the cluster's backup agent token, which the
// cluster controller creates (a random value) and the sidecars mount.
func BackupAgentSecretName(cluster string) string { return cluster + "-backup-agent" }

// BackupAgentSecret is that Secret with token as its value (owned by the cluster).
func BackupAgentSecret(c *memgraphv1.MemgraphCluster, token string) *corev1.Secret {
	return &corev1.Secret{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: BackupAgentSecretName(c.Name), Namespace: c.Namespace,
			Labels: ClusterLabels(c.Name)},
		Data: map[string][]byte{BackupAgentTokenKey: []byte(token)},
	}
}

// sidecarSecurity is the security context of the containers running the operator's
// binary in a member's pod: no privilege, read-only root, not root.
func sidecarSecurity() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		RunAsNonRoot:             ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
}

// RestoreSource is where a restore reads its backup: the MemgraphBackup's bucket and
// folder (prefix included) on the store of the new cluster's spec.backup.
type RestoreSource struct {
	Bucket, Path string
}

// BackupOptions are what the backup containers need besides the cluster.
type BackupOptions struct {
	// Image is the operator's image; empty adds nothing (the operator was not told its
	// image, and says so at start).
	Image string
	// Restore is the backup the first data instance starts from; nil adds no init container.
	Restore *RestoreSource
}

// WithBackup adds to the data StatefulSet the backup agent sidecar (spec.backup) and the
// restore init container (spec.bootstrap with a verified source). A cluster without
// either keeps its template byte for byte, so upgrading the operator rolls no pod.
func WithBackup(sts *appsv1.StatefulSet, c *memgraphv1.MemgraphCluster, o BackupOptions) {
	if o.Image == "" || c.Spec.Backup == nil {
		return
	}
	pod := &sts.Spec.Template.Spec
	secure := sidecarSecurity()
	port := c.Spec.Backup.AgentPort
	if port == 0 {
		port = memgraphv1.DefaultBackupAgentPort
	}
	pod.Volumes = append(pod.Volumes, corev1.Volume{Name: VolumeBackupToken, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
		SecretName: BackupAgentSecretName(c.Name), DefaultMode: ptr.To(BoltTLSFileMode),
	}}})
	pod.Containers = append(pod.Containers, corev1.Container{
		Name:    ContainerBackupAgent,
		Image:   o.Image,
		Command: []string{OperatorEntrypoint, snapshot.CommandAgent},
		Args: []string{"--data-dir=" + LibDir, "--listen=:" + strconv.Itoa(int(port)),
			"--token-file=" + BackupTokenDir + "/" + BackupAgentTokenKey},
		Ports: []corev1.ContainerPort{{Name: PortBackupAgent, ContainerPort: port, Protocol: corev1.ProtocolTCP}},
		ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: "/healthz", Port: intstr.FromString(PortBackupAgent)}}, PeriodSeconds: 10},
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi")}},
		SecurityContext: secure,
		VolumeMounts: []corev1.VolumeMount{
			{Name: VolumeLib, MountPath: LibDir, ReadOnly: true},
			{Name: VolumeBackupToken, MountPath: BackupTokenDir, ReadOnly: true},
		},
	})
	if o.Restore == nil || c.Spec.Bootstrap == nil {
		return
	}
	store := c.Spec.Backup.ObjectStore
	args := []string{"--data-dir=" + LibDir, "--ordinal=" + strconv.Itoa(RestoreOrdinal),
		"--bucket=" + o.Restore.Bucket, "--backup-path=" + o.Restore.Path}
	if store.Endpoint != "" {
		args = append(args, "--endpoint="+store.Endpoint)
	}
	if store.Region != "" {
		args = append(args, "--region="+store.Region)
	}
	if store.ForcePathStyle {
		args = append(args, "--path-style")
	}
	cred := store.Credentials
	key := func(k, def string) string {
		if k == "" {
			return def
		}
		return k
	}
	ref := func(k string, optional bool) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: cred.SecretName}, Key: k, Optional: ptr.To(optional)}}
	}
	init := corev1.Container{
		Name:    ContainerRestore,
		Image:   o.Image,
		Command: []string{OperatorEntrypoint, snapshot.CommandRestore},
		Env: []corev1.EnvVar{
			{Name: snapshot.EnvPodIndex, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['" + LabelPodIndex + "']"}}},
			{Name: snapshot.EnvAccessKeyID, ValueFrom: ref(key(cred.AccessKeyIDKey, snapshot.EnvAccessKeyID), false)},
			{Name: snapshot.EnvSecretAccessKey, ValueFrom: ref(key(cred.SecretAccessKeyKey, snapshot.EnvSecretAccessKey), false)},
			{Name: snapshot.EnvSessionToken, ValueFrom: ref(key(cred.SessionTokenKey, snapshot.EnvSessionToken), true)},
		},
		TerminationMessagePolicy: corev1.TerminationMessageReadFile,
		SecurityContext:          secure,
		VolumeMounts:             []corev1.VolumeMount{{Name: VolumeLib, MountPath: LibDir}},
	}
	if store.CA != nil {
		k := key(store.CA.Key, TLSCAKey)
		pod.Volumes = append(pod.Volumes, corev1.Volume{Name: VolumeRestoreCA, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: store.CA.Name, Items: []corev1.KeyToPath{{Key: k, Path: TLSCAKey}}}}})
		init.VolumeMounts = append(init.VolumeMounts, corev1.VolumeMount{Name: VolumeRestoreCA, MountPath: RestoreCADir, ReadOnly: true})
		args = append(args, "--ca-file="+RestoreCADir+"/"+TLSCAKey)
	}
	init.Args = args
	pod.InitContainers = append(pod.InitContainers, init)
}
