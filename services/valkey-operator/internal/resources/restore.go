package resources

import (
	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	"github.com/opsuite/suite/services/valkey-operator/internal/restore"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// RestoreContainer is the init container that puts a shard's RDB from a backup into the
// data directory of its primary before the server starts (spec.bootstrap.recovery).
const RestoreContainer = restore.Command

// RestoreSecretName is the Secret a bootstrapped cluster's primaries read their shard's
// object, checksum and the store's keys from; it exists only while the restore runs.
func RestoreSecretName(cluster string) string { return cluster + "-restore" }

// restoreInit is the restore-rdb init container of n's pod: the operator's own binary
// (o.HandoverImage), with the data and config volumes and, from the restore Secret, the
// shard's source and the store's keys, every key optional: once the Secret is gone the
// container does nothing, so a pod that comes back empty later never loads the old backup.
// ok is false for a node of a cluster not bootstrapped from a backup, or without the
// operator's image.
func restoreInit(n *valkeyv1.ValkeyNode, o NodeOptions) (corev1.Container, bool) {
	secret := n.Spec.RestoreSecretName
	if secret == "" || o.HandoverImage == "" {
		return corev1.Container{}, false
	}
	from := func(name, key string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: key, Optional: ptr.To(true)}}}
	}
	return corev1.Container{
		Name:  RestoreContainer,
		Image: o.HandoverImage,
		Command: []string{OperatorEntrypoint, restore.Command, "--data-dir=" + DataDir,
			"--config=" + ConfigDir + "/" + ConfigKeyServer},
		Env: []corev1.EnvVar{
			from(restore.EnvSource, restore.SecretKeyShard(int(n.Spec.ShardIndex))),
			from(restore.EnvAccessKeyID, restore.SecretKeyAccessKeyID),
			from(restore.EnvSecretAccessKey, restore.SecretKeySecretAccessKey),
			from(restore.EnvSessionToken, restore.SecretKeySessionToken),
			from(restore.EnvCA, restore.SecretKeyCA),
		},
		// A failure's last log lines (why: checksum, store, non-empty volume) show in the
		// pod's status.
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false),
			ReadOnlyRootFilesystem:   ptr.To(true),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		},
		VolumeMounts: []corev1.VolumeMount{
			{Name: volumeConfig, MountPath: ConfigDir, ReadOnly: true},
			{Name: volumeData, MountPath: DataDir},
		},
	}, true
}
