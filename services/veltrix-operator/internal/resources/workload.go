package resources

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strconv"
	"strings"

	veltrixv1 "github.com/opsuite/suite/api/veltrix/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

func meta(c *veltrixv1.VeltrixCluster, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: c.Namespace, Labels: Labels(c)}
}

// ServiceAccount is the members' identity; they need no API access.
func ServiceAccount(c *veltrixv1.VeltrixCluster) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{
		TypeMeta:                     metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
		ObjectMeta:                   meta(c, ServiceAccountName(c)),
		AutomountServiceAccountToken: ptr.To(false),
	}
}

func ports(c *veltrixv1.VeltrixCluster) []corev1.ServicePort {
	return []corev1.ServicePort{
		{Name: "server", Port: c.Spec.ServerPort, TargetPort: intstr.FromString("server"), Protocol: corev1.ProtocolTCP},
		{Name: "metrics", Port: c.Spec.MetricsPort, TargetPort: intstr.FromString("metrics"), Protocol: corev1.ProtocolTCP},
	}
}

// HeadlessService gives every member its DNS name, published before the member is ready:
// a joining member must be reachable at its advertised address while it receives data.
func HeadlessService(c *veltrixv1.VeltrixCluster) *corev1.Service {
	p := append(ports(c), corev1.ServicePort{Name: "gossip", Port: c.Spec.GossipPort, TargetPort: intstr.FromString("gossip"), Protocol: corev1.ProtocolTCP})
	m := meta(c, HeadlessServiceName(c))
	m.Labels[LabelService] = ServiceHeadless
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: m,
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone, PublishNotReadyAddresses: true,
			Selector: SelectorLabels(c), Ports: p,
		},
	}
}

// ClientService balances clients over the ready (search-ready) members.
func ClientService(c *veltrixv1.VeltrixCluster) *corev1.Service {
	m := meta(c, ClientServiceName(c))
	m.Labels[LabelService] = ServiceClient
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: m,
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Selector: SelectorLabels(c), Ports: ports(c)},
	}
}

// EngineEnv is the engine's environment. indexMap turns on the map index, for nodes whose
// vm.max_map_count is too low for the native one; the io_uring bridge is set only when on,
// so clusters without it keep their config hash.
func EngineEnv(c *veltrixv1.VeltrixCluster, indexMap bool) map[string]string {
	env := map[string]string{EnvReplicationFactor: strconv.Itoa(int(c.Spec.ReplicationFactor))}
	if c.Spec.CacheMaxSizeMB != nil {
		env[EnvCacheMaxSizeMB] = strconv.FormatInt(*c.Spec.CacheMaxSizeMB, 10)
	}
	if indexMap {
		env[EnvIndex] = IndexMap
	}
	if v := c.Spec.URingBridgeEnv(); v != "" {
		env[EnvURingBridge] = v
	}
	return env
}

// ConfigMap holds the engine's environment.
func ConfigMap(c *veltrixv1.VeltrixCluster, env map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: meta(c, ConfigMapName(c)),
		Data:       env,
	}
}

// ConfigHash identifies an engine environment; on the pod template it rolls the members when
// the environment changes (env from a ConfigMap is read at start only).
func ConfigHash(env map[string]string) string {
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	h := sha256.New()
	for _, k := range keys {
		fmt.Fprintf(h, "%s=%s\n", k, env[k])
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// AdminTokenSecret is the generated admin token's Secret.
func AdminTokenSecret(c *veltrixv1.VeltrixCluster, token string) *corev1.Secret {
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: meta(c, GeneratedAdminTokenSecretName(c)),
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{AdminTokenKey: []byte(token)},
	}
}

// ServiceMonitor scrapes every member's /metrics through the headless Service (only that
// one: the client Service has the same port, and selecting both scraped each ready member
// twice). Every series carries the cluster's name (veltrix_io_cluster, from the Service).
func ServiceMonitor(c *veltrixv1.VeltrixCluster) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{
			"selector":          map[string]any{"matchLabels": toAny(ScrapedServiceLabels(c))},
			"namespaceSelector": map[string]any{"matchNames": []any{c.Namespace}},
			"targetLabels":      []any{LabelCluster},
			"endpoints":         []any{map[string]any{"port": "metrics", "path": "/metrics", "interval": "30s"}},
		},
	}}
	u.SetAPIVersion(ServiceMonitorGVK.Group + "/" + ServiceMonitorGVK.Version)
	u.SetKind(ServiceMonitorGVK.Kind)
	u.SetName(c.Name)
	u.SetNamespace(c.Namespace)
	u.SetLabels(Labels(c))
	return u
}

func toAny(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Args are the server's flags. Every member names the same bootstrap members in --peers
// and --join and announces its own FQDN, so a member added later joins online and the pod
// template never depends on size.
func Args(c *veltrixv1.VeltrixCluster) []string {
	boot := BootstrapMembers(c)
	peers := make([]string, len(boot))
	join := make([]string, len(boot))
	for i, m := range boot {
		peers[i] = m + "@" + AdvertiseAddr(c, m)
		join[i] = AdvertiseAddr(c, m)
	}
	n := max(c.Spec.DisksPerNode, 1)
	dirs := make([]string, n)
	for i := range n {
		dirs[i] = DataDir(i)
	}
	args := []string{
		fmt.Sprintf("--addr=:%d", c.Spec.ServerPort),
		fmt.Sprintf("--metrics-addr=:%d", c.Spec.MetricsPort),
		"--node-id=$(POD_NAME)",
		"--peers=" + strings.Join(peers, ","),
		"--join=" + strings.Join(join, ","),
		fmt.Sprintf("--advertise-addr=$(POD_NAME).%s.%s.svc.cluster.local:%d", HeadlessServiceName(c), c.Namespace, c.Spec.ServerPort),
		"--mode=" + string(c.Spec.Mode),
		"--net=" + string(c.Spec.Net),
		"--data-dirs=" + strings.Join(dirs, ","),
	}
	if c.Spec.RawVLog.Enabled {
		vlogs := make([]string, n)
		for i := range n {
			vlogs[i] = VLogDevice(i)
		}
		args = append(args, "--raw-vlogs="+strings.Join(vlogs, ","))
	}
	args = append(args, fmt.Sprintf("--replication-factor=%d", c.Spec.ReplicationFactor))
	if c.Spec.AuthConfig != nil {
		args = append(args, "--auth-config="+AuthConfigDir+"/"+c.Spec.AuthConfig.Key)
	}
	return args
}

// StatefulSet runs the members. replicas is what membership decided (grown at once to
// size, shrunk only once the highest member has left); configHash is ConfigHash of the
// ConfigMap's data.
func StatefulSet(c *veltrixv1.VeltrixCluster, replicas int32, configHash string) *appsv1.StatefulSet {
	token := AdminTokenRef(c)
	place := PlacementOf(c)
	podLabels := SelectorLabels(c)
	podLabels[LabelComponent] = ComponentServer
	podLabels[LabelCluster] = c.Name

	container := corev1.Container{
		Name:  ContainerName,
		Image: c.Spec.ImageRef(),
		Args:  Args(c),
		Env: []corev1.EnvVar{
			{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}},
			{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}},
			{Name: EnvAdminToken, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: token.Name}, Key: token.Key,
			}}},
		},
		EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: ConfigMapName(c)}}}},
		Ports: []corev1.ContainerPort{
			{Name: "server", ContainerPort: c.Spec.ServerPort, Protocol: corev1.ProtocolTCP},
			{Name: "metrics", ContainerPort: c.Spec.MetricsPort, Protocol: corev1.ProtocolTCP},
			{Name: "gossip", ContainerPort: c.Spec.GossipPort, Protocol: corev1.ProtocolTCP},
		},
		Resources: *c.Spec.Resources.DeepCopy(),
		// /readyz answers once the engine opened its data; search readiness is the
		// operator's readiness gate.
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromString("metrics")}},
			PeriodSeconds: 5, FailureThreshold: 3,
		},
		LivenessProbe: &corev1.Probe{
			ProbeHandler:        corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("metrics")}},
			InitialDelaySeconds: 10, PeriodSeconds: 10, FailureThreshold: 6,
		},
		// No preStop hook: the image is distroless (no shell), and the kubelet's SIGTERM is
		// what makes the server write its checkpoint within the grace period.
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false),
			ReadOnlyRootFilesystem:   ptr.To(true),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		},
	}
	var volumes []corev1.Volume
	n := max(c.Spec.DisksPerNode, 1)
	for i := range n {
		container.VolumeMounts = append(container.VolumeMounts, corev1.VolumeMount{Name: DataClaimName(i), MountPath: DataDir(i)})
		if c.Spec.RawVLog.Enabled {
			container.VolumeDevices = append(container.VolumeDevices, corev1.VolumeDevice{Name: VLogClaimName(i), DevicePath: VLogDevice(i)})
		}
	}
	if a := c.Spec.AuthConfig; a != nil {
		volumes = append(volumes, corev1.Volume{Name: "auth-config", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: a.Name, Items: []corev1.KeyToPath{{Key: a.Key, Path: a.Key}},
		}}})
		container.VolumeMounts = append(container.VolumeMounts, corev1.VolumeMount{Name: "auth-config", MountPath: AuthConfigDir, ReadOnly: true})
	}

	return &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: meta(c, StatefulSetName(c)),
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr.To(replicas),
			ServiceName: HeadlessServiceName(c),
			Selector:    &metav1.LabelSelector{MatchLabels: SelectorLabels(c)},
			// The bootstrap members must start together (each lists the others in --peers);
			// updates still go one pod at a time through maxUnavailable 1.
			PodManagementPolicy: appsv1.ParallelPodManagement,
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{
				Type:          appsv1.RollingUpdateStatefulSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{MaxUnavailable: ptr.To(intstr.FromInt32(1))},
			},
			// Claims outlive the pods and the StatefulSet: the data is the disks', and the
			// reclaim policy (the finalizer) decides about it.
			PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
				WhenDeleted: appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
				WhenScaled:  appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
			},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels: podLabels,
					Annotations: map[string]string{
						AnnotationSafeToEvict: "false",
						AnnotationConfigHash:  configHash,
					},
				},
				Spec: corev1.PodSpec{
					ServiceAccountName:            ServiceAccountName(c),
					AutomountServiceAccountToken:  ptr.To(false),
					TerminationGracePeriodSeconds: place.TerminationGracePeriodSeconds,
					ReadinessGates:                []corev1.PodReadinessGate{{ConditionType: veltrixv1.SearchReadyGate}},
					SecurityContext:               &corev1.PodSecurityContext{SeccompProfile: c.Spec.PodSeccompProfile()},
					NodeSelector:                  place.NodeSelector,
					Tolerations:                   place.Tolerations,
					Affinity:                      place.Affinity,
					TopologySpreadConstraints:     place.TopologySpreadConstraints,
					PriorityClassName:             place.PriorityClassName,
					Containers:                    []corev1.Container{container},
					Volumes:                       volumes,
				},
			},
			VolumeClaimTemplates: volumeClaimTemplates(c),
		},
	}
}

func copyMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
