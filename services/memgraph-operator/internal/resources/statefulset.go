package resources

import (
	"fmt"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// StatefulSet is the role's StatefulSet with replicas pods. The replica count is the
// caller's decision (the controller holds a shrink back until the retiring members have
// left the cluster); everything else comes from the spec.
//
// Updates are OnDelete: a new template reaches a pod only when the operator deletes it,
// in the order that keeps a MAIN and a Raft quorum.
func StatefulSet(c *memgraphv1.MemgraphCluster, r Role, replicas int32) *appsv1.StatefulSet {
	labels := RoleLabels(c, r)
	storage := c.Spec.Storage.Data
	if r == RoleCoordinator {
		storage = c.Spec.Storage.Coordinators
	}
	sts := &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: metav1.ObjectMeta{Name: StatefulSetName(c.Name, r), Namespace: c.Namespace, Labels: labels},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To(replicas),
			Selector:            &metav1.LabelSelector{MatchLabels: Selector(c.Name, r)},
			ServiceName:         HeadlessServiceName(c.Name, r),
			PodManagementPolicy: appsv1.ParallelPodManagement,
			UpdateStrategy:      appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType},
			PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
				WhenDeleted: retention(c.Spec.Storage.WhenDeleted()),
				WhenScaled:  retention(c.Spec.Storage.WhenScaled()),
			},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: PodAnnotations(c, r)},
				Spec:       podSpec(c, r),
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{
				claim(VolumeLib, labels, storage.LibPVCSize, memgraphv1.DefaultLibPVCSize, storage.LibStorageClassName, storage.LibStorageAccessMode),
				claim(VolumeLog, labels, storage.LogPVCSize, memgraphv1.DefaultLogPVCSize, storage.LogStorageClassName, storage.LogStorageAccessMode),
			},
		},
	}
	if r == RoleCoordinator {
		sts.Spec.Ordinals = &appsv1.StatefulSetOrdinals{Start: FirstCoordinatorOrdinal}
	}
	return sts
}

func retention(a memgraphv1.RetentionAction) appsv1.PersistentVolumeClaimRetentionPolicyType {
	if a == memgraphv1.RetentionDelete {
		return appsv1.DeletePersistentVolumeClaimRetentionPolicyType
	}
	return appsv1.RetainPersistentVolumeClaimRetentionPolicyType
}

func claim(name string, labels map[string]string, size *resource.Quantity, defSize string, class *string, mode memgraphv1.AccessMode) corev1.PersistentVolumeClaim {
	q := resource.MustParse(defSize)
	if size != nil {
		q = size.DeepCopy()
	}
	if mode == "" {
		mode = memgraphv1.DefaultAccessMode
	}
	return corev1.PersistentVolumeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.PersistentVolumeAccessMode(mode)},
			StorageClassName: class,
			VolumeMode:       ptr.To(corev1.PersistentVolumeFilesystem),
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: q}},
		},
	}
}

func podSpec(c *memgraphv1.MemgraphCluster, r Role) corev1.PodSpec {
	p := placement(c, r)
	var gates []corev1.PodReadinessGate
	if r == RoleData {
		// Ready only once the coordinators gave the instance its role (the operator sets
		// the gate from the leader's SHOW INSTANCES): a just-started MAIN refuses writes
		// until promoted, and a roll must not go on before the instance serves again.
		gates = []corev1.PodReadinessGate{{ConditionType: memgraphv1.RoleAssignedGate}}
	}
	return corev1.PodSpec{
		ReadinessGates:                gates,
		Affinity:                      p.Affinity,
		NodeSelector:                  p.NodeSelector,
		Tolerations:                   p.Tolerations,
		TopologySpreadConstraints:     p.TopologySpreadConstraints,
		PriorityClassName:             p.PriorityClassName,
		TerminationGracePeriodSeconds: p.TerminationGracePeriodSeconds,
		ImagePullSecrets:              c.Spec.ImagePullSecrets,
		// Memgraph reads MEMGRAPH_* variables; Service links would only add noise.
		EnableServiceLinks: ptr.To(false),
		SecurityContext: &corev1.PodSecurityContext{
			RunAsUser:      ptr.To(RunAsUser),
			RunAsGroup:     ptr.To(RunAsGroup),
			FSGroup:        ptr.To(RunAsGroup),
			RunAsNonRoot:   ptr.To(true),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		Containers: []corev1.Container{container(c, r)},
		Volumes:    volumes(c),
	}
}

// volumes are the pod's volumes besides the claims: spec.tls.bolt's Secret, projected to
// the two files Memgraph reads (ca.crt is the operator's, not the pod's). No subPath
// anywhere, so the kubelet brings a renewed Secret into running pods.
func volumes(c *memgraphv1.MemgraphCluster) []corev1.Volume {
	if c.Spec.TLS == nil {
		return nil
	}
	return []corev1.Volume{{Name: VolumeBoltTLS, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
		SecretName:  c.Spec.TLS.Bolt.SecretName,
		Items:       []corev1.KeyToPath{{Key: TLSCertKey, Path: TLSCertKey}, {Key: TLSKeyKey, Path: TLSKeyKey}},
		DefaultMode: ptr.To(BoltTLSFileMode),
	}}}}
}

func volumeMounts(c *memgraphv1.MemgraphCluster) []corev1.VolumeMount {
	m := []corev1.VolumeMount{
		{Name: VolumeLib, MountPath: LibDir},
		{Name: VolumeLog, MountPath: LogDir},
	}
	if c.Spec.TLS != nil {
		m = append(m, corev1.VolumeMount{Name: VolumeBoltTLS, MountPath: BoltTLSDir, ReadOnly: true})
	}
	return m
}

func container(c *memgraphv1.MemgraphCluster, r Role) corev1.Container {
	p := Ports(c)
	pullPolicy := c.Spec.Image.PullPolicy
	if pullPolicy == "" {
		pullPolicy = memgraphv1.DefaultImagePullPolicy
	}
	res := c.Spec.Resources.Data
	probes := c.Spec.Probes.Data
	probed := PortBolt
	if r == RoleCoordinator {
		res = c.Spec.Resources.Coordinators
		probes = c.Spec.Probes.Coordinators
		probed = PortCoordinator
	}
	return corev1.Container{
		Name:            ContainerName,
		Image:           c.Spec.Image.Reference(),
		ImagePullPolicy: pullPolicy,
		Command:         []string{Binary},
		Args:            Args(c, r),
		Env:             Env(c, r),
		Ports:           containerPorts(p, r),
		Resources:       *res.DeepCopy(),
		StartupProbe:    probe(probes.Startup, memgraphv1.DefaultStartupProbe, probed),
		ReadinessProbe:  probe(probes.Readiness, memgraphv1.DefaultReadinessProbe, probed),
		LivenessProbe:   probe(probes.Liveness, memgraphv1.DefaultLivenessProbe, probed),
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false),
			ReadOnlyRootFilesystem:   ptr.To(true),
			RunAsNonRoot:             ptr.To(true),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		},
		VolumeMounts: volumeMounts(c),
	}
}

// Args are the memgraph flags of the role: ports, identity (coordinators), recovery
// (data instances), logging, Bolt TLS (spec.tls), then spec.extraArgs (memgraph takes the last value of a
// repeated flag, so a user's --log-level wins; the CRD refuses the flags that must not).
func Args(c *memgraphv1.MemgraphCluster, r Role) []string {
	p := Ports(c)
	args := []string{
		fmt.Sprintf("--bolt-port=%d", p.Bolt),
		fmt.Sprintf("--management-port=%d", p.Management),
		fmt.Sprintf("--metrics-port=%d", p.Metrics),
	}
	extra := c.Spec.ExtraArgs.Data
	if r == RoleCoordinator {
		args = append(args,
			fmt.Sprintf("--coordinator-port=%d", p.Coordinator),
			"--coordinator-id=$("+EnvCoordinatorID+")",
			"--coordinator-hostname=$("+EnvCoordinatorHostname+")",
			"--nuraft-log-file="+LogFile,
		)
		extra = c.Spec.ExtraArgs.Coordinators
	} else {
		args = append(args,
			"--data-recovery-on-startup=true",
			"--replication-restore-state-on-startup=true",
		)
	}
	args = append(args, "--also-log-to-stderr=true", "--log-level=INFO", "--log-file="+LogFile)
	if c.Spec.TLS != nil {
		// Both roles: a coordinator serves Bolt (the operator's admin queries) too.
		args = append(args, "--bolt-cert-file="+BoltTLSDir+"/"+TLSCertKey, "--bolt-key-file="+BoltTLSDir+"/"+TLSKeyKey)
	}
	for _, a := range extra {
		args = append(args, string(a))
	}
	return args
}

// Env is the role's environment: the pod's identity, the license from spec.secrets' Secret
// (the kubelet injects it; the operator never reads it), on data instances the admin user
// from spec.auth's Secret (a reference, so a changed password changes no template), then
// spec.extraEnv. Coordinators get no Bolt credentials: they store no users and run
// without auth (memgraph/helm-charts#227 stopped passing them too), so a user there
// would only be a second copy of the password in pods that never use it.
func Env(c *memgraphv1.MemgraphCluster, r Role) []corev1.EnvVar {
	field := func(name, path string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: path}}}
	}
	secret := func(name, secretName, key, def string) corev1.EnvVar {
		if key == "" {
			key = def
		}
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: secretName}, Key: key,
		}}}
	}
	env := []corev1.EnvVar{
		field(EnvPodName, "metadata.name"),
		field(EnvPodNamespace, "metadata.namespace"),
		secret(EnvLicense, c.Spec.Secrets.Name, c.Spec.Secrets.LicenseKey, memgraphv1.DefaultLicenseKey),
		secret(EnvOrganization, c.Spec.Secrets.Name, c.Spec.Secrets.OrganizationKey, memgraphv1.DefaultOrganizationKey),
	}
	if a := c.Spec.Auth; a != nil && r == RoleData {
		env = append(env,
			secret(EnvUser, a.SecretName, a.UserKey, memgraphv1.DefaultAuthUserKey),
			secret(EnvPassword, a.SecretName, a.PasswordKey, memgraphv1.DefaultAuthPasswordKey),
		)
	}
	extra := c.Spec.ExtraEnv.Data
	if r == RoleCoordinator {
		env = append(env,
			field(EnvCoordinatorID, "metadata.labels['"+LabelPodIndex+"']"),
			// The same FQDN PodFQDN registers, spelt with the pod's own variables.
			corev1.EnvVar{Name: EnvCoordinatorHostname, Value: fmt.Sprintf("$(%s).%s.$(%s).svc.%s",
				EnvPodName, HeadlessServiceName(c.Name, RoleCoordinator), EnvPodNamespace, ClusterDomain(c))},
		)
		extra = c.Spec.ExtraEnv.Coordinators
	}
	for _, e := range extra {
		env = append(env, corev1.EnvVar{Name: e.Name, Value: e.Value})
	}
	return env
}

func containerPorts(p memgraphv1.PortsSpec, r Role) []corev1.ContainerPort {
	port := func(name string, n int32) corev1.ContainerPort {
		return corev1.ContainerPort{Name: name, ContainerPort: n, Protocol: corev1.ProtocolTCP}
	}
	out := []corev1.ContainerPort{port(PortBolt, p.Bolt), port(PortManagement, p.Management)}
	if r == RoleCoordinator {
		out = append(out, port(PortCoordinator, p.Coordinator))
	} else {
		out = append(out, port(PortReplication, p.Replication))
	}
	return append(out, port(PortMetrics, p.Metrics))
}

// probe is a TCP probe on the role's port with the spec's timings; a field left out takes
// the default probe's value.
func probe(t *memgraphv1.ProbeTimings, def memgraphv1.ProbeTimings, port string) *corev1.Probe {
	v := def
	if t != nil {
		v.InitialDelaySeconds = t.InitialDelaySeconds
		pick := func(dst *int32, src int32) {
			if src > 0 {
				*dst = src
			}
		}
		pick(&v.PeriodSeconds, t.PeriodSeconds)
		pick(&v.TimeoutSeconds, t.TimeoutSeconds)
		pick(&v.FailureThreshold, t.FailureThreshold)
	}
	return &corev1.Probe{
		ProbeHandler:        corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString(port)}},
		InitialDelaySeconds: v.InitialDelaySeconds,
		PeriodSeconds:       v.PeriodSeconds,
		TimeoutSeconds:      v.TimeoutSeconds,
		FailureThreshold:    v.FailureThreshold,
		SuccessThreshold:    1,
	}
}
