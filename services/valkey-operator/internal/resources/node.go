package resources

import (
	"fmt"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// Exporter sidecar defaults.
const (
	DefaultExporterImage = "ghcr.io/oliver006/redis_exporter:v1.74.0"
	ExporterPort         = 9121
	ExporterContainer    = "exporter"
	ServerContainer      = "valkey"
)

// Volume names in the node's pod.
const (
	volumeConfig = "config"
	volumeACL    = "acl"
	volumeData   = "data"
	volumeTLS    = "tls"
)

// NodeOptions are what the node builder needs beyond the ValkeyNode.
type NodeOptions struct {
	// ExporterImage runs when spec.exporter.image is empty; empty means
	// DefaultExporterImage.
	ExporterImage string
	// HandoverImage is the operator's own image, whose binary the pods run as the server
	// container's preStop hook (handover.go); empty means no hook.
	HandoverImage string
}

// NodeObjects are the Kubernetes objects of one ValkeyNode: exactly one of StatefulSet and
// Deployment, and the PVC with persistence.
type NodeObjects struct {
	StatefulSet *appsv1.StatefulSet
	Deployment  *appsv1.Deployment
	PVC         *corev1.PersistentVolumeClaim
}

// NodeWorkload builds the workload running n's one pod and, with persistence, its data
// PVC. The PVC is a plain object mounted by claimName, not a volumeClaimTemplate, so the
// node controller alone decides its owner (reclaim policy) and its size (expansion).
func NodeWorkload(n *valkeyv1.ValkeyNode, o NodeOptions) NodeObjects {
	labels := NodeLabels(n)
	meta := metav1.ObjectMeta{Name: WorkloadName(n.Name), Namespace: n.Namespace, Labels: labels}
	// The selector is immutable: only labels that never change for this node.
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{
		LabelInstance: n.Spec.ClusterName,
		LabelNode:     n.Name,
	}}
	tmpl := podTemplate(n, o)

	var out NodeObjects
	if n.Spec.WorkloadType == valkeyv1.WorkloadTypeDeployment {
		out.Deployment = &appsv1.Deployment{
			TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
			ObjectMeta: meta,
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](1),
				Selector: selector,
				Template: tmpl,
				// Two pods of one member would be two cluster nodes with one identity.
				Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			},
		}
	} else {
		out.StatefulSet = &appsv1.StatefulSet{
			TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
			ObjectMeta: meta,
			Spec: appsv1.StatefulSetSpec{
				Replicas:    ptr.To[int32](1),
				ServiceName: ServiceName(n.Spec.ClusterName),
				Selector:    selector,
				Template:    tmpl,
			},
		}
	}
	if p := n.Spec.Persistence; p != nil {
		out.PVC = &corev1.PersistentVolumeClaim{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
			ObjectMeta: metav1.ObjectMeta{Name: PVCName(n.Name), Namespace: n.Namespace, Labels: labels},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				StorageClassName: p.DeepCopy().StorageClassName,
				Resources: corev1.VolumeResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceStorage: p.Size},
				},
			},
		}
	}
	return out
}

// TLSSecretName is the certificate Secret n mounts; empty without TLS. The cluster
// resolves it into spec.tls.certificate.secretName; a self-signed node without it falls
// back to the cluster's generated Secret.
func TLSSecretName(n *valkeyv1.ValkeyNode) string {
	switch {
	case n.Spec.TLS == nil:
		return ""
	case n.Spec.TLS.Certificate.SecretName != "":
		return n.Spec.TLS.Certificate.SecretName
	default:
		return SelfSignedTLSSecretName(n.Spec.ClusterName)
	}
}

func podTemplate(n *valkeyv1.ValkeyNode, o NodeOptions) corev1.PodTemplateSpec {
	s := &n.Spec
	var annotations map[string]string
	if h := n.Spec.ConfigHash; h != "" {
		annotations = map[string]string{AnnotationRestartHash: h}
	}
	tlsSecret := TLSSecretName(n)

	volumes := []corev1.Volume{
		{Name: volumeConfig, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: s.ServerConfigMapName}}}},
		{Name: volumeACL, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: s.UsersACLSecretName}}},
	}
	if s.Persistence != nil {
		volumes = append(volumes, corev1.Volume{Name: volumeData, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: PVCName(n.Name)}}})
	} else {
		volumes = append(volumes, corev1.Volume{Name: volumeData, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	}
	mounts := []corev1.VolumeMount{
		{Name: volumeConfig, MountPath: ConfigDir, ReadOnly: true},
		{Name: volumeACL, MountPath: ACLDir, ReadOnly: true},
		{Name: volumeData, MountPath: DataDir},
	}
	if tlsSecret != "" {
		volumes = append(volumes, corev1.Volume{Name: volumeTLS, VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{SecretName: tlsSecret}}})
		mounts = append(mounts, corev1.VolumeMount{Name: volumeTLS, MountPath: TLSDir, ReadOnly: true})
	}

	probe := func() *corev1.Probe {
		// tcpSocket, not exec: exec probes do not run on the local cluster, and a listening
		// port is what peers and clients need.
		return &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(ClientPort)}},
			PeriodSeconds: 5, FailureThreshold: 3,
		}
	}
	args := []string{ConfigDir + "/" + ConfigKeyServer, "--cluster-announce-ip", "$(POD_IP)"}
	if s.WorkloadType != valkeyv1.WorkloadTypeDeployment {
		// The StatefulSet pod's stable DNS name (headless Service = the cluster's name), what
		// clients get with networking.discovery.preferredEndpointType Hostname (CLUSTER
		// SHARDS lists it either way).
		args = append(args, "--cluster-announce-hostname", fmt.Sprintf("%s.%s.%s.svc", PodName(n.Name), ServiceName(n.Spec.ClusterName), n.Namespace))
	}
	server := corev1.Container{
		Name:    ServerContainer,
		Image:   s.Image,
		Command: []string{"valkey-server"},
		Args:    args,
		Env: []corev1.EnvVar{{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{
			FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}}},
		Ports: []corev1.ContainerPort{
			{Name: "valkey", ContainerPort: ClientPort, Protocol: corev1.ProtocolTCP},
			{Name: "cluster-bus", ContainerPort: BusPort, Protocol: corev1.ProtocolTCP},
		},
		Resources:      *s.Resources.DeepCopy(),
		VolumeMounts:   mounts,
		ReadinessProbe: probe(),
		LivenessProbe:  probe(),
	}
	var inits []corev1.Container
	if init, vol, mount, hook, ok := handoverParts(n, o, tlsSecret != ""); ok {
		inits = append(inits, init)
		volumes = append(volumes, vol)
		server.VolumeMounts = append(server.VolumeMounts, mount)
		server.Lifecycle = hook
	}
	if init, ok := restoreInit(n, o); ok {
		inits = append(inits, init)
	}
	containers := []corev1.Container{server}
	if s.Exporter.Enabled {
		containers = append(containers, exporter(n, o, tlsSecret != ""))
	}
	for i := range s.Containers {
		containers = mergeContainer(containers, *s.Containers[i].DeepCopy())
	}

	// A copy of the spec throughout: an apply decodes the server's answer into the result,
	// which must not reach back into the ValkeyNode.
	c := s.DeepCopy()
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: NodeLabels(n), Annotations: annotations},
		Spec: corev1.PodSpec{
			InitContainers:                inits,
			Containers:                    containers,
			Volumes:                       volumes,
			ImagePullSecrets:              c.ImagePullSecrets,
			NodeSelector:                  c.NodeSelector,
			Affinity:                      c.Affinity,
			Tolerations:                   c.Tolerations,
			TopologySpreadConstraints:     c.TopologySpreadConstraints,
			PriorityClassName:             c.PriorityClassName,
			SecurityContext:               c.PodSecurityContext,
			TerminationGracePeriodSeconds: c.TerminationGracePeriodSeconds,
		},
	}
}

// exporter is the Prometheus sidecar. It logs in as its own user, valkey-exporter, which
// may read what the exporter scrapes and nothing else, with the password of the Secret
// <cluster>-exporter (it never sees the operator's password) and, with TLS, presents the
// node certificate, since the server asks clients for one.
func exporter(n *valkeyv1.ValkeyNode, o NodeOptions, tls bool) corev1.Container {
	e := n.Spec.Exporter
	image := e.Image
	if image == "" {
		image = o.ExporterImage
	}
	if image == "" {
		image = DefaultExporterImage
	}
	addr := "redis://localhost:6379"
	if tls {
		addr = "rediss://localhost:6379"
	}
	env := []corev1.EnvVar{
		{Name: "REDIS_ADDR", Value: addr},
		{Name: "REDIS_USER", Value: ExporterUser},
		{Name: "REDIS_PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: ExporterSecretName(n.Spec.ClusterName)},
			Key:                  SecretKeyExporterPassword,
		}}},
		{Name: "REDIS_EXPORTER_WEB_LISTEN_ADDRESS", Value: ":9121"},
	}
	var mounts []corev1.VolumeMount
	if tls {
		env = append(env,
			corev1.EnvVar{Name: "REDIS_EXPORTER_TLS_CA_CERT_FILE", Value: TLSDir + "/" + TLSKeyCA},
			corev1.EnvVar{Name: "REDIS_EXPORTER_TLS_CLIENT_CERT_FILE", Value: TLSDir + "/" + TLSKeyCert},
			corev1.EnvVar{Name: "REDIS_EXPORTER_TLS_CLIENT_KEY_FILE", Value: TLSDir + "/" + TLSKeyKey},
		)
		mounts = []corev1.VolumeMount{{Name: volumeTLS, MountPath: TLSDir, ReadOnly: true}}
	}
	return corev1.Container{
		Name:            ExporterContainer,
		Image:           image,
		Args:            append([]string(nil), e.Args...),
		Env:             env,
		Ports:           []corev1.ContainerPort{{Name: MetricsPortName, ContainerPort: ExporterPort, Protocol: corev1.ProtocolTCP}},
		Resources:       *e.Resources.DeepCopy(),
		SecurityContext: e.SecurityContext.DeepCopy(),
		VolumeMounts:    mounts,
	}
}

// mergeContainer adds c to list, or, when list has the container c names (ContainerFor:
// upstream's names count for ours), lays c's set fields over it: scalars and probes
// replace, env, ports and mounts merge by name (by path for mounts), so a user can add a
// variable to the server without restating it. The merged container keeps its own name.
func mergeContainer(list []corev1.Container, c corev1.Container) []corev1.Container {
	i := -1
	for j := range list {
		if list[j].Name == ContainerFor(c.Name) {
			i = j
		}
	}
	if i < 0 {
		return append(list, c)
	}
	b := &list[i]
	if c.Image != "" {
		b.Image = c.Image
	}
	if c.Command != nil {
		b.Command = c.Command
	}
	if c.Args != nil {
		b.Args = c.Args
	}
	if c.WorkingDir != "" {
		b.WorkingDir = c.WorkingDir
	}
	if c.ImagePullPolicy != "" {
		b.ImagePullPolicy = c.ImagePullPolicy
	}
	if len(c.Resources.Limits) > 0 || len(c.Resources.Requests) > 0 || len(c.Resources.Claims) > 0 {
		b.Resources = c.Resources
	}
	for _, p := range []struct {
		dst **corev1.Probe
		src *corev1.Probe
	}{
		{&b.ReadinessProbe, c.ReadinessProbe}, {&b.LivenessProbe, c.LivenessProbe}, {&b.StartupProbe, c.StartupProbe},
	} {
		if p.src != nil {
			*p.dst = p.src
		}
	}
	if c.SecurityContext != nil {
		b.SecurityContext = c.SecurityContext
	}
	if c.Lifecycle != nil {
		b.Lifecycle = c.Lifecycle
	}
	b.EnvFrom = append(b.EnvFrom, c.EnvFrom...)
	b.Env = mergeBy(b.Env, c.Env, func(e corev1.EnvVar) string { return e.Name })
	b.Ports = mergeBy(b.Ports, c.Ports, func(p corev1.ContainerPort) string { return p.Name })
	b.VolumeMounts = mergeBy(b.VolumeMounts, c.VolumeMounts, func(m corev1.VolumeMount) string { return m.MountPath })
	return list
}

// mergeBy replaces the elements of base whose key an element of over has, and appends the
// rest of over, keeping base's order.
func mergeBy[T any](base, over []T, key func(T) string) []T {
	for _, o := range over {
		replaced := false
		for j := range base {
			if key(base[j]) == key(o) && key(o) != "" {
				base[j], replaced = o, true
			}
		}
		if !replaced {
			base = append(base, o)
		}
	}
	return base
}
