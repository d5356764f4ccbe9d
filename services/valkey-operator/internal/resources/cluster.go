package resources

import (
	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// DefaultImage runs when spec.image is empty.
const DefaultImage = "valkey/valkey:8.1"

// Image is the server image of c.
func Image(c *valkeyv1.ValkeyCluster) string {
	if c.Spec.Image != "" {
		return c.Spec.Image
	}
	return DefaultImage
}

// Service is the headless Service that gives every member a DNS name and lets clients
// discover the cluster; it lists members before they are ready, since a joining member
// must be reachable to be met.
func Service(c *valkeyv1.ValkeyCluster) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: ServiceName(c.Name), Namespace: c.Namespace, Labels: ClusterLabels(c.Name)},
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			PublishNotReadyAddresses: true,
			Selector:                 PodSelector(c.Name),
			Ports: []corev1.ServicePort{
				{Name: "valkey", Port: ClientPort, TargetPort: intstr.FromString("valkey"), Protocol: corev1.ProtocolTCP},
				{Name: "cluster-bus", Port: BusPort, TargetPort: intstr.FromString("cluster-bus"), Protocol: corev1.ProtocolTCP},
			},
		},
	}
}

// ConfigMap holds the server config every member starts with and the live-settable part
// the node controller applies with CONFIG SET.
func ConfigMap(c *valkeyv1.ValkeyCluster, server, live string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: ConfigMapName(c.Name), Namespace: c.Namespace, Labels: ClusterLabels(c.Name)},
		Data:       map[string]string{ConfigKeyServer: server, ConfigKeyLive: live},
	}
}

// Secret is one of the cluster's own Secrets (internal passwords, ACL file, TLS).
func Secret(c *valkeyv1.ValkeyCluster, name string, data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.Namespace, Labels: ClusterLabels(c.Name)},
		Type:       corev1.SecretTypeOpaque,
		Data:       data,
	}
}

// Position is a member's place in the desired layout.
type Position struct{ Shard, Index int }

// Positions lists every desired member, shard by shard, index 0 (the primary) first.
func Positions(c *valkeyv1.ValkeyCluster) []Position {
	var out []Position
	for s := 0; s < int(c.Spec.Shards); s++ {
		for i := 0; i <= int(c.Spec.Replicas); i++ {
			out = append(out, Position{Shard: s, Index: i})
		}
	}
	return out
}

// ValkeyNode is the desired member at p: what it inherits from the cluster's spec, and the
// restart hash that rolls its pod when the restart-requiring config changes.
func ValkeyNode(c *valkeyv1.ValkeyCluster, p Position, restartHash string) *valkeyv1.ValkeyNode {
	sched := c.Spec.EffectiveScheduling()
	role := valkeyv1.RoleReplica
	if p.Index == 0 {
		role = valkeyv1.RolePrimary
	}
	n := &valkeyv1.ValkeyNode{
		TypeMeta: metav1.TypeMeta{APIVersion: valkeyv1.GroupVersion.String(), Kind: "ValkeyNode"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      NodeName(c.Name, p.Shard, p.Index),
			Namespace: c.Namespace,
		},
		Spec: valkeyv1.ValkeyNodeSpec{
			ClusterName:                   c.Name,
			ShardIndex:                    int32(p.Shard),
			NodeIndex:                     int32(p.Index),
			RoleHint:                      role,
			Image:                         Image(c),
			ImagePullSecrets:              c.Spec.ImagePullSecrets,
			WorkloadType:                  c.Spec.WorkloadType,
			Persistence:                   c.Spec.Persistence.DeepCopy(),
			Resources:                     *c.Spec.Resources.DeepCopy(),
			NodeSelector:                  sched.NodeSelector,
			Affinity:                      Affinity(c, p),
			Tolerations:                   sched.Tolerations,
			TopologySpreadConstraints:     sched.TopologySpreadConstraints,
			PriorityClassName:             sched.PriorityClassName,
			Exporter:                      *c.Spec.Exporter.DeepCopy(),
			ServerConfigMapName:           ConfigMapName(c.Name),
			ConfigHash:                    restartHash,
			UsersACLSecretName:            ACLSecretName(c.Name),
			TerminationGracePeriodSeconds: ptr.To(GracePeriodSeconds(c)),
			PodSecurityContext:            c.Spec.PodSecurityContext.DeepCopy(),
		},
	}
	// The ServiceMonitor is the cluster's: a change of its labels must not touch the nodes.
	n.Spec.Exporter.ServiceMonitor = nil
	if c.Spec.Networking != nil && c.Spec.Networking.External != nil {
		n.Spec.External = c.Spec.Networking.External.DeepCopy()
	}
	if c.Spec.Bootstrap != nil && p.Index == 0 {
		// Fixed for the node's life: the restore Secret, not the pod template, says
		// whether there is anything to load.
		n.Spec.RestoreSecretName = RestoreSecretName(c.Name)
	}
	for i := range c.Spec.Containers {
		n.Spec.Containers = append(n.Spec.Containers, *c.Spec.Containers[i].DeepCopy())
	}
	if t := c.Spec.EffectiveTLS(); t.Enabled {
		secret := t.SecretName
		if secret == "" {
			secret = SelfSignedTLSSecretName(c.Name)
		}
		n.Spec.TLS = &valkeyv1.TLSConfig{Certificate: valkeyv1.CertificateRef{SecretName: secret}}
	}
	n.Labels = NodeLabels(n)
	return n
}

// PodDisruptionBudget lets one member at a time be evicted: a shard keeps its primary or a
// replica that can take over, and the cluster keeps its majority of primaries.
func PodDisruptionBudget(c *valkeyv1.ValkeyCluster) *policyv1.PodDisruptionBudget {
	one := intstr.FromInt32(1)
	return &policyv1.PodDisruptionBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		ObjectMeta: metav1.ObjectMeta{Name: PDBName(c.Name), Namespace: c.Namespace, Labels: ClusterLabels(c.Name)},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: &one,
			Selector:       &metav1.LabelSelector{MatchLabels: PodSelector(c.Name)},
		},
	}
}
