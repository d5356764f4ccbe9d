package resources

import (
	"fmt"
	"path"
	"time"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// The hand-over on shutdown: the operator's own binary, copied into the pod by an init
// container, is the server container's preStop hook. A primary serving slots hands them
// to an in-sync replica with a coordinated CLUSTER FAILOVER before the kubelet sends
// SIGTERM, on every server (Redis 7.0 and Valkey 8.0 cannot fail over on SIGTERM
// themselves).
const (
	// HandoverContainer is the init container that installs the hook.
	HandoverContainer = "install-handover"
	// HandoverDir is where the server container finds the hook (an emptyDir).
	HandoverDir = "/opt/valkey-operator"
	// HandoverBinary is the hook's file name in HandoverDir.
	HandoverBinary = "valkey-operator"
	// HandoverCommand runs the hook (the binary's subcommand).
	HandoverCommand = "handover"
	// HandoverInstallCommand copies the binary (the init container's subcommand).
	HandoverInstallCommand = "install-handover"
	// OperatorEntrypoint is the operator binary in its image.
	OperatorEntrypoint = "/valkey-operator"

	volumeHandover = "handover"
)

// HandoverTimeout is how long the preStop hand-over may take within a grace period of
// grace seconds: all of it but GracePeriodBufferSeconds (for the server's own shutdown),
// or half of a grace period too short for that.
func HandoverTimeout(grace int64) time.Duration {
	if grace > 2*GracePeriodBufferSeconds {
		return time.Duration(grace-GracePeriodBufferSeconds) * time.Second
	}
	return time.Duration(max(grace, 2)) * time.Second / 2
}

// handoverParts are what the hook adds to a node's pod: the init container, the emptyDir
// and its mount in the server container, and the server container's preStop hook. ok is
// false without an image to install the hook from (o.HandoverImage).
func handoverParts(n *valkeyv1.ValkeyNode, o NodeOptions, tls bool) (init corev1.Container, vol corev1.Volume, mount corev1.VolumeMount, hook *corev1.Lifecycle, ok bool) {
	if o.HandoverImage == "" {
		return init, vol, mount, nil, false
	}
	bin := path.Join(HandoverDir, HandoverBinary)
	init = corev1.Container{
		Name:    HandoverContainer,
		Image:   o.HandoverImage,
		Command: []string{OperatorEntrypoint, HandoverInstallCommand, bin},
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false),
			ReadOnlyRootFilesystem:   ptr.To(true),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		},
		VolumeMounts: []corev1.VolumeMount{{Name: volumeHandover, MountPath: HandoverDir}},
	}
	vol = corev1.Volume{Name: volumeHandover, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
	mount = corev1.VolumeMount{Name: volumeHandover, MountPath: HandoverDir, ReadOnly: true}
	grace := int64(DefaultGracePeriodSeconds)
	if g := n.Spec.TerminationGracePeriodSeconds; g != nil {
		grace = *g
	}
	cmd := []string{bin, HandoverCommand, fmt.Sprintf("--timeout=%s", HandoverTimeout(grace))}
	if tls {
		cmd = append(cmd, "--tls-dir="+TLSDir)
	}
	hook = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: cmd}}}
	return init, vol, mount, hook, true
}

// Template is the pod template of the workload, whichever kind it is.
func (o NodeObjects) Template() *corev1.PodTemplateSpec {
	if o.Deployment != nil {
		return &o.Deployment.Spec.Template
	}
	return &o.StatefulSet.Spec.Template
}
